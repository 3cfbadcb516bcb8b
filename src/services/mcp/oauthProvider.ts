/**
 * The `OAuthClientProvider` the SDK's `auth()` and the connections' transports drive for one MCP
 * server (docs/mcp.md, "Signing in to a remote server (OAuth)"), over the server's stored grant.
 * Types only from the SDK: McpOAuth builds the connections' providers without loading it.
 */
import type { OAuthClientProvider, OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js"
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import type { McpServerOAuthClient } from "../../domain/mcpServers.js"
import { VERSION } from "../../kernel/version.js"

/** The SDK's OAuth client and what the gateway does with it (oauthClient.ts), loaded at the first sign-in or refresh. */
export const loadOAuthClient = () => import("./oauthClient.js")

/** A server's grant as the provider reads and writes it (the store behind it: McpOAuth). */
export interface GrantAccess {
  readonly client: () => OAuthClientInformationMixed | undefined
  /** The tokens as stored now (read again first if another process changed them). */
  readonly tokens: () => Promise<OAuthTokens | undefined>
  readonly discovery: () => OAuthDiscoveryState | undefined
  readonly saveClient: (client: OAuthClientInformationMixed | null) => Promise<void>
  /** `signIn`: tokens of a completed sign-in (else a refresh's). */
  readonly saveTokens: (tokens: OAuthTokens | null, signIn: boolean) => Promise<void>
  readonly saveDiscovery: (discovery: OAuthDiscoveryState | null) => Promise<void>
}

/**
 * What the provider is for: `start` (a sign-in begins: fresh discovery, no tokens offered so the
 * SDK asks for an authorization, the URL and verifier kept), `finish` (the code exchanged with the
 * verifier kept at the start), `connection` (the transport's: its token on every request, a
 * refresh when the server answers 401; it never begins a sign-in itself).
 */
export type ProviderMode =
  | { readonly kind: "start"; readonly state: string; readonly begun: (url: URL, verifier: string) => void }
  | { readonly kind: "finish"; readonly verifier: string }
  | { readonly kind: "connection" }

export interface ProviderOptions {
  readonly redirectUri: string
  /** The admin's client (its id, secret, scopes), or null: registered dynamically. */
  readonly configured: McpServerOAuthClient | null | undefined
  readonly grant: GrantAccess
  readonly mode: ProviderMode
}

/** The client the gateway registers as (RFC 7591): a public client with PKCE, unless it was given a secret. */
const clientMetadataOf = (o: ProviderOptions): OAuthClientMetadata => ({
  client_name: "AI gateway",
  software_id: "gateway",
  software_version: VERSION,
  redirect_uris: [o.redirectUri],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
  ...(o.configured?.scopes.length ? { scope: o.configured.scopes.join(" ") } : {})
})

/** The `OAuthClientProvider` of one server's grant. */
export const makeProvider = (o: ProviderOptions): OAuthClientProvider => {
  let verifier: string | undefined
  // The refresh token of the tokens last handed to the SDK: see invalidateCredentials.
  let given: string | undefined
  const configured = o.configured?.clientId
    ? { client_id: o.configured.clientId, ...(o.configured.clientSecret ? { client_secret: o.configured.clientSecret } : {}) }
    : undefined
  return {
    get redirectUrl() {
      return o.redirectUri
    },
    get clientMetadata() {
      return clientMetadataOf(o)
    },
    state: () => (o.mode.kind === "start" ? o.mode.state : ""),
    clientInformation: () => configured ?? o.grant.client(),
    // A configured client is the admin's to change; a registered one (stamped with its issuer by the SDK) is kept.
    saveClientInformation: (info) => (configured === undefined ? o.grant.saveClient(info) : undefined),
    tokens: async () => {
      if (o.mode.kind === "start") return undefined
      const tokens = await o.grant.tokens()
      given = tokens?.refresh_token
      return tokens
    },
    saveTokens: (tokens) => o.grant.saveTokens(tokens, o.mode.kind === "finish"),
    redirectToAuthorization: (url) => {
      if (o.mode.kind === "start" && verifier !== undefined) o.mode.begun(url, verifier)
    },
    saveCodeVerifier: (v) => {
      if (o.mode.kind === "start") verifier = v
    },
    codeVerifier: () => {
      if (o.mode.kind === "finish") return o.mode.verifier
      throw new Error("no sign-in is in progress")
    },
    invalidateCredentials: async (scope) => {
      if (scope === "all" || scope === "client") await o.grant.saveClient(null)
      // A refresh token refused because the schedule (or another connection) rotated it meanwhile:
      // the new tokens stay, and the SDK's second try uses them.
      const rotated = given !== undefined && (await o.grant.tokens())?.refresh_token !== given
      if ((scope === "all" || scope === "tokens") && !rotated) await o.grant.saveTokens(null, false)
      if (scope === "all" || scope === "discovery") await o.grant.saveDiscovery(null)
    },
    // A sign-in discovers afresh (the server may have moved); the rest use what it found.
    discoveryState: () => (o.mode.kind === "start" ? undefined : o.grant.discovery()),
    saveDiscoveryState: (state) => o.grant.saveDiscovery(state)
  }
}
