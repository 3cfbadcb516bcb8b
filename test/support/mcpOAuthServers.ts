/**
 * A small OAuth authorization server (RFC 8414 metadata, RFC 7591 registration, PKCE S256,
 * rotating refresh tokens; it auto-approves) and an MCP server protected by it (401 with its
 * RFC 9728 resource metadata without one of its tokens), both on 127.0.0.1: what signing in to a
 * remote MCP server is tested against (test/mcp.oauth.test.ts, the dashboard's e2e test).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { createHash, randomBytes } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** The secret of the client "preset", registered with the authorization server by its operator (no dynamic registration). */
export const PRESET_SECRET = "preset-client-secret-0123456789abcdef"

const b64url = (b: Buffer) => b.toString("base64url")
const token = (prefix: string) => `${prefix}_${b64url(randomBytes(24))}`

const listen = async (server: http.Server) => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const readBody = (req: http.IncomingMessage) =>
  new Promise<string>((resolve) => {
    let text = ""
    req.on("data", (c: Buffer) => (text += c.toString()))
    req.on("end", () => resolve(text))
  })

/** The authorization server: auto-approves, issues access tokens of `lifetimeS` seconds and rotating refresh tokens. */
export const startAuthServer = async () => {
  const clients = new Map<string, { redirectUris: ReadonlyArray<string>; secret?: string }>()
  const codes = new Map<string, { clientId: string; redirectUri: string; challenge: string; resource: string | null }>()
  const access = new Map<string, number>()
  const refresh = new Map<string, string>()
  const state = {
    url: "",
    lifetimeS: 2,
    registrations: 0,
    refreshGrants: 0,
    codeGrants: 0,
    /** Every token it issued: none may show up where the gateway shows things. */
    issued: new Set<string>(),
    resources: new Set<string | null>(),
    validAccess: (t: string) => (access.get(t) ?? 0) > Date.now(),
    revokeAccess: () => access.clear(),
    revokeRefresh: () => refresh.clear()
  }
  clients.set("preset", { redirectUris: [], secret: PRESET_SECRET })
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
    res.end(JSON.stringify(body))
  }
  const issue = (res: http.ServerResponse, clientId: string) => {
    const accessToken = token("at")
    const refreshToken = token("rt")
    access.set(accessToken, Date.now() + state.lifetimeS * 1000)
    refresh.set(refreshToken, clientId)
    state.issued.add(accessToken).add(refreshToken)
    json(res, 200, { access_token: accessToken, token_type: "Bearer", expires_in: state.lifetimeS, refresh_token: refreshToken })
  }
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", state.url)
    if (url.pathname === "/.well-known/oauth-authorization-server")
      return json(res, 200, {
        issuer: state.url,
        authorization_endpoint: `${state.url}/authorize`,
        token_endpoint: `${state.url}/token`,
        registration_endpoint: `${state.url}/register`,
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none", "client_secret_basic", "client_secret_post"],
        scopes_supported: ["mcp:tools"]
      })
    if (url.pathname === "/register" && req.method === "POST") {
      const body = JSON.parse(await readBody(req)) as { redirect_uris: Array<string> }
      const clientId = `dyn_${b64url(randomBytes(8))}`
      clients.set(clientId, { redirectUris: body.redirect_uris })
      state.registrations++
      return json(res, 201, { ...body, client_id: clientId, client_id_issued_at: Math.floor(Date.now() / 1000) })
    }
    if (url.pathname === "/authorize") {
      const p = url.searchParams
      const client = clients.get(p.get("client_id") ?? "")
      const redirectUri = p.get("redirect_uri") ?? ""
      if (!client || (client.redirectUris.length > 0 && !client.redirectUris.includes(redirectUri)))
        return json(res, 400, { error: "invalid_request", error_description: "unknown client or redirect_uri" })
      if (p.get("code_challenge_method") !== "S256" || !p.get("code_challenge"))
        return json(res, 400, { error: "invalid_request", error_description: "PKCE S256 required" })
      const code = token("code")
      codes.set(code, { clientId: p.get("client_id")!, redirectUri, challenge: p.get("code_challenge")!, resource: p.get("resource") })
      const back = new URL(redirectUri)
      back.searchParams.set("code", code)
      back.searchParams.set("state", p.get("state") ?? "")
      back.searchParams.set("iss", state.url)
      res.writeHead(302, { location: back.toString() })
      return res.end()
    }
    if (url.pathname === "/token" && req.method === "POST") {
      const p = new URLSearchParams(await readBody(req))
      const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? "")
      const [basicId, basicSecret] = basic ? Buffer.from(basic[1]!, "base64").toString().split(":") : []
      const clientId = basicId ?? p.get("client_id") ?? ""
      const client = clients.get(clientId)
      if (!client || (client.secret !== undefined && (basicSecret ?? p.get("client_secret")) !== client.secret))
        return json(res, 401, { error: "invalid_client" })
      state.resources.add(p.get("resource"))
      if (p.get("grant_type") === "authorization_code") {
        const c = codes.get(p.get("code") ?? "")
        codes.delete(p.get("code") ?? "")
        const verifier = p.get("code_verifier") ?? ""
        if (
          !c ||
          c.clientId !== clientId ||
          c.redirectUri !== p.get("redirect_uri") ||
          b64url(createHash("sha256").update(verifier).digest()) !== c.challenge
        )
          return json(res, 400, { error: "invalid_grant", error_description: "code, verifier or redirect_uri do not match" })
        state.codeGrants++
        return issue(res, clientId)
      }
      if (p.get("grant_type") === "refresh_token") {
        const rt = p.get("refresh_token") ?? ""
        if (refresh.get(rt) !== clientId) return json(res, 400, { error: "invalid_grant", error_description: "unknown refresh token" })
        refresh.delete(rt)
        state.refreshGrants++
        return issue(res, clientId)
      }
      return json(res, 400, { error: "unsupported_grant_type" })
    }
    res.writeHead(404).end()
  })
  state.url = await listen(server)
  return { ...state, get: () => state, close: () => new Promise<void>((r) => server.close(() => r())) }
}

/** The MCP server: 401 with its resource metadata without a valid token of the authorization server; a tool with one. */
export const startResourceServer = async (as: { validAccess: (t: string) => boolean; url: () => string }) => {
  const state = { url: "", unauthorized: 0, refusedTokens: 0, calls: 0 }
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", state.url)
    if (url.pathname.startsWith("/.well-known/oauth-protected-resource")) {
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(JSON.stringify({ resource: `${state.url}/mcp`, authorization_servers: [as.url()], scopes_supported: ["mcp:tools"] }))
    }
    if (url.pathname !== "/mcp") return res.writeHead(404).end()
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1]
    if (bearer === undefined || !as.validAccess(bearer)) {
      state.unauthorized++
      if (bearer !== undefined) state.refusedTokens++
      res.writeHead(401, {
        "www-authenticate": `Bearer ${bearer ? 'error="invalid_token", ' : ""}resource_metadata="${state.url}/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`,
        "content-type": "text/plain"
      })
      return res.end("sign in first")
    }
    const body = req.method === "POST" ? JSON.parse(await readBody(req)) : undefined
    const mcp = new Server({ name: "locked", version: "1.0.0" }, { capabilities: { tools: {} } })
    mcp.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [{ name: "whoami", description: "Who the token says you are", inputSchema: { type: "object", properties: {} } }]
    }))
    mcp.setRequestHandler(CallToolRequestSchema, async () => {
      state.calls++
      return { content: [{ type: "text", text: "signed in as dev@example.test" }] }
    })
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    res.on("close", () => {
      void transport.close()
      void mcp.close()
    })
    await mcp.connect(transport)
    await transport.handleRequest(req, res, body)
  })
  state.url = await listen(server)
  return { state, close: () => new Promise<void>((r) => server.close(() => r())) }
}
