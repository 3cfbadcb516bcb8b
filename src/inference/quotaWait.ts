/**
 * Waiting out a quota (docs/resilience.md, "Waiting out a quota"): a request answered 429 because
 * every target is out of quota, with a known reset, is parked in the `QuotaQueue` until the earliest
 * reset and sent again, when its combo or its key allows a wait (`maxQueueWaitSeconds`). A streamed
 * client gets its answer's headers at once and SSE comments while it waits; a client that goes away
 * interrupts the wait and leaves the queue. Nothing here runs while nothing is parked and no 429 came.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { InferenceError, toCanonical } from "../kernel/errors.js"
import type { QuotaQueueShape, Parked } from "../services/resilience/QuotaQueue.js"
import type { ResilienceShape } from "../services/resilience/Resilience.js"
import type { RoutePlan } from "../services/routing/plan.js"
import type { RoutingMemoryShape } from "../services/routing/RoutingMemory.js"
import type { Candidate } from "../services/routing/types.js"
import type { InferenceCall } from "./call.js"
import { committed, type HttpRequestContext, responseHeaders, startStream, writeStream } from "./io.js"

/** How often a streamed client waiting in the queue hears from the gateway. */
export const KEEPALIVE_MS = 3_000
/** At most this many sends of one parked request (each after a reset it waited for). */
const MAX_ROUNDS = 20

/**
 * When a candidate can be sent to again, as far as the resilience state and the routing memory know
 * at `at`: now when it is admitted, the end of a rate-limit cooldown, the reset of a quota it used
 * up (the later of the two); undefined when it is out for another reason or for a time not known.
 * `exhausted: false` leaves out quotas used up (quota share's short waits only wait out cooldowns).
 */
export const sendableAt = (
  { resilience, memory }: { readonly resilience: ResilienceShape; readonly memory: RoutingMemoryShape },
  c: Candidate,
  at: number,
  exhausted: boolean
): number | undefined => {
  const a = resilience.admission(c, at)
  const q = memory.quota(c.connection.id, c.model, at)
  const usedUp = q?.exhausted === true
  if (usedUp && !exhausted) return a.ok ? at : undefined
  const quotaReset = usedUp ? q.resetAt : undefined
  if (a.ok) return quotaReset !== undefined && quotaReset > at ? quotaReset : usedUp ? undefined : at
  if (a.reason !== "cooldown" || a.retryAfterMs === null) return undefined
  return Math.max(at + a.retryAfterMs, quotaReset ?? 0)
}

/** The earliest time any of a plan's candidates (blocked ones included) can be sent to again; undefined: none known. */
export const planResetAt = (
  deps: { readonly resilience: ResilienceShape; readonly memory: RoutingMemoryShape },
  plan: RoutePlan,
  at: number,
  exhausted = true
): number | undefined => {
  let earliest: number | undefined
  const consider = (c: Candidate) => {
    const t = sendableAt(deps, c, at, exhausted)
    if (t !== undefined && (earliest === undefined || t < earliest)) earliest = t
  }
  for (const c of plan.candidates) consider(c)
  for (const b of plan.blocked) consider(b.candidate)
  return earliest
}

export interface QuotaWaitDeps {
  readonly queue: QuotaQueueShape
  readonly resilience: ResilienceShape
  readonly memory: RoutingMemoryShape
  /** A key's `maxQueueWaitSeconds` (null: none). */
  readonly keyWait: (apiKeyId: string) => Effect.Effect<number | null>
  /** A combo's `config.maxQueueWaitSeconds` (null: none, or no combo of that name). */
  readonly comboWait: (name: string) => Effect.Effect<number | null>
  /** The resilience state's time (the Clock's). */
  readonly now: () => number
}

/** A request's own dispatch over a plan, and how it is planned again after a wait. */
export interface QueuedDispatch<A> {
  readonly run: (plan: RoutePlan) => Effect.Effect<A, InferenceError>
  readonly replan: Effect.Effect<RoutePlan, InferenceError>
}

/** The answer's headers, with `retry-after` (whole seconds) when it had none. */
const withRetryAfter = (e: InferenceError, waitMs: number): Readonly<Record<string, string>> | undefined =>
  e.headers?.["retry-after"] !== undefined ? e.headers : { ...e.headers, "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))) }

/** The same 429, its message extended and `retry-after` set. */
const refusal = (call: InferenceCall, e: InferenceError, waitMs: number, more?: string): InferenceError => {
  const message = more === undefined ? e.message : `${e.message}; ${more}`
  const headers = withRetryAfter(e, waitMs)
  return new InferenceError({
    status: e.status,
    kind: e.kind,
    code: e.code,
    message,
    param: e.param ?? null,
    ...(headers ? { headers } : {}),
    body: more === undefined && e.body !== undefined ? e.body : call.format.encodeError({ ...toCanonical(e), message })
  })
}

/** Whether a failure is one the queue waits out: a 429 for a quota (not the key's own limits), nothing of the answer sent. */
const waitable = (ctx: HttpRequestContext, e: InferenceError): boolean =>
  e.status === 429 && e.code !== "token_limit_exceeded" && e.code !== "budget_exhausted" && !committed(ctx)

export const makeQuotaWait = (deps: QuotaWaitDeps) => {
  const { queue, keyWait, comboWait, now } = deps

  /** The longest wait the request may be parked for, in ms (0: off): the smaller of its key's and its combo's when both are set. */
  const limitMs = Effect.fnUntraced(function* (ctx: HttpRequestContext, plan: RoutePlan) {
    const k = ctx.apiKeyId === null ? null : yield* keyWait(ctx.apiKeyId)
    const c = plan.kind === "direct" ? null : yield* comboWait(plan.scope)
    const key = k !== null && k > 0 ? k : undefined
    const combo = c !== null && c > 0 ? c : undefined
    const seconds = key === undefined ? (combo ?? 0) : combo === undefined ? key : Math.min(key, combo)
    return seconds * 1000
  })

  /** A streamed SSE client's answer opens now (200 and its headers), so that comments can keep it alive while it waits. */
  const openForWait = (call: InferenceCall): boolean => {
    const { ctx, format } = call
    if (ctx.progress !== undefined) return ctx.res.headersSent && !ctx.progress.contentStarted && !ctx.res.writableEnded
    if (!call.stream || format.framing !== "sse" || call.jsonArrayStream || ctx.res.headersSent) return false
    startStream(ctx, {
      ...responseHeaders(ctx),
      "content-type": format.streamContentType,
      "cache-control": "no-cache",
      "x-accel-buffering": "no"
    })
    // As X-Gateway-Progress opens it: not committed until the answer's content begins (a failure is then the stream's error event).
    ctx.progress = { contentStarted: false, emit: () => {} }
    return true
  }

  /** The entry's turn; a streamed client hears `: waiting for quota reset in N s` at once and every few seconds meanwhile. */
  const waitTurn = (call: InferenceCall, entry: Parked, open: boolean): Effect.Effect<void> => {
    if (!open) return queue.turn(entry)
    const { ctx } = call
    const comment = Effect.sync(() => {
      if (ctx.res.destroyed || ctx.res.writableEnded) return
      writeStream(ctx, `: waiting for quota reset in ${Math.max(0, Math.ceil((entry.resetAt - now()) / 1000))} s\n\n`)
    })
    return Effect.raceFirst(queue.turn(entry), Effect.zipRight(Effect.repeat(comment, Schedule.spaced(KEEPALIVE_MS)), Effect.never))
  }

  /** The request parked until `resetAt`, then sent again (and again after each reset it meets) within `maxMs` of its parking. */
  const serveParked = Effect.fnUntraced(
    function* <A>(call: InferenceCall, entry: Parked, maxMs: number, d: QueuedDispatch<A>) {
      const open = openForWait(call)
      call.ctx.progress?.emit("waiting", { ms: Math.max(0, entry.resetAt - now()), reason: "quota" })
      yield* Effect.logInfo(
        `${entry.scope}: every target is out of quota; parked until ${new Date(entry.resetAt).toISOString()} (${queue.load.parked} parked)`
      )
      for (let round = 1; ; round++) {
        yield* waitTurn(call, entry, open)
        const plan = yield* d.replan
        const sent = yield* Effect.either(d.run(plan))
        if (sent._tag === "Right") {
          queue.leave(entry, "served")
          return sent.right
        }
        const e = sent.left
        const at = now()
        const next = waitable(call.ctx, e) ? planResetAt(deps, plan, at) : undefined
        if (next === undefined || next - entry.parkedAt > maxMs || round >= MAX_ROUNDS) return yield* Effect.fail(e)
        queue.again(entry, Math.max(next, at))
      }
    },
    (effect, _call, entry) =>
      effect.pipe(
        Effect.onInterrupt(() => Effect.sync(() => queue.leave(entry, "dropped"))),
        Effect.ensuring(Effect.sync(() => queue.leave(entry, "failed")))
      )
  )

  /** After a failure `e` of the request over `plan`: parked when it may wait and the reset is near enough, else `e` as today. */
  const parkAfter = <A>(call: InferenceCall, plan: RoutePlan, e: InferenceError, d: QueuedDispatch<A>): Effect.Effect<A, InferenceError> =>
    Effect.flatMap(limitMs(call.ctx, plan), (maxMs) => {
      if (maxMs <= 0) return Effect.fail(e)
      const at = now()
      const resetAt = planResetAt(deps, plan, at)
      if (resetAt === undefined) return Effect.fail(e)
      // Behind those already parked in its scope: never before their reset.
      const behind = Math.max(resetAt, queue.lastReset(plan.scope) ?? at)
      if (behind - at > maxMs) {
        const limit = `the quota resets in ${Math.ceil((behind - at) / 1000)} s, longer than this request may wait (${maxMs / 1000} s)`
        return Effect.fail(refusal(call, e, behind - at, limit))
      }
      const entry = queue.park({
        scope: plan.scope,
        combo: plan.kind === "direct" ? null : plan.scope,
        apiKeyId: call.ctx.apiKeyId,
        resetAt: behind,
        now: at
      })
      if (entry === undefined) {
        queue.refuse()
        return Effect.fail(
          refusal(call, e, behind - at, `the queue of requests waiting for a quota to reset is full (${queue.load.parked} parked)`)
        )
      }
      return serveParked(call, entry, maxMs, d)
    })

  /** The request's first dispatch, waiting out a quota after a 429 when it may (the common path's hand-offs too). */
  const afterFailure = <A>(call: InferenceCall, plan: RoutePlan, first: Effect.Effect<A, InferenceError>, d: QueuedDispatch<A>) =>
    Effect.catchIf(
      first,
      (e) => waitable(call.ctx, e),
      (e) => parkAfter(call, plan, e, d)
    )

  /**
   * The pipeline's dispatch of a request over its plan. While requests are parked, one that may wait
   * and whose scope has parked requests not yet sent goes behind them without trying: a later arrival
   * does not overtake.
   */
  const queued = <A>(call: InferenceCall, plan: RoutePlan, d: QueuedDispatch<A>): Effect.Effect<A, InferenceError> => {
    if (queue.load.parked === 0 || queue.waiting(plan.scope) === 0) return afterFailure(call, plan, d.run(plan), d)
    return Effect.flatMap(limitMs(call.ctx, plan), (maxMs) => {
      const at = now()
      const resetAt = Math.max(queue.lastReset(plan.scope) ?? at, planResetAt(deps, plan, at) ?? at)
      if (maxMs <= 0 || resetAt - at > maxMs) return afterFailure(call, plan, d.run(plan), d)
      const entry = queue.park({
        scope: plan.scope,
        combo: plan.kind === "direct" ? null : plan.scope,
        apiKeyId: call.ctx.apiKeyId,
        resetAt,
        now: at
      })
      return entry === undefined ? afterFailure(call, plan, d.run(plan), d) : serveParked(call, entry, maxMs, d)
    })
  }

  return { queued, afterFailure }
}

export type QuotaWait = ReturnType<typeof makeQuotaWait>
