/**
 * The `media_jobs` rows (migration 0008): a job read, created, touched by a poll, and ended. The
 * end is a conditional UPDATE (`WHERE status IN ('queued','in_progress')`), so exactly one caller,
 * in any process, wins it and writes the job's usage row.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { AccountingShape } from "../../services/accounting/Accounting.js"
import { rowsChanged } from "../../platform/store/dialect.js"
import { extensionOf, isFinal, type JobFamily, type JobKind, type JobStatus, type UpstreamState } from "./jobFamilies.js"
import type { MediaJob, MediaJobsShape, NewJob } from "./MediaJobs.js"

/** The usage row's endpoint of a submission and of a job's end. */
export const jobEndpoint = (kind: JobKind): string => (kind === "video" ? "videos.generations" : "music.generations")

const newJobId = (kind: JobKind): string => `${kind === "video" ? "vid" : "mus"}_${crypto.randomBytes(16).toString("hex")}`

/** A row of `media_jobs`, as the driver answers it. */
export interface Row {
  readonly id: string
  readonly kind: string
  readonly api_key_id: string | null
  readonly request_id: string
  readonly requested_model: string
  readonly model: string
  readonly connection_id: string
  readonly provider: string
  readonly family: string
  readonly upstream_id: string | null
  readonly status: string
  readonly progress: number
  readonly error_code: string | null
  readonly error_message: string | null
  readonly size: string | null
  readonly seconds: number | null
  readonly result_type: string | null
  readonly result_url: string | null
  readonly result_file: string | null
  readonly result_bytes: number | null
  readonly cost_usd: number | null
  readonly created_at: number
  readonly updated_at: number
  readonly polled_at: number | null
  readonly completed_at: number | null
  readonly expires_at: number
}

/** A row as the job it is. */
export const toJob = (r: Row): MediaJob => ({
  id: r.id,
  kind: r.kind as JobKind,
  apiKeyId: r.api_key_id,
  requestId: r.request_id,
  requestedModel: r.requested_model,
  model: r.model,
  connectionId: r.connection_id,
  provider: r.provider,
  family: r.family as JobFamily,
  upstreamId: r.upstream_id,
  status: r.status as JobStatus,
  progress: Number(r.progress),
  error:
    r.error_code !== null || r.error_message !== null
      ? { code: r.error_code ?? "upstream_job_failed", message: r.error_message ?? "" }
      : null,
  size: r.size,
  seconds: r.seconds === null ? null : Number(r.seconds),
  resultType: r.result_type,
  resultUrl: r.result_url,
  resultFile: r.result_file,
  resultBytes: r.result_bytes === null ? null : Number(r.result_bytes),
  costUsd: r.cost_usd === null ? null : Number(r.cost_usd),
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
  polledAt: r.polled_at === null ? null : Number(r.polled_at),
  completedAt: r.completed_at === null ? null : Number(r.completed_at),
  expiresAt: Number(r.expires_at)
})

export interface JobStoreDeps {
  readonly sql: SqlClient.SqlClient
  readonly accounting: AccountingShape
  /** Where a synchronous upstream's result is stored (`<dataDir>/media`). */
  readonly dir: string
  /** How long a job is kept after its creation. */
  readonly ttlMs: number
}

export interface JobStore {
  readonly load: (id: string) => Effect.Effect<MediaJob | undefined>
  /** The job as stored now (as it was, if its row is gone). */
  readonly reload: (job: MediaJob) => Effect.Effect<MediaJob>
  /** Marks the job polled now (a poll that learnt nothing) and reloads it. */
  readonly touch: (job: MediaJob) => Effect.Effect<MediaJob>
  /** The job's end: see `makeJobEnd`. */
  readonly finish: (job: MediaJob, state: UpstreamState, failStatus?: number) => Effect.Effect<MediaJob>
  /** A new job's row (a synchronous result's bytes stored first), ended at once when the upstream already did. */
  readonly create: (job: NewJob) => Effect.Effect<MediaJob>
  readonly find: MediaJobsShape["find"]
}

/** The job store: the rows of `media_jobs`, read and written. */
export const makeJobStore = (deps: JobStoreDeps): JobStore => {
  const { sql } = deps
  const load = (id: string) =>
    Effect.map(sql<Row>`SELECT * FROM media_jobs WHERE id = ${id}`, (rows) => (rows[0] ? toJob(rows[0]) : undefined)).pipe(Effect.orDie)
  const reload = (job: MediaJob) => Effect.map(load(job.id), (j) => j ?? job)
  const touch = (job: MediaJob) =>
    Effect.zipRight(sql`UPDATE media_jobs SET polled_at = ${Date.now()} WHERE id = ${job.id}`.pipe(Effect.orDie), reload(job))
  const finish = makeJobEnd({ sql, accounting: deps.accounting, reload })
  const create = makeJobCreate({ ...deps, load, finish })
  const find: MediaJobsShape["find"] = (kind, id, apiKeyId) =>
    Effect.map(load(id), (job) => (job && job.kind === kind && job.apiKeyId === apiKeyId && job.expiresAt > Date.now() ? job : undefined))
  return { load, reload, touch, finish, create, find }
}

/**
 * The job's end: the row becomes final only if it was not already (one winner, here or in
 * another process), and the winner writes the job's usage row: priced per second of the
 * result when it completed, an error row without cost when it failed (`failStatus`).
 */
const makeJobEnd =
  (deps: {
    readonly sql: SqlClient.SqlClient
    readonly accounting: AccountingShape
    readonly reload: (job: MediaJob) => Effect.Effect<MediaJob>
  }) =>
  (job: MediaJob, state: UpstreamState, failStatus = 502): Effect.Effect<MediaJob> => {
    const { sql, accounting, reload } = deps
    return Effect.gen(function* () {
      const now = Date.now()
      const completed = state.status === "completed"
      const seconds = state.seconds ?? job.seconds ?? undefined
      yield* accounting.prepare
      const costUsd = completed && seconds !== undefined ? accounting.mediaCost(job.provider, job.model, undefined, { seconds }) : 0
      const error = completed ? null : (state.error ?? { code: "upstream_job_failed", message: "the upstream job failed" })
      const raw = yield* sql`UPDATE media_jobs SET status = ${state.status}, progress = ${completed ? 100 : job.progress},
          error_code = ${error?.code ?? null}, error_message = ${error?.message ?? null},
          seconds = ${seconds ?? null}, size = ${state.size ?? job.size}, result_url = ${state.resultUrl ?? job.resultUrl},
          upstream_id = ${state.upstreamId ?? job.upstreamId}, result_type = ${completed ? (job.resultType ?? (job.kind === "video" ? "video/mp4" : null)) : job.resultType},
          cost_usd = ${costUsd}, completed_at = ${now}, updated_at = ${now}, polled_at = ${now}
        WHERE id = ${job.id} AND status IN ('queued', 'in_progress')`.raw.pipe(Effect.orDie)
      if (rowsChanged(raw) === 1) {
        yield* accounting.finish({
          requestId: job.id,
          apiKeyId: job.apiKeyId,
          connectionId: job.connectionId,
          provider: job.provider,
          model: job.model,
          endpoint: `${jobEndpoint(job.kind)}:job`,
          stream: false,
          status: completed ? 200 : failStatus,
          usage: { input: null, output: null, cached: null, reasoning: null },
          latencyMs: now - job.createdAt,
          ttftMs: null,
          error: error ? `${error.code}: ${error.message}` : null,
          fallbackAttempts: 0,
          requestedModel: job.requestedModel,
          ...(completed && seconds !== undefined ? { units: { seconds } } : {})
        })
        if (error) yield* Effect.logInfo(`media job ${job.id} failed: ${error.code}: ${error.message}`)
      }
      return yield* reload(job)
    })
  }

/**
 * A job's creation: a synchronous upstream's result is stored under `dir` and the job completed at
 * once; an upstream that finished (or failed) the job at submission ends it as a poll would have.
 */
const makeJobCreate =
  (
    deps: JobStoreDeps & {
      readonly load: (id: string) => Effect.Effect<MediaJob | undefined>
      readonly finish: (job: MediaJob, state: UpstreamState) => Effect.Effect<MediaJob>
    }
  ) =>
  (n: NewJob): Effect.Effect<MediaJob> => {
    const { sql, dir, ttlMs, load, finish } = deps
    return Effect.gen(function* () {
      const now = Date.now()
      const id = newJobId(n.kind)
      let file: string | null = null
      if (n.result) {
        file = `${id}.${extensionOf(n.result.contentType)}`
        const target = path.join(dir, file)
        const bytes = n.result.bytes
        yield* Effect.promise(async () => {
          await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 })
          await fs.promises.writeFile(target, bytes, { mode: 0o600 })
        })
      }
      const done = n.result !== undefined
      const initial: JobStatus = done ? "completed" : isFinal(n.state.status) ? "in_progress" : n.state.status
      yield* sql`INSERT INTO media_jobs ${sql.insert({
        id,
        kind: n.kind,
        api_key_id: n.apiKeyId,
        request_id: n.requestId,
        requested_model: n.requestedModel,
        model: n.candidate.model,
        connection_id: n.candidate.connection.id,
        provider: n.candidate.connection.provider.id,
        family: n.family,
        upstream_id: n.state.upstreamId ?? null,
        status: initial,
        progress: done ? 100 : n.state.progress,
        error_code: null,
        error_message: null,
        size: n.state.size ?? n.size ?? null,
        seconds: n.result?.seconds ?? n.state.seconds ?? n.seconds ?? null,
        result_type: n.result?.contentType ?? null,
        result_url: n.state.resultUrl ?? null,
        result_file: file,
        result_bytes: n.result?.bytes.length ?? null,
        cost_usd: done ? n.result!.costUsd : null,
        created_at: now,
        updated_at: now,
        polled_at: now,
        completed_at: done ? now : null,
        expires_at: now + ttlMs
      })}`.pipe(Effect.orDie)
      const job = (yield* load(id))!
      // The upstream finished (or failed) it at once: the job's end, as a poll would have seen it.
      return isFinal(n.state.status) && !done ? yield* finish(job, n.state) : job
    })
  }
