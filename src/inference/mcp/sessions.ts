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

  /** A new session over `server`; it is registered when the SDK has given it an id (after initialize). */
  const open = (owner: string, data: A, server: Server) =>
    Effect.gen(function* () {
      const { StreamableHTTPServerTransport: Transport } = yield* Effect.promise(loadTransport)
      if (sessions.size >= options.max) {
        const oldest = [...sessions.values()].reduce((a, b) => (b.lastSeen < a.lastSeen ? b : a))
        yield* close(oldest)
      }
      const transport: StreamableHTTPServerTransport = new Transport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void sessions.set(id, { id, transport, server, owner, data, lastSeen: Date.now() }),
        onsessionclosed: (id) => void sessions.delete(id)
      })
      server.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId)
      }
      yield* Effect.promise(() => server.connect(transport))
      return transport
    })

  return { sessions, open, close, closeAll, closeIdle }
}

export type SessionTable<A> = ReturnType<typeof makeSessionTable<A>>
