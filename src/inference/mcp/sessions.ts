/**
 * Sessions of an MCP endpoint over streamable HTTP: each with its own SDK server and transport,
 * owned by the caller that opened it, at most `max` of them (opening one more closes the one idle
 * longest), closed when unused for `idleMs`. The management plane's `/mcp` and the gateway's
 * `/v1/mcp` keep theirs in one of these each.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"

export interface McpSession<A> {
  readonly id: string
  readonly transport: StreamableHTTPServerTransport
  readonly server: Server
  /** Who opened it; another caller may not use it. */
  readonly owner: string
  /** What the endpoint keeps with the session (its scope, its caller's access). */
  readonly data: A
  lastSeen: number
}

/** The SDK's streamable HTTP transport, loaded at the first session (the SDK takes most of a second to import). */
let transportModule: Promise<typeof import("@modelcontextprotocol/sdk/server/streamableHttp.js")> | undefined
export const loadTransport = () => (transportModule ??= import("@modelcontextprotocol/sdk/server/streamableHttp.js"))

export const makeSessionTable = <A>(options: { readonly max: number; readonly idleMs: number }) => {
  const sessions = new Map<string, McpSession<A>>()

  const close = (s: McpSession<A>) =>
    Effect.promise(() => s.server.close().catch(() => undefined)).pipe(Effect.zipRight(Effect.sync(() => sessions.delete(s.id))))
  const closeAll = Effect.suspend(() => Effect.forEach([...sessions.values()], close, { discard: true }))
  /** The sessions unused for `idleMs`, closed. */
  const closeIdle = Effect.suspend(() => {
    const cutoff = Date.now() - options.idleMs
    return Effect.forEach(
      [...sessions.values()].filter((s) => s.lastSeen < cutoff),
      close,
      { discard: true }
    )
  })

  /** Room for one more session: the one idle longest closed when the table is full. */
  const makeRoom = Effect.suspend(() =>
    sessions.size >= options.max ? close([...sessions.values()].reduce((a, b) => (b.lastSeen < a.lastSeen ? b : a))) : Effect.void
  )

  /**
   * A new session over `server`; it is registered when the SDK has given it an id (after
   * initialize): `newId()`'s, a random UUID by default.
   */
  const open = (owner: string, data: A, server: Server, newId: () => string = randomUUID) =>
    Effect.gen(function* () {
      const { StreamableHTTPServerTransport: Transport } = yield* Effect.promise(loadTransport)
      yield* makeRoom
      const transport: StreamableHTTPServerTransport = new Transport({
        sessionIdGenerator: newId,
        onsessioninitialized: (id) => void sessions.set(id, { id, transport, server, owner, data, lastSeen: Date.now() }),
        onsessionclosed: (id) => void sessions.delete(id)
      })
      server.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId)
      }
      yield* Effect.promise(() => server.connect(transport))
      return transport
    })

  /**
   * A session opened elsewhere (another worker, another gateway on the same storage key) taken up
   * here under its id, already initialized: the client's next request is served as if it had
   * opened the session here. The SDK's transport has no public way to start initialized, so its
   * two fields are set as its own initialize sets them (the SDK is pinned; test/mcp.workers.test.ts
   * fails if they change).
   */
  const adopt = (id: string, owner: string, data: A, server: Server) =>
    Effect.gen(function* () {
      const { StreamableHTTPServerTransport: Transport } = yield* Effect.promise(loadTransport)
      yield* makeRoom
      const transport: StreamableHTTPServerTransport = new Transport({
        sessionIdGenerator: () => id,
        onsessionclosed: (closed) => void sessions.delete(closed)
      })
      const inner = (transport as unknown as { _webStandardTransport?: { sessionId?: string; _initialized?: boolean } })
        ._webStandardTransport
      if (inner === undefined) return yield* Effect.dieMessage("the MCP SDK's transport changed: a session cannot be adopted")
      inner.sessionId = id
      inner._initialized = true
      server.onclose = () => void sessions.delete(id)
      yield* Effect.promise(() => server.connect(transport))
      const session: McpSession<A> = { id, transport, server, owner, data, lastSeen: Date.now() }
      sessions.set(id, session)
      return session
    })

  return { sessions, open, adopt, close, closeAll, closeIdle }
}

export type SessionTable<A> = ReturnType<typeof makeSessionTable<A>>
