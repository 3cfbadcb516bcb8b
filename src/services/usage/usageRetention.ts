/**
 * The usage table kept bounded (UsageRetention): rows past the retention period, then the oldest
 * beyond the row cap, deleted in chunks in the background.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { backgroundJob } from "../../platform/flags/background.js"
import { AccountingConfig } from "../accounting/AccountingConfig.js"
import { DAY } from "./usageRows.js"

/** Rows deleted per statement by retention. */
const CHUNK = 5000

/**
 * Keeps the usage table bounded: every hour (and a minute after start) rows older than the
 * retention period are deleted, then the oldest beyond the row cap. Runs in the server only.
 */
export const UsageRetention = Layer.scopedDiscard(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AccountingConfig
    /**
     * Deletes in chunks of 5000 with a pause between them: SQLite runs on the event loop, and one
     * large DELETE (a million rows after downtime) would stall every request for seconds.
     */
    const chunked = (deleteChunk: Effect.Effect<number, unknown>) =>
      Effect.iterate(
        { total: 0, last: CHUNK },
        {
          while: (s) => s.last >= CHUNK,
          body: (s) => Effect.map(Effect.zipLeft(deleteChunk, Effect.sleep("5 millis")), (n) => ({ total: s.total + n, last: n }))
        }
      ).pipe(Effect.map((s) => s.total))
    const count = (rows: ReadonlyArray<unknown>) => rows.length
    const prune = Effect.gen(function* () {
      const cutoff = (yield* Clock.currentTimeMillis) - config.usageRetentionDays * DAY
      const old = yield* chunked(
        Effect.map(sql`DELETE FROM usage WHERE id IN (SELECT id FROM usage WHERE ts < ${cutoff} LIMIT ${CHUNK}) RETURNING 1 AS n`, count)
      )
      const [edge] = yield* sql<{ id: number }>`SELECT id FROM usage ORDER BY id DESC LIMIT 1 OFFSET ${config.usageMaxRows}`
      const excess = edge
        ? yield* chunked(
            Effect.map(
              sql`DELETE FROM usage WHERE id IN (SELECT id FROM usage WHERE id <= ${edge.id} LIMIT ${CHUNK}) RETURNING 1 AS n`,
              count
            )
          )
        : 0
      if (old + excess > 0)
        yield* Effect.logInfo(
          `usage retention: deleted ${old} rows older than ${config.usageRetentionDays} days and ${excess} beyond ${config.usageMaxRows} rows`
        )
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("usage retention failed; will retry", cause)))
    if (!(yield* backgroundJob("usage retention"))) return
    yield* Effect.forkScoped(Effect.sleep("1 minute").pipe(Effect.zipRight(Effect.repeat(prune, Schedule.spaced("1 hour")))))
  })
)
