/**
 * The streamable HTTP transport's sessions (docs/mcp.md, "Transports"): each with its own SDK server and transport, owned by the
 * caller that opened it, at most `MAX_MCP_SESSIONS` of them, closed when unused for `MCP_SESSION_IDLE_MS`.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import type { McpCaller } from "./caller.js"
import type { McpToolsShape } from "./McpTools.js"

/** Sessions kept at most; opening one more closes the one idle longest. */
export const MAX_MCP_SESSIONS = 200
/** A session unused this long is closed (its client starts a new one when it comes back). */
export const MCP_SESSION_IDLE_MS = 30 * 60 * 1000

export interface Session {
  readonly id: string
  readonly transport: StreamableHTTPServerTransport
  readonly server: Server
  /** `kind:id` of the caller that opened it; another caller may not use it. */
  readonly owner: string
  lastSeen: number
}

export const ownerOf = (caller: McpCaller) => `${caller.kind}:${caller.id}`

/**
 * The SDK, loaded at the first MCP request: it takes most of a second to import (zod, ajv,
 * hono), which every CLI command would otherwise pay, since they import the gateway's layers.
 */
let sdk: Promise<typeof import("./server.js") & { readonly Transport: typeof StreamableHTTPServerTransport }> | undefined
export const loadSdk = () =>
  (sdk ??= Promise.all([import("./server.js"), import("@modelcontextprotocol/sdk/server/streamableHttp.js")]).then(([server, http]) => ({
    ...server,
    Transport: http.StreamableHTTPServerTransport
  })))

export interface HttpSessionsDeps {
  readonly tools: McpToolsShape
  /** Runs a tool's effect for the SDK (the layer's runtime). */
  readonly run: <A>(effect: Effect.Effect<A>) => Promise<A>
}

/** The open sessions by id; `open` makes one, `closeIdle` (run once a minute) and `closeAll` close them. */
export const makeHttpSessions = ({ tools, run }: HttpSessionsDeps) => {
  const sessions = new Map<string, Session>()

  const close = (s: Session) =>
    Effect.promise(() => s.server.close().catch(() => undefined)).pipe(Effect.zipRight(Effect.sync(() => sessions.delete(s.id))))
  const closeAll = Effect.suspend(() => Effect.forEach([...sessions.values()], close, { discard: true }))
  /** The sessions unused for `MCP_SESSION_IDLE_MS`, closed. */
  const closeIdle = Effect.suspend(() => {
    const cutoff = Date.now() - MCP_SESSION_IDLE_MS
    return Effect.forEach(
      [...sessions.values()].filter((s) => s.lastSeen < cutoff),
      close,
      { discard: true }
    )
  })

  /** A new session for `caller`; it is registered when the SDK has given it an id (after initialize). */
  const open = (caller: McpCaller) =>
    Effect.gen(function* () {
      const { makeMcpServer, Transport } = yield* Effect.promise(loadSdk)
      if (sessions.size >= MAX_MCP_SESSIONS) {
        const oldest = [...sessions.values()].reduce((a, b) => (b.lastSeen < a.lastSeen ? b : a))
        yield* close(oldest)
      }
      const server = makeMcpServer(tools, run, (extra) => (extra.authInfo?.extra?.["caller"] as McpCaller | undefined) ?? caller)
      const holder: { session?: Session } = {}
      const transport = new Transport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          holder.session = { id, transport, server, owner: ownerOf(caller), lastSeen: Date.now() }
          sessions.set(id, holder.session)
        },
        onsessionclosed: (id) => void sessions.delete(id)
      })
      server.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId)
      }
      yield* Effect.promise(() => server.connect(transport))
      return transport
    })

  return { sessions, closeAll, closeIdle, open }
}

export type HttpSessions = ReturnType<typeof makeHttpSessions>
