/**
 * The OAuth 2.0 wire, as plain functions (no Effect): PKCE (RFC 7636, S256), the endpoints a
 * flow uses (per-connection override, else environment, else catalog), token answers and
 * refusals (RFC 6749 §5, RFC 8628 §3.5), and the account an id token names.
 */
import * as crypto from "node:crypto"
import type { EndpointOverrides } from "../../domain/oauth.js"
import type { OAuthSpec, ProviderSpec } from "../../domain/catalog/modelSpec.js"

const base64url = (b: Buffer): string => b.toString("base64").replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")

/** A random string of `bytes` bytes, base64url (a state, a verifier). */
export const randomToken = (bytes = 32): string => base64url(crypto.randomBytes(bytes))

/** A PKCE pair: the verifier stays in the gateway, the S256 challenge goes in the authorize URL. */
export const pkcePair = (): { readonly verifier: string; readonly challenge: string } => {
  const verifier = randomToken(48)
  return { verifier, challenge: base64url(crypto.createHash("sha256").update(verifier).digest()) }
}

/** The endpoints a flow uses, resolved. */
export interface OAuthEndpoints {
  readonly authorizeUrl: string | null
  readonly tokenUrl: string
  readonly deviceAuthorizationUrl: string | null
  readonly clientId: string
  readonly scopes: ReadonlyArray<string>
}

/** `GATEWAY_OAUTH_<ID>_` with the provider id upper-cased, other characters as `_` (`claude-code` → `CLAUDE_CODE`). */
export const envPrefix = (providerId: string): string => `GATEWAY_OAUTH_${providerId.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_`

export const ENV_SUFFIXES = ["AUTHORIZE_URL", "TOKEN_URL", "DEVICE_AUTHORIZATION_URL", "CLIENT_ID", "SCOPES"] as const

export const resolveEndpoints = (spec: OAuthSpec, env: Readonly<Record<string, string>>, overrides: EndpointOverrides): OAuthEndpoints => ({
  authorizeUrl: overrides.authorizeUrl ?? env["AUTHORIZE_URL"] ?? spec.authorizeUrl ?? null,
  tokenUrl: overrides.tokenUrl ?? env["TOKEN_URL"] ?? spec.tokenUrl,
  deviceAuthorizationUrl: overrides.deviceAuthorizationUrl ?? env["DEVICE_AUTHORIZATION_URL"] ?? spec.deviceAuthorizationUrl ?? null,
  clientId: overrides.clientId ?? env["CLIENT_ID"] ?? spec.clientId,
  scopes: overrides.scopes ?? (env["SCOPES"] ? env["SCOPES"].split(/[\s,]+/).filter((s) => s !== "") : spec.scopes)
})

/** The authorization-code URL with the PKCE challenge (S256) and the one-time state. */
export const authorizeUrl = (
  spec: OAuthSpec,
  e: OAuthEndpoints,
  p: { readonly redirectUri: string; readonly state: string; readonly challenge: string }
): string => {
  const url = new URL(e.authorizeUrl!)
  for (const [k, v] of Object.entries(spec.authorizeParams ?? {})) url.searchParams.set(k, v)
  url.searchParams.set("response_type", "code")
  url.searchParams.set("client_id", e.clientId)
  url.searchParams.set("redirect_uri", p.redirectUri)
  url.searchParams.set("scope", e.scopes.join(" "))
  url.searchParams.set("code_challenge", p.challenge)
  url.searchParams.set("code_challenge_method", "S256")
  url.searchParams.set("state", p.state)
  return url.toString()
}

/** A token request body in the provider's encoding. */
export const tokenBody = (
  spec: OAuthSpec,
  params: Readonly<Record<string, string>>
): { readonly contentType: string; readonly body: string } =>
  spec.tokenRequest === "json"
    ? { contentType: "application/json", body: JSON.stringify(params) }
    : { contentType: "application/x-www-form-urlencoded", body: new URLSearchParams(params).toString() }

/** A successful token answer, as the gateway keeps it. */
export interface TokenSet {
  readonly accessToken: string
  readonly refreshToken: string | null
  readonly idToken: string | null
  /** Epoch ms; null when the answer had no `expires_in`. */
  readonly expiresAt: number | null
  readonly email: string | null
  readonly accountId: string | null
  /** Qwen's `resource_url`: the host the token is good for. */
  readonly resourceUrl: string | null
}

const str = (v: unknown): string | null => (typeof v === "string" && v !== "" ? v : null)

/** The claims of a JWT (not verified: the gateway only reads who the account is, from the token endpoint it asked itself). */
export const jwtClaims = (token: string | null): Record<string, unknown> => {
  if (!token) return {}
  const part = token.split(".")[1]
  if (!part) return {}
  try {
    const claims = JSON.parse(Buffer.from(part, "base64url").toString("utf8")) as unknown
    return claims !== null && typeof claims === "object" && !Array.isArray(claims) ? (claims as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

/** A token answer (200), or a description of what is missing. */
export const parseTokenAnswer = (json: unknown, now: number): TokenSet | string => {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return "the token endpoint's answer is not a JSON object"
  const o = json as Record<string, unknown>
  const accessToken = str(o["access_token"])
  if (!accessToken) return "the token endpoint's answer has no access_token"
  const expiresIn =
    typeof o["expires_in"] === "number" ? o["expires_in"] : typeof o["expires_in"] === "string" ? Number(o["expires_in"]) : NaN
  const idToken = str(o["id_token"])
  const claims = jwtClaims(idToken)
  const account = o["account"] !== null && typeof o["account"] === "object" ? (o["account"] as Record<string, unknown>) : {}
  const openai =
    claims["https://api.openai.com/auth"] !== null && typeof claims["https://api.openai.com/auth"] === "object"
      ? (claims["https://api.openai.com/auth"] as Record<string, unknown>)
      : {}
  return {
    accessToken,
    refreshToken: str(o["refresh_token"]),
    idToken,
    expiresAt: Number.isFinite(expiresIn) && expiresIn > 0 ? now + expiresIn * 1000 : null,
    email: str(claims["email"]) ?? str(account["email_address"]) ?? str(account["email"]),
    accountId: str(openai["chatgpt_account_id"]) ?? str(account["uuid"]) ?? str(claims["sub"]),
    resourceUrl: str(o["resource_url"])
  }
}

/** An error answer's `error` code and description (RFC 6749 §5.2). */
export const tokenError = (json: unknown): { readonly error: string | null; readonly description: string | null } => {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return { error: null, description: null }
  const o = json as Record<string, unknown>
  const nested = o["error"] !== null && typeof o["error"] === "object" ? (o["error"] as Record<string, unknown>) : undefined
  return {
    error: str(o["error"]) ?? str(nested?.["type"]) ?? str(nested?.["code"]),
    description: str(o["error_description"]) ?? str(nested?.["message"]) ?? str(o["message"])
  }
}

/** A base URL from Qwen's `resource_url` (a bare host, or a URL): `https://<host>/v1`. */
export const baseUrlOfResource = (resource: string): string | null => {
  try {
    const url = new URL(resource.includes("://") ? resource : `https://${resource}`)
    const path = url.pathname.replace(/\/+$/, "")
    return `${url.origin}${path.endsWith("/v1") ? path : `${path}/v1`}`
  } catch {
    return null
  }
}

/** The code and state of a pasted redirect URL (`?code=&state=`), or of a code shown as `code#state` (Claude's console page). */
export const pastedCode = (input: {
  readonly url?: string | undefined
  readonly code?: string | undefined
  readonly state?: string | undefined
}): { readonly code: string | null; readonly state: string | null; readonly error: string | null } => {
  if (input.url) {
    let url: URL
    try {
      url = new URL(input.url)
    } catch {
      return { code: null, state: null, error: "url: not a URL (paste the whole address the browser ended on)" }
    }
    const q = url.searchParams
    const fromHash = new URLSearchParams(url.hash.replace(/^#/, ""))
    const error = q.get("error") ?? fromHash.get("error")
    if (error)
      return {
        code: null,
        state: q.get("state"),
        error: `the authorization server answered ${error}${q.get("error_description") ? `: ${q.get("error_description")}` : ""}`
      }
    return {
      code: q.get("code") ?? fromHash.get("code"),
      state: q.get("state") ?? fromHash.get("state") ?? input.state ?? null,
      error: null
    }
  }
  if (input.code) {
    const hash = input.code.indexOf("#")
    if (hash > 0) return { code: input.code.slice(0, hash), state: input.state ?? input.code.slice(hash + 1), error: null }
    return { code: input.code, state: input.state ?? null, error: null }
  }
  return { code: null, state: null, error: "url or code is required" }
}

/** Whether a provider signs in with OAuth and which flows it offers. */
export const oauthOf = (p: ProviderSpec | undefined): OAuthSpec | undefined => (p?.authClass === "oauth" ? p.oauth : undefined)
