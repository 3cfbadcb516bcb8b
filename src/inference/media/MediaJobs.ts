/**
 * Media generation jobs (video and music): the store, polling, content and the sweep (docs/media.md, "Video and music (jobs)").
 * The move to a final status is a conditional UPDATE, so exactly one caller in any process writes the job's usage row.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as path from "node:path"
import { AppConfig, positiveInteger } from "../../platform/config/AppConfig.js"
import { StoreHealth } from "../../platform/store/StoreHealth.js"
import { Accounting } from "../../services/accounting/Accounting.js"
import type { Candidate } from "../../services/routing/types.js"
import type { UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"
import { Connections } from "../../upstream/providers/Connections.js"
import type { InferenceError } from "../../kernel/errors.js"
import { Inference } from "../Inference.js"
import type { JobFamily, JobKind, JobStatus, UpstreamState } from "./jobFamilies.js"
import { makeJobContent } from "./jobContent.js"
import { makeJobPolling } from "./jobPolling.js"
import { makeJobStore } from "./jobStore.js"
import { makeJobSweep } from "./jobSweep.js"

export { jobEndpoint } from "./jobStore.js"

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

export const JOB_ID = /^(vid|mus)_[0-9a-f]{32}$/

export const POLL_MS_ENV = "GATEWAY_MEDIA_JOB_POLL_MS"
export const TTL_SECONDS_ENV = "GATEWAY_MEDIA_JOB_TTL_SECONDS"
const DEFAULT_POLL_MS = 10_000
const DEFAULT_TTL_SECONDS = 24 * 3600

/**
 * The media jobs: the job store (jobStore.ts), the upstream polls (jobPolling.ts), the content
 * download (jobContent.ts) and the background sweep (jobSweep.ts), forked in the layer's scope.
 */
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
      const scope = yield* Effect.scope

      const store = makeJobStore({ sql, accounting, dir, ttlMs })
      const { refresh, wait } = makeJobPolling({ sql, inference, connections, store, scope })
      const content = makeJobContent({ inference, connections, dir })
      yield* Effect.forkScoped(Effect.repeat(makeJobSweep({ sql, health, store, refresh, dir, pollMs, ttlMs }), Schedule.spaced(pollMs)))

      const { create, find } = store
      return { create, find, refresh, wait, content } satisfies MediaJobsShape
    })
  )
}
