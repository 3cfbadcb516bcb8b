/**
 * Media generation jobs (video and music): the store of the jobs clients submitted, polling of
 * the asynchronous upstreams, the usage row of a finished job, the content download and a
 * background sweep. docs/media.md, "Video and music (jobs)".
 *
 * - A job is a row of `media_jobs` (migration 0008), tied to the API key that created it: any
 *   other key (or none) finds nothing.
 * - `refresh` asks the upstream about an unfinished job and updates the row. Concurrent refreshes
 *   of one job in this process share one upstream call; the move to a final status is a
 *   conditional UPDATE (`WHERE status IN ('queued','in_progress')`), so exactly one caller, in
 *   any process, wins it and writes the job's usage row (priced per second of the result).
 * - The sweep (every GATEWAY_MEDIA_JOB_POLL_MS, default 10 s) refreshes the unfinished jobs no one
 *   polled lately, so cost is recorded even when the client never comes back; it fails jobs
 *   still unfinished at their expiry, and forgets expired jobs, deleting their stored content.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { StoreHealth } from "../../platform/store/StoreHealth.js"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Accounting } from "../../services/accounting/Accounting.js"
import { AppConfig, positiveInteger } from "../../platform/config/AppConfig.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { clientError, type InferenceError } from "../../kernel/errors.js"
import { Inference } from "../pipeline.js"
import { type Connection, Connections } from "../../upstream/providers/Connections.js"
import type { Candidate } from "../../services/routing/types.js"
import { rowsChanged } from "../../platform/store/dialect.js"
import { discardBody, type UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"
import { extensionOf, isFinal, type JobFamily, type JobKind, type JobStatus, openAiContentCall, pollCall, readPoll, type UpstreamState } from "./jobFamilies.js"

/** A job as the gateway keeps it. Times are epoch ms. */
export interface MediaJob {
  readonly id: string
  readonly kind: JobKind
  readonly apiKeyId: string | null
  /** The request that submitted it. */
  readonly requestId: string
  /** The model id as the client asked for it (a combo, `provider/model`...). */
  readonly requestedModel: string
  /** The upstream model that took it. */
  readonly model: string
  readonly connectionId: string
  readonly provider: string
  readonly family: JobFamily
  readonly upstreamId: string | null
  readonly status: JobStatus
  readonly progress: number
  readonly error: { readonly code: string; readonly message: string } | null
  readonly size: string | null
  /** Seconds of the result (asked for, until the upstream says). */
  readonly seconds: number | null
  readonly resultType: string | null
  readonly resultUrl: string | null
  readonly resultFile: string | null
  readonly resultBytes: number | null
  /** USD recorded for the job (its usage row); null until it finished. */
  readonly costUsd: number | null
  readonly createdAt: number
  readonly updatedAt: number
  readonly polledAt: number | null
  readonly completedAt: number | null
  readonly expiresAt: number
}

/** A job just submitted: the upstream's first word on it, or (synchronous upstreams) its result. */
export interface NewJob {
  readonly kind: JobKind
  readonly apiKeyId: string | null
  readonly requestId: string
  readonly requestedModel: string
  readonly candidate: Candidate
  readonly family: JobFamily
  readonly state: UpstreamState
  /** Seconds asked for (or the family's default): what an async job is priced by when the upstream does not say. */
  readonly seconds?: number
  readonly size?: string
  /** A synchronous upstream's result: stored, and the job completed at once (its submit row was the priced one). */
  readonly result?: { readonly bytes: Buffer; readonly contentType: string; readonly seconds?: number; readonly costUsd: number }
}

/** Where a finished job's bytes come from. */
export type JobContent =
  | { readonly _tag: "file"; readonly path: string; readonly contentType: string; readonly size: number }
  | { readonly _tag: "upstream"; readonly response: UpstreamResponse; readonly contentType: string }

export interface MediaJobsShape {
  readonly create: (job: NewJob) => Effect.Effect<MediaJob>
  /** The job with this id of this kind created by this key, unexpired; undefined otherwise (another key's job too). */
  readonly find: (kind: JobKind, id: string, apiKeyId: string | null) => Effect.Effect<MediaJob | undefined>
  /** Asks the upstream about an unfinished job and answers the job as it is now (a finished one at once). */
  readonly refresh: (job: MediaJob) => Effect.Effect<MediaJob>
  /** Refreshes until the job finished or `ms` passed; answers it as it is then. */
  readonly wait: (job: MediaJob, ms: number) => Effect.Effect<MediaJob>
  /** A completed job's bytes: its stored file, or the upstream's answer (body unread, to be relayed). */
  readonly content: (job: MediaJob, abortWhen?: (abort: () => void) => () => void) => Effect.Effect<JobContent, InferenceError>
}

/** The usage row's endpoint of a submission and of a job's end. */
export const jobEndpoint = (kind: JobKind): string => (kind === "video" ? "videos.generations" : "music.generations")

export const JOB_ID = /^(vid|mus)_[0-9a-f]{32}$/
const newJobId = (kind: JobKind): string => `${kind === "video" ? "vid" : "mus"}_${crypto.randomBytes(16).toString("hex")}`

export const POLL_MS_ENV = "GATEWAY_MEDIA_JOB_POLL_MS"
export const TTL_SECONDS_ENV = "GATEWAY_MEDIA_JOB_TTL_SECONDS"
const DEFAULT_POLL_MS = 10_000
const DEFAULT_TTL_SECONDS = 24 * 3600
/** Jobs refreshed by one sweep at most (the oldest first); the rest wait for the next. */
const SWEEP_BATCH = 200
/** Redirects followed when downloading a result (Veo's URI answers one to the stored file). */
const MAX_REDIRECTS = 3
/** A client waiting on a job: polls soon, then less often (250 ms growing by half, at most every 5 s). */
const WAIT_SCHEDULE = Schedule.either(Schedule.exponential("250 millis", 1.5), Schedule.spaced("5 seconds"))

interface Row {
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

const toJob = (r: Row): MediaJob => ({
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
  error: r.error_code !== null || r.error_message !== null ? { code: r.error_code ?? "upstream_job_failed", message: r.error_message ?? "" } : null,
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

const originOf = (url: string | null): string | undefined => {
  try {
    return url ? new URL(url).origin : undefined
  } catch {
    return undefined
  }
}

const contentTypeOf = (res: UpstreamResponse, fallback: string): string => {
  const t = res.headers["content-type"]
  const v = Array.isArray(t) ? t[0] : t
  return typeof v === "string" && v.trim() !== "" ? v : fallback
}

export class MediaJobs extends Context.Tag("gateway/MediaJobs")<MediaJobs, MediaJobsShape>() {
  static readonly layer = Layer.scoped(
    MediaJobs,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const health = yield* StoreHealth
      const inference = yield* Inference
      const accounting = yield* Accounting
      const connections = yield* Connections
      const config = yield* AppConfig
      const pollMs = yield* positiveInteger(POLL_MS_ENV, "milliseconds", DEFAULT_POLL_MS)
      const ttlMs = (yield* positiveInteger(TTL_SECONDS_ENV, "seconds", DEFAULT_TTL_SECONDS)) * 1000
      const dir = path.join(config.dataDir, "media")
      const scope: Scope.Scope = yield* Effect.scope

      const load = (id: string) => Effect.map(sql<Row>`SELECT * FROM media_jobs WHERE id = ${id}`, (rows) => (rows[0] ? toJob(rows[0]) : undefined)).pipe(Effect.orDie)
      const reload = (job: MediaJob) => Effect.map(load(job.id), (j) => j ?? job)
      const touch = (job: MediaJob) => Effect.zipRight(sql`UPDATE media_jobs SET polled_at = ${Date.now()} WHERE id = ${job.id}`.pipe(Effect.orDie), reload(job))

      /**
       * The job's end: the row becomes final only if it was not already (one winner, here or in
       * another process), and the winner writes the job's usage row: priced per second of the
       * result when it completed, an error row without cost when it failed (`failStatus`).
       */
      const finish = (job: MediaJob, state: UpstreamState, failStatus = 502): Effect.Effect<MediaJob> =>
        Effect.gen(function* () {
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

      /** What the upstream says of the job now, applied to the row. Never fails: a poll that could not be made leaves the job as it was. */
      const pollOnce = (job: MediaJob): Effect.Effect<MediaJob> =>
        Effect.gen(function* () {
          const found = yield* Effect.option(connections.get(job.connectionId))
          if (Option.isNone(found))
            return yield* finish(job, { status: "failed", progress: job.progress, error: { code: "connection_removed", message: "the connection that ran this job was removed" } })
          const connection = found.value
          if (!job.upstreamId) return yield* finish(job, { status: "failed", progress: job.progress, error: { code: "no_upstream_job", message: "the upstream gave no job id" } })
          // Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a job lives on the connection
          // that accepted it, so its poll has nowhere else to go, and a failed poll tells nothing of the
          // connection's health for new requests (the job's own status carries it).
          const sent = yield* Effect.either(
            inference.send({ connection, model: job.model }, connection.format, {}, { stream: false, readWhole: true, custom: pollCall(job.family, job.upstreamId) }, openAiChat)
          )
          if (sent._tag === "Left") {
            yield* Effect.logDebug(`media job ${job.id}: polling ${connection.name} failed: ${sent.left.message}`)
            return yield* touch(job)
          }
          const res = sent.right
          if (res.status === 404) {
            return yield* finish(job, {
              status: "failed",
              progress: job.progress,
              error: { code: "upstream_job_not_found", message: `${connection.name} no longer knows this job` }
            })
          }
          let json: unknown
          try {
            json = res.status >= 200 && res.status < 300 && res.bytes ? JSON.parse(res.bytes.toString("utf8")) : undefined
          } catch {
            json = undefined
          }
          const state = readPoll(job.family, json)
          if (!state) {
            yield* Effect.logDebug(`media job ${job.id}: ${connection.name} answered the poll with HTTP ${res.status} and no job`)
            return yield* touch(job)
          }
          if (isFinal(state.status)) return yield* finish(job, state)
          const now = Date.now()
          yield* sql`UPDATE media_jobs SET status = ${state.status}, progress = ${state.progress}, seconds = ${state.seconds ?? job.seconds}, size = ${state.size ?? job.size},
              updated_at = ${now}, polled_at = ${now}
            WHERE id = ${job.id} AND status IN ('queued', 'in_progress')`.pipe(Effect.orDie)
          return yield* reload(job)
        }).pipe(Effect.catchAllCause((cause) => Effect.zipRight(Effect.logWarning(`media job ${job.id}: the poll failed`, cause), Effect.succeed(job))))

      // One upstream poll per job at a time in this process, run in the service's scope: a client
      // that leaves while waiting does not cut the poll short for the others.
      const polling = new Map<string, Fiber.RuntimeFiber<MediaJob>>()
      const refresh = (job: MediaJob): Effect.Effect<MediaJob> =>
        Effect.suspend(() => {
          if (isFinal(job.status)) return Effect.succeed(job)
          const running = polling.get(job.id)
          if (running) return Fiber.join(running)
          return Effect.flatMap(
            Effect.forkIn(
              Effect.ensuring(
                pollOnce(job),
                Effect.sync(() => polling.delete(job.id))
              ),
              scope
            ),
            (fiber) => {
              if (fiber.unsafePoll() === null) polling.set(job.id, fiber)
              return Fiber.join(fiber)
            }
          )
        })

      const wait = (job: MediaJob, ms: number): Effect.Effect<MediaJob> => {
        let latest = job
        const step = Effect.suspend(() => refresh(latest)).pipe(Effect.tap((j) => Effect.sync(() => (latest = j))))
        return step.pipe(
          Effect.repeat({ schedule: WAIT_SCHEDULE, until: (j) => isFinal(j.status) }),
          Effect.map(() => latest),
          Effect.timeoutTo({ duration: ms, onTimeout: () => latest, onSuccess: (j) => j })
        )
      }

      const create = (n: NewJob): Effect.Effect<MediaJob> =>
        Effect.gen(function* () {
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

      const find: MediaJobsShape["find"] = (kind, id, apiKeyId) =>
        Effect.map(load(id), (job) => (job && job.kind === kind && job.apiKeyId === apiKeyId && job.expiresAt > Date.now() ? job : undefined))

      const unavailable = (message: string, status = 502, code = "upstream_error") =>
        clientError(openAiChat, { status, kind: status === 410 ? "not_found" : "upstream", message, code })

      /** A GET of a result URL: with the connection's key on its own origin, without it anywhere else; redirects followed without the key. */
      // Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a result is held by the
      // connection that made it (pinned, like the job's polls).
      const download = (connection: Connection, model: string, url: string, abortWhen: ((abort: () => void) => () => void) | undefined) =>
        Effect.gen(function* () {
          const keyless: Connection = { ...connection, apiKey: null }
          let target = url
          let withKey = originOf(url) !== undefined && originOf(url) === originOf(connection.effectiveBaseUrl)
          for (let hop = 0; ; hop++) {
            const res = yield* inference.send(
              { connection: withKey ? connection : keyless, model },
              connection.format,
              {},
              { stream: false, custom: { path: "", url: target, method: "GET", accept: "*/*" }, ...(abortWhen ? { abortWhen } : {}) },
              openAiChat
            )
            const location = res.headers["location"]
            const next = Array.isArray(location) ? location[0] : location
            if (res.status < 300 || res.status >= 400 || typeof next !== "string" || hop >= MAX_REDIRECTS) return res
            // Dropped unread.
            discardBody(res.body)
            target = new URL(next, target).href
            withKey = false
          }
        })

      const content: MediaJobsShape["content"] = (job, abortWhen) =>
        Effect.gen(function* () {
          if (job.resultFile) {
            const file = path.join(dir, job.resultFile)
            const stat = yield* Effect.promise(() => fs.promises.stat(file).catch(() => undefined))
            if (!stat) return yield* unavailable(`the content of job ${job.id} is no longer stored`, 410, "content_gone")
            return { _tag: "file" as const, path: file, contentType: job.resultType ?? "application/octet-stream", size: stat.size }
          }
          const found = yield* Effect.option(connections.get(job.connectionId))
          if (Option.isNone(found)) return yield* unavailable("the connection that ran this job was removed: its content cannot be fetched", 410, "content_gone")
          const connection = found.value
          const fallbackType = job.resultType ?? (job.kind === "video" ? "video/mp4" : "application/octet-stream")
          let res: UpstreamResponse
          if (job.family === "veo") {
            if (!job.resultUrl) return yield* unavailable(`job ${job.id} has no result to fetch`)
            res = yield* download(connection, job.model, job.resultUrl, abortWhen)
          } else if (job.family === "openai-videos" && job.upstreamId) {
            res = yield* inference.send(
              { connection, model: job.model },
              connection.format,
              {},
              { stream: false, custom: openAiContentCall(job.upstreamId), ...(abortWhen ? { abortWhen } : {}) },
              openAiChat
            )
          } else {
            return yield* unavailable(`job ${job.id} has no result to fetch`)
          }
          if (res.status < 200 || res.status >= 300) {
            const { error } = yield* inference.readFailure(res, openAiChat, openAiChat, connection)
            return yield* unavailable(`${connection.name} could not give the content (HTTP ${res.status}): ${error.message}`)
          }
          return { _tag: "upstream" as const, response: res, contentType: contentTypeOf(res, fallbackType) }
        })

      // ------------------------------------------------------------ the sweep
      const sweep = Effect.gen(function* () {
        const now = Date.now()
        // Still unfinished at expiry: failed, recorded as such, then forgotten with the rest.
        const stale = yield* sql<Row>`SELECT * FROM media_jobs WHERE expires_at <= ${now} AND status IN ('queued', 'in_progress')`
        for (const row of stale) {
          yield* finish(toJob(row), { status: "failed", progress: row.progress, error: { code: "job_expired", message: `the job did not finish within ${ttlMs / 1000} s` } }, 504)
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
      yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(pollMs)))

      return { create, find, refresh, wait, content } satisfies MediaJobsShape
    })
  )
}
