/**
 * The streamable HTTP transport's sessions (docs/mcp.md, "Transports"): each with its own SDK server and transport, owned by the
 * caller that opened it, at most `MAX_MCP_SESSIONS` of them, closed when unused for `MCP_SESSION_IDLE_MS`. The table is the one
 * `/v1/mcp` keeps its sessions in (src/inference/mcp/sessions.ts).
 */
import * as Effect from "effect/Effect"
import { type McpSession, makeSessionTable } from "../../inference/mcp/sessions.js"
import type { McpCaller } from "./caller.js"
import type { McpToolsShape } from "./McpTools.js"

/** Sessions kept at most; opening one more closes the one idle longest. */
export const MAX_MCP_SESSIONS = 200
/** A session unused this long is closed (its client starts a new one when it comes back). */
export const MCP_SESSION_IDLE_MS = 30 * 60 * 1000

export type Session = McpSession<undefined>

export const ownerOf = (caller: McpCaller) => `${caller.kind}:${caller.id}`

/**
 * The SDK, loaded at the first MCP request: it takes most of a second to import (zod, ajv,
 * hono), which every CLI command would otherwise pay, since they import the gateway's layers.
 */
let sdk: Promise<typeof import("./server.js")> | undefined
export const loadSdk = () => (sdk ??= import("./server.js"))

export interface HttpSessionsDeps {
  readonly tools: McpToolsShape
  /** Runs a tool's effect for the SDK (the layer's runtime). */
  readonly run: <A>(effect: Effect.Effect<A>) => Promise<A>
}

/** The open sessions by id; `open` makes one, `closeIdle` (run once a minute) and `closeAll` close them. */
export const makeHttpSessions = ({ tools, run }: HttpSessionsDeps) => {
  const table = makeSessionTable<undefined>({ max: MAX_MCP_SESSIONS, idleMs: MCP_SESSION_IDLE_MS })

  /** A new session for `caller`; it is registered when the SDK has given it an id (after initialize). */
  const open = (caller: McpCaller) =>
    Effect.gen(function* () {
      const { makeMcpServer } = yield* Effect.promise(loadSdk)
      const server = makeMcpServer(tools, run, (extra) => (extra.authInfo?.extra?.["caller"] as McpCaller | undefined) ?? caller)
      return yield* table.open(ownerOf(caller), undefined, server)
    })

  return { sessions: table.sessions, closeAll: table.closeAll, closeIdle: table.closeIdle, open }
}

export type HttpSessions = ReturnType<typeof makeHttpSessions>
