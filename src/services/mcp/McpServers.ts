/**
 * The registry of upstream MCP servers (docs/mcp.md, "MCP servers behind the gateway"): rows of
 * `mcp_servers`, env and header values sealed with the storage key, held in memory for the
 * request path and reloaded when the store says they changed.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { CreateMcpServer, McpServerRecord, UpdateMcpServer } from "../../domain/mcpServers.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { followVersion, makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import type { McpServerRefused } from "./McpServerRefused.js"
import { readRows, toRecords } from "./mcpServerRows.js"
import { makeMcpServerWrites } from "./mcpServerWrites.js"

export { McpServerRefused } from "./McpServerRefused.js"
export { connectionProblem } from "./mcpServerWrites.js"
export { initialHealth, type McpServerExtras, offeringAllowed, offeringsOf, viewOf } from "./mcpServerViews.js"

export interface McpServersShape {
  /** Every registered server, secrets in the clear (from memory; never sent out as is). */
  readonly all: () => ReadonlyArray<McpServerRecord>
  /** One server by name, from memory. */
  readonly byName: (name: string) => McpServerRecord | undefined
  /** Read the store again if it changed (another gateway's write); the listeners hear of a change. */
  readonly refresh: Effect.Effect<void>
  /** `actor` (default `system`) is who the audit log names. */
  readonly create: (input: CreateMcpServer, actor?: string) => Effect.Effect<McpServerRecord, McpServerRefused>
  readonly update: (name: string, patch: UpdateMcpServer, actor?: string) => Effect.Effect<McpServerRecord, McpServerRefused>
  readonly remove: (name: string, actor?: string) => Effect.Effect<void, McpServerRefused>
  /** Called after every change of the registry (this gateway's writes and reloads); returns the unsubscribe. */
  readonly onChange: (listener: () => void) => () => void
}

export class McpServers extends Context.Tag("gateway/McpServers")<McpServers, McpServersShape>() {
  /**
   * The registry over `mcp_servers`: every row read at build into memory, read again when the
   * store says it changed (`refresh`, also run in the background under a second apart so that listeners hear
   * of another gateway's writes), and after each write here. Without a StoreVersion (a service
   * test) only this process's writes reload it.
   */
  static readonly layer = Layer.scoped(
    McpServers,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const version = yield* Effect.serviceOption(StoreVersion)
      const writer = Option.getOrUndefined(yield* Effect.serviceOption(BatchWriter))

      let records: ReadonlyArray<McpServerRecord> = []
      let index = new Map<string, McpServerRecord>()
      // The rows' text as last read: a reload that finds the same text tells nobody.
      let seen: string | undefined
      const listeners = new Set<() => void>()
      const notify = Effect.sync(() => {
        for (const listener of [...listeners]) {
          try {
            listener()
          } catch {
            // A listener's failure is its own; the others still hear of the change.
          }
        }
      })

      const reload = Effect.flatMap(readRows(sql), (rows) => {
        const text = JSON.stringify(rows)
        if (text === seen) return Effect.void
        const first = seen === undefined
        return Effect.flatMap(toRecords(secrets, rows), (next) => {
          records = next
          index = new Map(next.map((r) => [r.name, r]))
          seen = text
          return first ? Effect.void : notify
        })
      })
      const refresh = yield* makeVersionedReload(version, reload)
      // Every second, on the timer shared with the other followers of the store version.
      yield* followVersion(
        version,
        refresh.pipe(Effect.catchAllCause((cause) => Effect.logDebug("MCP server registry: reload failed", cause)))
      )

      const byName = (name: string) => index.get(name)
      const writes = makeMcpServerWrites({ sql, secrets, writer, byName, reload })

      return {
        all: () => records,
        byName,
        refresh,
        // What another process wrote is read first: its name taken, its server gone.
        create: (input, actor) => Effect.zipRight(refresh, writes.create(input, actor)),
        update: (name, patch, actor) => Effect.zipRight(refresh, writes.update(name, patch, actor)),
        remove: (name, actor) => Effect.zipRight(refresh, writes.remove(name, actor)),
        onChange: (listener) => {
          listeners.add(listener)
          return () => {
            listeners.delete(listener)
          }
        }
      } satisfies McpServersShape
    })
  )
}
