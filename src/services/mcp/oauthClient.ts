/**
 * The SDK's OAuth client at work for one MCP server (docs/mcp.md, "Signing in to a remote server
 * (OAuth)"): a sign-in begun (the server's 401 read for its `resource_metadata` and `scope`,
 * discovery, dynamic registration unless a client is configured, PKCE) and finished (the code
 * exchanged), a token refreshed. Loaded by `loadOAuthClient`: no SDK until a server needs it.
 */
import {
  auth,
  discoverOAuthServerInfo,
  extractWWWAuthenticateParams,
  refreshAuthorization,
  selectResourceURL
} from "@modelcontextprotocol/sdk/client/auth.js"
import { OAuthError, ServerError } from "@modelcontextprotocol/sdk/server/auth/errors.js"
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js"
import type { McpServerOAuthClient, McpServerTransport } from "../../domain/mcpServers.js"
import { maskSecret } from "../../kernel/redact.js"
import { VERSION } from "../../kernel/version.js"
import { type GrantAccess, makeProvider } from "./oauthProvider.js"

/** How long one request to the server, its authorization server or the metadata documents may take. */
const REQUEST_TIMEOUT_MS = 15_000

/** fetch with a time limit (the SDK sets none on its OAuth requests). */
const fetchFn = (url: string | URL, init?: RequestInit) =>
  fetch(url, { ...init, signal: init?.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS) })

/** Whether the authorization server refused for good (an OAuth error other than server_error): trying again will not help. */
export const refusedForGood = (e: unknown): boolean => e instanceof OAuthError && !(e instanceof ServerError)

/** An error's text with the given secrets masked (an authorization server may echo what it was sent). */
export const describe = (e: unknown, secrets: ReadonlyArray<string | undefined>): string => {
  let text = e instanceof OAuthError ? `${e.errorCode}${e.message ? `: ${e.message}` : ""}` : e instanceof Error ? e.message : String(e)
  for (const s of secrets) if (s !== undefined && s.length >= 4) text = text.split(s).join(maskSecret(s))
  return text.length > 500 ? `${text.slice(0, 497)}...` : text
}

/**
 * What the server says when asked without a token (the MCP authorization spec: a 401 whose
 * `WWW-Authenticate` names its protected-resource metadata, and maybe the scope it needs). A
 * server that answers otherwise (or not at all) says nothing: discovery then tries the well-known
 * addresses.
 */
const challengeOf = async (serverUrl: URL, transport: McpServerTransport, headers: Readonly<Record<string, string>>) => {
  try {
    const res =
      transport === "sse"
        ? await fetchFn(serverUrl, { method: "GET", headers: { ...headers, accept: "text/event-stream" }, redirect: "manual" })
        : await fetchFn(serverUrl, {
            method: "POST",
            headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream" },
            body: JSON.stringify({
              jsonrpc: "2.0",
              id: 0,
              method: "initialize",
              params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "gateway", version: VERSION } }
            }),
            redirect: "manual"
          })
    await res.body?.cancel().catch(() => undefined)
    const session = res.headers.get("mcp-session-id")
    // A server that let us in without a token: the session it opened is closed again.
    if (res.ok && session !== null)
      await fetchFn(serverUrl, { method: "DELETE", headers: { ...headers, "mcp-session-id": session } })
        .then((r) => r.body?.cancel())
        .catch(() => undefined)
    return res.status === 401 || res.status === 403 ? extractWWWAuthenticateParams(res) : {}
  } catch {
    return {}
  }
}

/** Begins a sign-in: the authorization URL to open and the PKCE verifier to keep until the callback. */
export const beginSignIn = async (o: {
  readonly serverUrl: string
  readonly transport: McpServerTransport
  readonly headers: Readonly<Record<string, string>>
  readonly redirectUri: string
  readonly state: string
  readonly configured: McpServerOAuthClient | null | undefined
  readonly grant: GrantAccess
}): Promise<{ readonly authorizationUrl: string; readonly verifier: string }> => {
  const url = new URL(o.serverUrl)
  const challenge = await challengeOf(url, o.transport, o.headers)
  let begun: { url: URL; verifier: string } | undefined
  const provider = makeProvider({
    redirectUri: o.redirectUri,
    configured: o.configured,
    grant: o.grant,
    mode: { kind: "start", state: o.state, begun: (u, verifier) => void (begun = { url: u, verifier }) }
  })
  const scope = o.configured?.scopes.length ? o.configured.scopes.join(" ") : challenge.scope
  const result = await auth(provider, {
    serverUrl: url,
    ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
    ...(scope ? { scope } : {}),
    fetchFn
  })
  if (result !== "REDIRECT" || begun === undefined) throw new Error("the authorization server gave no authorization address")
  return { authorizationUrl: begun.url.toString(), verifier: begun.verifier }
}

/** Finishes a sign-in: the code exchanged for tokens (with the verifier kept at the start), which the grant stores. */
export const finishSignIn = async (o: {
  readonly serverUrl: string
  readonly redirectUri: string
  readonly verifier: string
  readonly code: string
  readonly configured: McpServerOAuthClient | null | undefined
  readonly grant: GrantAccess
}): Promise<void> => {
  const provider = makeProvider({
    redirectUri: o.redirectUri,
    configured: o.configured,
    grant: o.grant,
    mode: { kind: "finish", verifier: o.verifier }
  })
  const found = o.grant.discovery()?.resourceMetadataUrl
  const result = await auth(provider, {
    serverUrl: new URL(o.serverUrl),
    authorizationCode: o.code,
    ...(found ? { resourceMetadataUrl: new URL(found) } : {}),
    fetchFn
  })
  if (result !== "AUTHORIZED") throw new Error("the authorization server did not exchange the code")
}

/** Two authorization server identifiers, compared as the SDK compares them (a trailing `/` aside). */
const sameIssuer = (a: string, b: string) => {
  const norm = (s: string) => {
    try {
      return new URL(s).href.replace(/\/$/, "")
    } catch {
      return s.replace(/\/$/, "")
    }
  }
  return norm(a) === norm(b)
}

/** Refreshes the grant's access token with its refresh token; the grant stores the new tokens. Throws what the SDK threw. */
export const refreshGrant = async (o: {
  readonly serverUrl: string
  readonly redirectUri: string
  readonly configured: McpServerOAuthClient | null | undefined
  readonly grant: GrantAccess
}): Promise<void> => {
  const tokens = await o.grant.tokens()
  if (tokens?.refresh_token === undefined) throw new Error("no refresh token: sign in again")
  const provider = makeProvider({ redirectUri: o.redirectUri, configured: o.configured, grant: o.grant, mode: { kind: "connection" } })
  let discovery = o.grant.discovery()
  if (discovery === undefined) {
    discovery = await discoverOAuthServerInfo(o.serverUrl, { fetchFn })
    await o.grant.saveDiscovery(discovery)
  }
  const issuer = discovery.authorizationServerUrl
  if (typeof tokens.issuer === "string" && !sameIssuer(tokens.issuer, issuer))
    throw new Error(`the tokens were issued by ${tokens.issuer}, not ${issuer}: sign in again`)
  const clientInformation = await provider.clientInformation()
  if (clientInformation === undefined) throw new Error("no registered client: sign in again")
  const selected = await selectResourceURL(o.serverUrl, provider, discovery.resourceMetadata)
  // As auth() does: the metadata's resource indicator sent verbatim.
  const resource = selected && discovery.resourceMetadata ? discovery.resourceMetadata.resource : selected
  const fresh = await refreshAuthorization(issuer, {
    ...(discovery.authorizationServerMetadata ? { metadata: discovery.authorizationServerMetadata } : {}),
    clientInformation,
    refreshToken: tokens.refresh_token,
    ...(resource ? { resource } : {}),
    fetchFn
  })
  await o.grant.saveTokens({ ...fresh, issuer }, false)
}
