/**
 * The MCP gateway's endpoint (docs/mcp.md, "One endpoint for every server"): `/v1/mcp` serves the
 * allowed tools, resources and prompts of every registered server, named `<server>__<name>`, and
 * `/v1/mcp/{server}` those of one server under their own names, over streamable HTTP. Every
 * request needs a valid gateway key (stdio servers reach the disk), whatever inference needs.
 * Each session has its own SDK server whose handlers list through the catalog and forward through
 * McpUpstreams; every call is checked (access, tool policy, rate limit), forwarded with its
 * cancellation and progress, and recorded (src/inference/mcp/record.ts).
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import type { CallToolResult, GetPromptResult, ReadResourceResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import type * as http from "node:http"
import { MCP_SERVER_NAME_PATTERN } from "../../domain/mcpServers.js"
import { HostPolicy } from "../../platform/http/HostPolicy.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { trimmedHeader } from "../../platform/http/request.js"
import { Levels } from "../../services/accounting/Levels.js"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { Policies } from "../../services/governance/Policies.js"
import { McpServers } from "../../services/mcp/McpServers.js"
import { type McpCallOptions, McpUpstreams, type McpUpstreamError } from "../../services/mcp/McpUpstreams.js"
import { VERSION } from "../../kernel/version.js"
import { presentedKey } from "../auth.js"
import { isInitialize, readJsonRpc, reply } from "./jsonRpcHttp.js"
import { MCP_ALLOW_HEADER, type McpAccess, narrowingOf } from "./access.js"
import { META_NAME, makeCatalog, type Scope } from "./catalog.js"
import { type CheckedCall, INVALID_PARAMS, makeCheckedCall } from "./checkedCall.js"
import { makeRateLimiter } from "./rateLimit.js"
import { McpCallRecorder } from "./record.js"
import { makeSessionTable } from "./sessions.js"

/** The endpoint of every server; `${MCP_GATEWAY_PATH}/{server}` serves one. */
export const MCP_GATEWAY_PATH = "/v1/mcp"
const MAX_BODY_BYTES = 4 * 1024 * 1024
export const MAX_GATEWAY_MCP_SESSIONS = 1000
const SESSION_IDLE_MS = 30 * 60 * 1000

export { MCP_RATE_LIMITED, MCP_REFUSED } from "./checkedCall.js"

export interface McpGatewayShape {
  /** The node:http handler for `/v1/mcp` and `/v1/mcp/{server}`; `path` is the request's path without its query. */
  readonly handle: (req: http.IncomingMessage, res: http.ServerResponse, path: string) => void
  readonly sessionsActive: () => number
  /** One call checked, forwarded and recorded as `/v1/mcp` makes it (its rate limits shared): for the MCP tools of model requests. */
  readonly checkedCall: CheckedCall
}

/** Whether a path is the MCP gateway's. */
export const isMcpGatewayPath = (path: string): boolean =>
  path === MCP_GATEWAY_PATH || (path.startsWith(`${MCP_GATEWAY_PATH}/`) && path.indexOf("/", MCP_GATEWAY_PATH.length + 1) < 0)

/** What a session keeps: which servers it serves and who opened it. */
interface SessionData {
  readonly scope: Scope
  /**
   * The caller's access: its narrowing is the session's (from its initialize); the key's ceiling
   * and the levels above it are read again at each request (`sessionFor`), so that a change of
   * the key's `mcp.allow` or of a level reaches the sessions already open.
   */
  access: McpAccess
}

/** What a session id carries, sealed: the key that opened it, its scope (a server, or null for every one), its narrowing. */
interface Portable {
  readonly k: string
  readonly s: string | null
  readonly n: ReadonlyArray<string> | null
}

/** How a session id made by `portableId` begins. */
const SESSION_ID_PREFIX = "gwmcp_"

/** The SDK's server and its request schemas, loaded at the first session (`loadSdk`; the tests' setup loads it ahead). */
let sdk:
  | Promise<[typeof import("@modelcontextprotocol/sdk/server/index.js"), typeof import("@modelcontextprotocol/sdk/types.js")]>
  | undefined
export const loadSdk = () =>
  (sdk ??= Promise.all([import("@modelcontextprotocol/sdk/server/index.js"), import("@modelcontextprotocol/sdk/types.js")]))

export class McpGateway extends Context.Tag("gateway/McpGateway")<McpGateway, McpGatewayShape>() {
  static readonly layer = Layer.scoped(
    McpGateway,
    Effect.gen(function* () {
      const servers = yield* McpServers
      const upstreams = yield* McpUpstreams
      const keys = yield* ApiKeys
      const levels = yield* Levels
      const hosts = yield* HostPolicy
      const policies = yield* Effect.serviceOption(Policies)
      const secrets = yield* Secrets
      const recorder = yield* McpCallRecorder
      const runtime = yield* Effect.runtime<never>()
      const run = Runtime.runPromise(runtime)
      const catalog = makeCatalog(servers, upstreams)
      const table = makeSessionTable<SessionData>({ max: MAX_GATEWAY_MCP_SESSIONS, idleMs: SESSION_IDLE_MS })
      yield* Effect.addFinalizer(() => table.closeAll)
      yield* table.closeIdle.pipe(Effect.repeat(Schedule.spaced("1 minute")), Effect.forkScoped)

      // What a server offers changed: the sessions that see it hear so (their clients list again).
      const unsubscribe = upstreams.onChange((server) => {
        for (const s of table.sessions.values()) {
          if (s.data.scope !== undefined && s.data.scope !== server) continue
          void s.server.sendToolListChanged().catch(() => undefined)
          void s.server.sendResourceListChanged().catch(() => undefined)
          void s.server.sendPromptListChanged().catch(() => undefined)
        }
      })
      const unsubscribeServers = servers.onChange(() => {
        for (const s of table.sessions.values()) void s.server.sendToolListChanged().catch(() => undefined)
      })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          unsubscribe()
          unsubscribeServers()
        })
      )

      const checkedCall = makeCheckedCall({ servers, policies, recorder, limiter: makeRateLimiter() })
      /** One call, checked, forwarded and recorded (checkedCall.ts); a refusal or failure is the MCP error the client reads. */
      const call = async <A extends object>(
        session: SessionData,
        kind: "tool" | "resource" | "prompt",
        server: string,
        name: string,
        args: unknown,
        forward: () => Effect.Effect<A, McpUpstreamError>
      ): Promise<A> => {
        const [, { McpError }] = await loadSdk()
        const outcome = await run(Effect.either(checkedCall(session.access, kind, server, name, args, forward)))
        if (outcome._tag === "Right") return outcome.right
        throw new McpError(outcome.left.code, outcome.left.message, outcome.left.data)
      }

      /**
       * The tools a listing shows: those the tool policy blocks (`TOOL_POLICY_MODE=block`) are left
       * out, since a call of them would be refused; in `warn` mode they are listed (a call is let
       * through and recorded).
       */
      const listable = async (tools: Array<Tool>): Promise<Array<Tool>> => {
        if (Option.isNone(policies) || tools.length === 0) return tools
        const p = policies.value
        const verdicts = await run(
          Effect.forEach(tools, (tool) => p.toolRefusal([tool.name, String(tool._meta?.[META_NAME] ?? tool.name)]))
        )
        return tools.filter((_, i) => verdicts[i]?.mode !== "block")
      }

      /** The forwarding options of a request: its cancellation, and its progress notifications passed back when it asked for them. */
      const forwarding = (extra: RequestHandlerExtra<any, any>, progressToken: string | number | undefined): McpCallOptions => ({
        signal: extra.signal,
        ...(progressToken === undefined
          ? {}
          : {
              onProgress: (p) =>
                void extra.sendNotification({ method: "notifications/progress", params: { progressToken, ...p } }).catch(() => undefined)
            })
      })

      const makeServer = async (data: SessionData): Promise<Server> => {
        const [{ Server }, t] = await loadSdk()
        const server = new Server(
          {
            name: data.scope === undefined ? "gateway-mcp" : `gateway-mcp-${data.scope}`,
            title: "AI gateway: MCP servers",
            version: VERSION
          },
          {
            capabilities: { tools: { listChanged: true }, resources: { listChanged: true }, prompts: { listChanged: true } },
            instructions:
              data.scope === undefined
                ? "Tools, resources and prompts of the MCP servers registered in an AI gateway, each named <server>__<name>."
                : `Tools, resources and prompts of the MCP server ${data.scope}, through an AI gateway.`
          }
        )
        const { scope } = data
        server.setRequestHandler(t.ListToolsRequestSchema, async () => ({ tools: await listable(catalog.tools(scope, data.access)) }))
        server.setRequestHandler(t.ListPromptsRequestSchema, async () => ({ prompts: catalog.prompts(scope, data.access) }))
        server.setRequestHandler(t.ListResourcesRequestSchema, async () => ({ resources: catalog.resources(scope, data.access) }))
        server.setRequestHandler(t.ListResourceTemplatesRequestSchema, async () => ({
          resourceTemplates: catalog.resourceTemplates(scope, data.access)
        }))
        server.setRequestHandler(t.CallToolRequestSchema, async (request, extra) => {
          const exposed = request.params.name
          const resolved = catalog.resolve(scope, "tool", exposed)
          if (!resolved) throw new t.McpError(INVALID_PARAMS, `unknown tool ${exposed} (tools/list names the tools this key may call)`)
          const args = request.params.arguments
          return call<CallToolResult>(data, "tool", resolved.record.name, resolved.name, args, () =>
            upstreams.callTool(resolved.record.name, resolved.name, args, forwarding(extra, request.params._meta?.progressToken))
          )
        })
        server.setRequestHandler(t.GetPromptRequestSchema, async (request, extra) => {
          const exposed = request.params.name
          const resolved = catalog.resolve(scope, "prompt", exposed)
          if (!resolved) throw new t.McpError(INVALID_PARAMS, `unknown prompt ${exposed} (prompts/list names the prompts this key may use)`)
          const args = request.params.arguments
          return call<GetPromptResult>(data, "prompt", resolved.record.name, resolved.name, args, () =>
            upstreams.getPrompt(resolved.record.name, resolved.name, args, forwarding(extra, request.params._meta?.progressToken))
          )
        })
        server.setRequestHandler(t.ReadResourceRequestSchema, async (request, extra) => {
          const uri = request.params.uri
          const resolved = catalog.resolveResource(scope, uri, data.access)
          if (!resolved) throw new t.McpError(INVALID_PARAMS, `no MCP server here offers the resource ${uri}`)
          return call<ReadResourceResult>(data, "resource", resolved.record.name, resolved.name, { uri }, () =>
            upstreams.readResource(resolved.record.name, uri, forwarding(extra, request.params._meta?.progressToken))
          )
        })
        return server
      }

      /** The caller of a request: a valid key (with the inference or admin scope), else the answer was written. */
      const accessOf = (req: http.IncomingMessage, res: http.ServerResponse) =>
        Effect.gen(function* () {
          const presented = presentedKey(req, new URLSearchParams())
          const refuse = (message: string) => {
            req.resume()
            reply(res, 401, -32001, message, { "www-authenticate": 'Bearer realm="gateway"' })
            return undefined
          }
          if (!presented)
            return refuse(`${MCP_GATEWAY_PATH} needs a gateway API key, always: send it as 'Authorization: Bearer <key>' (or x-api-key)`)
          const key = yield* keys.verify(presented)
          if (Option.isNone(key)) return refuse("Invalid API key: the key is unknown, disabled or expired.")
          const k = key.value
          if (!k.scopes.includes("inference") && !k.scopes.includes("admin")) {
            req.resume()
            reply(res, 403, -32001, `key ${k.name} has neither the inference nor the admin scope, which ${MCP_GATEWAY_PATH} needs`)
            return undefined
          }
          const access: McpAccess = {
            keyId: k.id,
            keyName: k.name,
            ceiling: k.mcpAllow ?? null,
            narrowing: narrowingOf(req.headers[MCP_ALLOW_HEADER]),
            levels: levels.mcpAbove(k.id)
          }
          return access
        })

      /**
       * Session ids any worker (or gateway on the same storage key) can take up: the session's key,
       * scope and narrowing sealed with the storage key. Node's cluster spreads connections, not
       * sessions, over the workers, and an MCP client's requests come on several connections.
       */
      const portableId = (data: SessionData) => () =>
        SESSION_ID_PREFIX +
        Buffer.from(
          secrets.encrypt(
            JSON.stringify({ k: data.access.keyId, s: data.scope ?? null, n: data.access.narrowing ?? null } satisfies Portable)
          )
        ).toString("base64url")

      /** What a session id of another process says, when it is one of this gateway's (sealed with its key). */
      const unsealed = (id: string) =>
        !id.startsWith(SESSION_ID_PREFIX)
          ? Effect.succeed(undefined)
          : secrets.decrypt(Buffer.from(id.slice(SESSION_ID_PREFIX.length), "base64url").toString("utf8")).pipe(
              Effect.map((plain) => {
                try {
                  const p = JSON.parse(Redacted.value(plain)) as Portable
                  return typeof p.k === "string" && (p.s === null || typeof p.s === "string") ? p : undefined
                } catch {
                  return undefined
                }
              }),
              Effect.orElseSucceed(() => undefined)
            )

      const sessionFor = (req: http.IncomingMessage, res: http.ServerResponse, access: McpAccess, scope: Scope) =>
        Effect.gen(function* () {
          const id = trimmedHeader(req, "mcp-session-id")
          if (id === undefined)
            return void reply(
              res,
              400,
              -32000,
              "Bad Request: Mcp-Session-Id header is required (open a session with an initialize request first)"
            )
          let session = table.sessions.get(id)
          if (session === undefined) {
            // Opened by another worker or gateway: taken up here with the key, scope and narrowing it was opened with.
            const p = yield* unsealed(id)
            if (p !== undefined && p.k === access.keyId && p.s === (scope ?? null)) {
              const data: SessionData = { scope, access: { ...access, narrowing: p.n ?? undefined } }
              session = yield* table.adopt(id, p.k, data, yield* Effect.promise(() => makeServer(data)))
            } else if (p !== undefined && p.k !== access.keyId)
              return void reply(res, 403, -32000, "this session belongs to another key (the credentials differ from those that opened it)")
          }
          if (!session || session.data.scope !== scope)
            return void reply(res, 404, -32001, "Session not found: it was closed or never existed; initialize a new one")
          if (session.owner !== access.keyId)
            return void reply(res, 403, -32000, "this session belongs to another key (the credentials differ from those that opened it)")
          session.lastSeen = Date.now()
          // The key as it is now (its mcp.allow, the levels above it), the session's own narrowing.
          session.data.access = { ...access, narrowing: session.data.access.narrowing }
          return session
        })

      const serve = (transport: StreamableHTTPServerTransport, req: http.IncomingMessage, res: http.ServerResponse, body?: unknown) =>
        Effect.promise(() => transport.handleRequest(req, res, body))

      const handleRequest = (req: http.IncomingMessage, res: http.ServerResponse, path: string) =>
        Effect.gen(function* () {
          const refused = hosts.refusal(req)
          if (refused) {
            req.resume()
            return reply(res, 403, -32000, `Forbidden: ${refused.message}`)
          }
          const scope: Scope = path === MCP_GATEWAY_PATH ? undefined : decodeURIComponent(path.slice(MCP_GATEWAY_PATH.length + 1))
          if (scope !== undefined && (!MCP_SERVER_NAME_PATTERN.test(scope) || servers.byName(scope) === undefined)) {
            req.resume()
            return reply(res, 404, -32001, `no MCP server named ${JSON.stringify(scope)} (GET /api/mcp/servers lists them)`)
          }
          const access = yield* accessOf(req, res)
          if (access === undefined) return
          if (req.method === "GET" || req.method === "DELETE") {
            const session = yield* sessionFor(req, res, access, scope)
            if (session) yield* serve(session.transport, req, res)
            return
          }
          if (req.method !== "POST")
            return reply(res, 405, -32000, `Method Not Allowed: ${MCP_GATEWAY_PATH} takes POST, GET and DELETE`, {
              allow: "GET, POST, DELETE"
            })
          const read = yield* readJsonRpc(req, res, MAX_BODY_BYTES)
          if (read === undefined) return
          const body = read.body
          if (req.headers["mcp-session-id"] !== undefined) {
            const session = yield* sessionFor(req, res, access, scope)
            if (session) yield* serve(session.transport, req, res, body)
            return
          }
          if (!isInitialize(body))
            return reply(res, 400, -32000, "Bad Request: no Mcp-Session-Id header; a session begins with an initialize request")
          const data: SessionData = { scope, access }
          const server = yield* Effect.promise(() => makeServer(data))
          const transport = yield* table.open(access.keyId, data, server, portableId(data))
          yield* serve(transport, req, res, body)
        }).pipe(
          Effect.catchAllCause((cause) =>
            Effect.logError(`${req.method} ${path} failed unexpectedly`, Cause.pretty(cause)).pipe(
              Effect.zipRight(Effect.sync(() => reply(res, 500, -32603, "internal error (logged by the gateway)")))
            )
          )
        )

      return {
        handle: (req, res, path) => void Runtime.runFork(runtime)(handleRequest(req, res, path)),
        sessionsActive: () => table.sessions.size,
        checkedCall
      }
    })
  )
}
