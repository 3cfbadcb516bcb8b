/**
 * Asking the upstream about an unfinished job: one poll applied to the row, shared by concurrent
 * refreshes of the job in this process, and the wait of a client that holds its request open.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import type { ConnectionsShape } from "../../upstream/providers/Connections.js"
import type { InferenceShape } from "../call.js"
import { isFinal, pollCall, readPoll } from "./jobFamilies.js"
import type { JobStore } from "./jobStore.js"
import type { MediaJob } from "./MediaJobs.js"

/** A client waiting on a job: polls soon, then less often (250 ms growing by half, at most every 5 s). */
const WAIT_SCHEDULE = Schedule.either(Schedule.exponential("250 millis", 1.5), Schedule.spaced("5 seconds"))

export interface JobPollingDeps {
  readonly sql: SqlClient.SqlClient
  readonly inference: InferenceShape
  readonly connections: ConnectionsShape
  readonly store: JobStore
  /** The service's scope: a poll runs in it, not in the fiber of the client that asked. */
  readonly scope: Scope.Scope
}

/** Refreshing jobs from their upstream: `refresh` (one poll, shared) and `wait` (refreshes until the job finished). */
export const makeJobPolling = (deps: JobPollingDeps) => {
  const { scope } = deps
  const pollOnce = makePollOnce(deps)

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

  return { refresh, wait }
}

/** What the upstream says of the job now, applied to the row. Never fails: a poll that could not be made leaves the job as it was. */
const makePollOnce =
  ({ sql, inference, connections, store }: JobPollingDeps) =>
  (job: MediaJob): Effect.Effect<MediaJob> => {
    const { finish, touch, reload } = store
    return Effect.gen(function* () {
      const found = yield* Effect.option(connections.get(job.connectionId))
      if (Option.isNone(found))
        return yield* finish(job, {
          status: "failed",
          progress: job.progress,
          error: { code: "connection_removed", message: "the connection that ran this job was removed" }
        })
      const connection = found.value
      if (!job.upstreamId)
        return yield* finish(job, {
          status: "failed",
          progress: job.progress,
          error: { code: "no_upstream_job", message: "the upstream gave no job id" }
        })
      // Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a job lives on the connection
      // that accepted it, so its poll has nowhere else to go, and a failed poll tells nothing of the
      // connection's health for new requests (the job's own status carries it).
      const sent = yield* Effect.either(
        inference.send(
          { connection, model: job.model },
          connection.format,
          {},
          { stream: false, readWhole: true, custom: pollCall(job.family, job.upstreamId) },
          openAiChat
        )
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
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.zipRight(Effect.logWarning(`media job ${job.id}: the poll failed`, cause), Effect.succeed(job))
      )
    )
  }
