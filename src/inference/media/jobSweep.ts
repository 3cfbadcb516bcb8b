/**
 * The background sweep of media jobs (every GATEWAY_MEDIA_JOB_POLL_MS): jobs still unfinished at
 * their expiry fail, expired jobs are forgotten with their stored content, and the unfinished
 * jobs nobody polled lately are refreshed, so cost is recorded even when the client never comes back.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { StoreHealthShape } from "../../platform/store/StoreHealth.js"
import { type JobStore, type Row, toJob } from "./jobStore.js"
import type { MediaJob } from "./MediaJobs.js"

/** Jobs refreshed by one sweep at most (the oldest first); the rest wait for the next. */
const SWEEP_BATCH = 200

export interface JobSweepDeps {
  readonly sql: SqlClient.SqlClient
  readonly health: StoreHealthShape
  readonly store: JobStore
  readonly refresh: (job: MediaJob) => Effect.Effect<MediaJob>
  /** Where results are stored (`<dataDir>/media`). */
  readonly dir: string
  readonly pollMs: number
  readonly ttlMs: number
}

/** One sweep: expired jobs failed (if unfinished) and forgotten, then the jobs due for a poll refreshed. Never fails (a failure is a store
 * warning). */
export const makeJobSweep = ({ sql, health, store, refresh, dir, pollMs, ttlMs }: JobSweepDeps): Effect.Effect<void> =>
  Effect.gen(function* () {
    const now = Date.now()
    // Still unfinished at expiry: failed, recorded as such, then forgotten with the rest.
    const stale = yield* sql<Row>`SELECT * FROM media_jobs WHERE expires_at <= ${now} AND status IN ('queued', 'in_progress')`
    for (const row of stale) {
      yield* store.finish(
        toJob(row),
        {
          status: "failed",
          progress: row.progress,
          error: { code: "job_expired", message: `the job did not finish within ${ttlMs / 1000} s` }
        },
        504
      )
    }
    const gone = yield* sql<{ id: string; result_file: string | null }>`SELECT id, result_file FROM media_jobs WHERE expires_at <= ${now}`
    if (gone.length > 0) {
      for (const g of gone) if (g.result_file) yield* Effect.promise(() => fs.promises.rm(path.join(dir, g.result_file!), { force: true }))
      yield* sql`DELETE FROM media_jobs WHERE id IN ${sql.in(gone.map((g) => g.id))}`
    }
    // Unfinished jobs nobody polled for half an interval: asked now.
    const due = now - Math.floor(pollMs / 2)
    const open = yield* sql<Row>`SELECT * FROM media_jobs WHERE status IN ('queued', 'in_progress') AND expires_at > ${now}
      AND (polled_at IS NULL OR polled_at <= ${due}) ORDER BY polled_at, created_at LIMIT ${SWEEP_BATCH}`
    yield* Effect.forEach(open, (row) => refresh(toJob(row)), { concurrency: 4, discard: true })
  }).pipe(Effect.catchAllCause((cause) => health.warn("the media job sweep failed", cause)))
