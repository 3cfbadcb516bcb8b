/**
 * The requests a replay sends again, read from its source: an inspector session, usage rows whose
 * bodies the inspector kept (by request id or row id), or a JSONL text. A request that cannot be
 * replayed is an item saying why.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { StartReplay } from "../../domain/replay.js"
import type { InspectorShape } from "../inspector/Inspector.js"
import { fromEntry, fromJsonl, JsonlError, type SourceItem } from "./sources.js"

/** The requests of the source, or a 4xx naming what is wrong with it. */
export const makeReplayItems =
  ({ inspector, sql }: { readonly inspector: InspectorShape; readonly sql: SqlClient.SqlClient }) =>
  (
    source: StartReplay["source"]
  ): Effect.Effect<{ readonly label: string; readonly items: ReadonlyArray<SourceItem> }, BadRequest | NotFound> =>
    Effect.gen(function* () {
      if (source.sessionId !== undefined) {
        const id = source.sessionId
        const session = yield* Effect.mapError(inspector.sessions.get(id), () => new NotFound({ message: `no inspector session ${id}` }))
        return { label: `session:${id}`, items: session.entries.map((e, i) => fromEntry(e, `request ${i + 1} (${e.requestId ?? e.id})`)) }
      }
      if (source.usageIds !== undefined) {
        const ids = [...new Set(source.usageIds)]
        // The inspector knows a request by its request id at once (its usage row is written a moment later).
        const seen = yield* inspector.byRequestIds(ids)
        const unseen = ids.filter((i) => !seen.has(i))
        const requestIdOf = new Map<string, string>()
        if (unseen.length > 0) {
          const numeric = unseen.filter((i) => /^\d+$/.test(i)).map(Number)
          const rows = yield* sql<{ id: number; request_id: string }>`SELECT id, request_id FROM usage WHERE ${sql.or([
            sql.in("request_id", unseen),
            ...(numeric.length > 0 ? [sql.in("id", numeric)] : [])
          ])}`.pipe(Effect.orDie)
          for (const r of rows) {
            requestIdOf.set(r.request_id, r.request_id)
            requestIdOf.set(String(r.id), r.request_id)
          }
        }
        const byRowId = yield* inspector.byRequestIds([...new Set(requestIdOf.values())].filter((r) => !seen.has(r)))
        const items = ids.map((id): SourceItem => {
          const requestId = seen.has(id) ? id : requestIdOf.get(id)
          if (requestId === undefined) return { ok: false, reason: "not_found", note: `usage ${id}: no such request in the usage log` }
          const entry = seen.get(requestId) ?? byRowId.get(requestId)
          if (entry === undefined)
            return {
              ok: false,
              reason: "body_not_kept",
              note: `usage ${id}: its body was not kept (the inspector keeps bodies while a session records or someone looks)`
            }
          return fromEntry(entry, `usage ${id}`)
        })
        return { label: `usage:${ids.length}`, items }
      }
      const text = source.jsonl ?? ""
      try {
        const items = fromJsonl(text)
        return { label: `jsonl:${items.length}`, items }
      } catch (e) {
        if (e instanceof JsonlError) return yield* Effect.fail(new BadRequest({ message: e.message }))
        throw e
      }
    })
