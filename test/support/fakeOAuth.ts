import * as crypto from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A fake OAuth 2.0 authorization server on 127.0.0.1: the authorization endpoint (it approves at
 * once and redirects back with a code bound to the PKCE challenge), the token endpoint
 * (authorization_code with S256 verification, refresh_token, the RFC 8628 device_code grant,
 * form or JSON bodies) and the device authorization endpoint. It records what it was asked and
 * every token it issued, so tests can assert none of them leaks.
 */
export interface TokenCall {
  readonly at: number
  readonly grant: string
  readonly params: Record<string, string>
  readonly contentType: string
}

const s256 = (verifier: string) => crypto.createHash("sha256").update(verifier).digest("base64url")
const jwt = (claims: Record<string, unknown>) =>
  `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig`

export class FakeOAuth {
  readonly tokenCalls: Array<TokenCall> = []
  readonly authorizeCalls: Array<URLSearchParams> = []
  readonly deviceCalls: Array<Record<string, string>> = []
  /** Every access and refresh token issued, in order. */
  readonly issued: Array<string> = []
  /** Code exchanges whose verifier matched the challenge. */
  verified = 0
  /** Lifetime (s) of the tokens of a new grant, and of refreshed ones. */
  accessTtl = 3600
  refreshTtl = 3600
  email = "dev@example.test"
  /** Device polls answered before success, in order (`authorization_pending`, `slow_down`, `access_denied`, ...). */
  deviceScript: Array<string> = []
  deviceInterval = 0
  /** Refresh requests answered with this status before they succeed again. */
  failRefreshes = 0
  failStatus = 503
  /** Refresh tokens the server no longer honours (invalid_grant). */
  readonly revoked = new Set<string>()
  private readonly codes = new Map<string, { challenge: string; clientId: string; redirectUri: string }>()
  private readonly devices = new Map<string, { challenge: string | undefined }>()
  private readonly refreshTokens = new Set<string>()
  private seq = 0

  private constructor(
    private readonly server: http.Server,
    readonly url: string
  ) {}

  static async start(): Promise<FakeOAuth> {
    let self: FakeOAuth | undefined
    const server = http.createServer((req, res) => void self!.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new FakeOAuth(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    return self
  }

  get refreshCalls(): ReadonlyArray<TokenCall> {
    return this.tokenCalls.filter((c) => c.grant === "refresh_token")
  }
  get lastAccessToken(): string {
    return [...this.issued].reverse().find((t) => t.startsWith("at-"))!
  }
  /** invalid_grant for every refresh token issued so far. */
  revokeAll(): void {
    for (const t of this.refreshTokens) this.revoked.add(t)
  }

  private tokens(res: http.ServerResponse, ttl: number, withId: boolean) {
    const n = ++this.seq
    const access = `at-${n}-${crypto.randomBytes(12).toString("hex")}`
    const refresh = `rt-${n}-${crypto.randomBytes(12).toString("hex")}`
    this.issued.push(access, refresh)
    this.refreshTokens.add(refresh)
    const body: Record<string, unknown> = {
      access_token: access,
      token_type: "Bearer",
      expires_in: ttl,
      refresh_token: refresh,
      scope: "openid"
    }
    if (withId) body["id_token"] = jwt({ sub: "acct-123", email: this.email })
    this.json(res, 200, body)
  }

  private json(res: http.ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { "content-type": "application/json" })
    res.end(JSON.stringify(body))
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? "/", this.url)
    let raw = ""
    for await (const chunk of req) raw += String(chunk)
    const contentType = String(req.headers["content-type"] ?? "")
    const params: Record<string, string> = contentType.includes("json")
      ? (JSON.parse(raw || "{}") as Record<string, string>)
      : Object.fromEntries(new URLSearchParams(raw))

    if (req.method === "GET" && url.pathname === "/authorize") {
      const q = url.searchParams
      this.authorizeCalls.push(q)
      if (q.get("code_challenge_method") !== "S256" || !q.get("code_challenge"))
        return this.json(res, 400, { error: "invalid_request", error_description: "PKCE S256 required" })
      const code = `code-${crypto.randomBytes(8).toString("hex")}`
      this.codes.set(code, { challenge: q.get("code_challenge")!, clientId: q.get("client_id")!, redirectUri: q.get("redirect_uri")! })
      const back = new URL(q.get("redirect_uri")!)
      back.searchParams.set("code", code)
      back.searchParams.set("state", q.get("state")!)
      res.writeHead(302, { location: back.toString() })
      return res.end()
    }
    if (req.method === "POST" && url.pathname === "/device/code") {
      this.deviceCalls.push(params)
      const device = `dc-${crypto.randomBytes(8).toString("hex")}`
      this.devices.set(device, { challenge: params["code_challenge"] })
      return this.json(res, 200, {
        device_code: device,
        user_code: "ABCD-1234",
        verification_uri: `${this.url}/device`,
        verification_uri_complete: `${this.url}/device?user_code=ABCD-1234`,
        expires_in: 600,
        interval: this.deviceInterval
      })
    }
    if (req.method === "POST" && url.pathname === "/token") {
      const grant = params["grant_type"] ?? ""
      this.tokenCalls.push({ at: Date.now(), grant, params, contentType })
      if (grant === "authorization_code") {
        const bound = this.codes.get(params["code"] ?? "")
        this.codes.delete(params["code"] ?? "")
        if (!bound || bound.clientId !== params["client_id"] || bound.redirectUri !== params["redirect_uri"])
          return this.json(res, 400, { error: "invalid_grant", error_description: "unknown code" })
        if (s256(params["code_verifier"] ?? "") !== bound.challenge)
          return this.json(res, 400, { error: "invalid_grant", error_description: "PKCE verification failed" })
        this.verified++
        return this.tokens(res, this.accessTtl, true)
      }
      if (grant === "refresh_token") {
        if (this.failRefreshes > 0) {
          this.failRefreshes--
          return this.json(res, this.failStatus, { error: "temporarily_unavailable" })
        }
        const token = params["refresh_token"] ?? ""
        if (!this.refreshTokens.has(token) || this.revoked.has(token))
          return this.json(res, 400, { error: "invalid_grant", error_description: "refresh token revoked" })
        return this.tokens(res, this.refreshTtl, false)
      }
      if (grant === "urn:ietf:params:oauth:grant-type:device_code") {
        const device = this.devices.get(params["device_code"] ?? "")
        if (!device) return this.json(res, 400, { error: "invalid_grant" })
        const next = this.deviceScript.shift()
        if (next) return this.json(res, 400, { error: next })
        if (device.challenge && s256(params["code_verifier"] ?? "") !== device.challenge)
          return this.json(res, 400, { error: "invalid_grant", error_description: "PKCE verification failed" })
        this.devices.delete(params["device_code"]!)
        this.verified++
        return this.tokens(res, this.accessTtl, true)
      }
      return this.json(res, 400, { error: "unsupported_grant_type" })
    }
    this.json(res, 404, { error: "not_found" })
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
