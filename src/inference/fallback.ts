import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { WireFormat } from "../upstream/formats/format.js"
import type { ConnectionSlotsShape } from "../services/resilience/ConnectionSlots.js"
import type { ResilienceShape } from "../services/resilience/Resilience.js"
import type { Blocked, RoutePlan } from "../services/routing/plan.js"
import type { RouterShape } from "../services/routing/Router.js"
import type { RoutingMemoryShape } from "../services/routing/RoutingMemory.js"
import type { Candidate } from "../services/routing/types.js"
import { failureType } from "../services/observability/genai.js"
import { allBlocked, type AttemptFailed, attemptFailed, type AttemptOutcome, outcomeCost, type Tracking } from "../kernel/attempts.js"
import { InferenceError } from "../kernel/errors.js"
import { attemptStarted, type HookTable, quotaExhausted, upstreamFailed } from "../kernel/hooks.js"
import { fireAttemptEnd, fireAttemptStart, fireRouted, listensToAttemptStart } from "../kernel/listeners.js"
import { committed, type HttpRequestContext } from "./io.js"

/** Whether a request has onProviderError or onRateLimit handlers. */
const failureHooks = (hooks: HookTable | undefined): boolean =>
  hooks !== undefined && (hooks.onProviderError.length !== 0 || hooks.onRateLimit.length !== 0)

/** At most this many upstream attempts per request, fallbacks included. */
export const MAX_ATTEMPTS = 10

/**
 * Who the attempts are made for, in the client's terms (an `InferenceCall` is one). Nothing here
 * is specific to chat: embeddings, count_tokens, the WebSocket relay and fusion panel members
 * pass their own.
 */
export interface AttemptRequest {
  readonly ctx: HttpRequestContext
  /** The client's wire format: the error when nothing could be tried is rendered in it. */
  readonly format: WireFormat
  /** The model id as the client asked for it (token limits are checked against it). */
  readonly model: string
  /** Whether a same-format upstream gets the body passed through (the log line's `translation`). */
  readonly passthrough?: boolean
  /**
   * Whether something of the answer reached the client, so that no other target may be tried;
   * `committed(ctx)` (the HTTP response) when absent. The WebSocket relay answers for its socket.
   */
  readonly committed?: () => boolean
}

/**
 * One try against one candidate: answers the client (or hands back what it got), or fails with
 * nothing sent. An `AttemptFailed` with a `failure` is the candidate's fault (the resilience layer
 * hears of it, and a retryable one moves on to the next candidate); without one it is the
 * request's own (not retried) unless `skip` says the candidate could not be used at all. The
 * request comes back as the first argument, so a route's try needs no closure per request.
 */
export type TryCandidate<R extends AttemptRequest, A extends AttemptOutcome> = (
  request: R,
  candidate: Candidate,
  options: { readonly probe: boolean }
) => Effect.Effect<A, AttemptFailed>

/** What one request's dispatch keeps across its candidates. */
export interface Dispatch<R extends AttemptRequest, A extends AttemptOutcome> {
  readonly request: R
  readonly plan: RoutePlan
  readonly track: Tracking
  readonly attempt: TryCandidate<R, A>
  /** Attempts made so far (fallbacks are this minus one). */
  attempts: number
  /**
   * Keys of the candidates tried so far (a target listed twice is tried once): none, the one
   * key (most requests), then a Set from the second on (`hasTried`, `markTried`).
   */
  tried: string | Set<string> | undefined
}

/** Whether the dispatch has tried the candidate of this key. */
const hasTried = (d: { readonly tried: string | Set<string> | undefined }, key: string): boolean => {
  const tried = d.tried
  return tried === undefined ? false : typeof tried === "string" ? tried === key : tried.has(key)
}

/** Notes the candidate of this key as tried: a Set only once a second one is. */
const markTried = (d: { tried: string | Set<string> | undefined }, key: string): void => {
  const tried = d.tried
  if (tried === undefined || tried === key) d.tried = key
  else if (typeof tried === "string") d.tried = new Set([tried, key])
  else tried.add(key)
}

/** A candidate's outcome before it answers: one shared object (nothing changes an outcome once made). */
const NOT_ANSWERED = Object.freeze({ status: 0, usage: undefined, ttftMs: null, error: null })

/**
 * A candidate's try once begun (`beginAttempt`): its gate, what ends its in-flight count, and what
 * its end reports. A class rather than a literal with a closure that ends the count: `end` is a
 * method that keeps whether it ran on the object itself, not a function and its scope made per attempt.
 */
export class Begun {
  private ended = false
  constructor(
    private readonly memory: RoutingMemoryShape,
    private readonly candidate: Candidate,
    readonly gate: ReturnType<ResilienceShape["acquire"]>,
    readonly probe: boolean,
    /** What the listeners answered to the attempt's start (observability's spans). */
    readonly started: Array<unknown> | undefined,
    readonly startedAt: number
  ) {}

  /** Ends the attempt's in-flight count (idempotent). */
  end(): void {
    if (this.ended) return
    this.ended = true
    this.memory.end(this.candidate)
  }
}

/** `Effect.uninterruptibleMask`'s restore: the attempt itself stays interruptible. */
type Restore = <X, E, Q>(effect: Effect.Effect<X, E, Q>) => Effect.Effect<X, E, Q>

const isCommitted = (request: AttemptRequest): boolean => (request.committed ? request.committed() : committed(request.ctx))

export interface GuardedAttemptDeps {
  readonly resilience: ResilienceShape
  readonly accounting: AccountingShape
  readonly memory: RoutingMemoryShape
  readonly router: RouterShape
  readonly slots: ConnectionSlotsShape
  /** The time the resilience state is kept in (the Clock's). */
  readonly now: () => number
  /** Whether info lines are written (log annotations cost effects on every attempt). */
  readonly infoOn: boolean
  /** Each attempt's metrics, and its span while tracing is on. */
}

/**
 * The guarded attempt every upstream call goes through: admission, the probe gate, slots and fallback over a plan's candidates.
 * `track` says what the usage row will record; the caller writes it (docs/internals.md, "Seam 1: one guarded attempt").
 */
export const makeGuardedAttempt = ({ resilience, accounting, memory, router, slots, now, infoOn }: GuardedAttemptDeps) => {
  // Made once here, not per request (docs/performance.md, "Generator functions on the request path").
  /** A candidate's try begins (synchronous): gate, in-flight count, tracking, listeners. `busy`: a probe is already out. */
  const beginAttempt = <R extends AttemptRequest, A extends AttemptOutcome>(
    d: Dispatch<R, A>,
    candidate: Candidate,
    at: number
  ): Begun | "busy" => {
    const { request, plan, track } = d
    const { ctx } = request
    const gate = resilience.acquire(candidate, at)
    if (!gate.allowed) return "busy"
    memory.begin(candidate)
    markTried(d, candidate.key)
    if (d.attempts > 0) ctx.responseHeaders["x-gateway-fallback-attempts"] = String(d.attempts)
    ctx.progress?.emit("attempt", { attempt: d.attempts + 1, target: candidate.key, ...(gate.probe ? { probe: true } : {}) })
    track.tried = candidate
    track.fallbacks = d.attempts
    track.outcome = NOT_ANSWERED
    d.attempts++
    const probe = gate.probe || plan.probes.has(candidate.key)
    // The lifecycle's listeners (observability's spans) hear of the attempt; what they answer comes back at its end.
    const started = listensToAttemptStart(ctx)
      ? fireAttemptStart(ctx, { endpoint: ctx.endpoint, candidate, attempt: d.attempts, probe })
      : undefined
    return new Begun(memory, candidate, gate, probe, started, Date.now())
  }

  /**
   * A candidate's try, uninterruptible but for the attempt itself (`restore`): the gate, the
   * slot, the attempt, and what its outcome tells the resilience layer and the router.
   */
  const tryCandidate = Effect.fnUntraced(function* <R extends AttemptRequest, A extends AttemptOutcome>(
    d: Dispatch<R, A>,
    candidate: Candidate,
    at: number,
    restore: Restore
  ) {
    const { request, plan, attempt } = d
    const { ctx, format: client } = request
    const begun = beginAttempt(d, candidate, at)
    if (begun === "busy") return { kind: "busy" as const }
    const { gate, probe } = begun
    const releaseProbe = gate.probe ? Effect.sync(() => resilience.release(candidate)) : Effect.void
    const releaseSlot =
      plan.kind === "quota-share"
        ? yield* restore(slots.acquire(candidate.connection)).pipe(
            Effect.onInterrupt(() => Effect.sync(() => begun.end()).pipe(Effect.zipRight(releaseProbe)))
          )
        : undefined
    // onAttemptStart hooks run first, as part of the attempt: a block fails it with nothing sent.
    const starting = ctx.hooks?.onAttemptStart
    const tryIt =
      starting === undefined || starting.length === 0
        ? attempt(request, candidate, { probe })
        : Effect.flatMap(attemptStarted(ctx, client, d.attempts, candidate, probe), (blocked) =>
            blocked === undefined ? attempt(request, candidate, { probe }) : Effect.fail(attemptFailed(blocked, undefined))
          )
    // One exit instead of either + ensuring + onInterrupt: the slot and the in-flight
    // count are released whatever happened; a probe only when interrupted.
    const exit = yield* Effect.exit(
      restore(
        infoOn
          ? tryIt.pipe(
              Effect.annotateLogs({
                provider: candidate.connection.provider.id,
                connection: candidate.connection.name,
                model: candidate.model,
                translation:
                  (request.passthrough ?? true) && candidate.connection.formats.includes(client.id)
                    ? "passthrough"
                    : `${client.id}->${candidate.connection.format}`
              })
            )
          : tryIt
      )
    )
    releaseSlot?.()
    begun.end()
    return yield* settleAttempt(d, candidate, begun, exit, restore)
  })

  /**
   * What a successful, unbroken attempt tells the routing memory, the listeners and the resilience
   * layer (synchronous: the common path's success, and the first part of `settleAttempt`'s).
   */
  const servedNow = <R extends AttemptRequest, A extends AttemptOutcome>(
    d: Dispatch<R, A>,
    candidate: Candidate,
    begun: Begun,
    outcome: A,
    endedAt: number
  ): void => {
    const { request, track } = d
    const { ctx } = request
    const latency = endedAt - begun.startedAt
    ctx.upstreamMs = (ctx.upstreamMs ?? 0) + latency
    memory.observe(candidate.key, latency, !outcome.streamFailure, endedAt)
    // Its pace: whether a non-streamed request may be asked of it whole (src/inference/nonStreamed.ts).
    const output = outcome.usage?.outputTokens
    if (output !== undefined && !outcome.streamFailure) memory.observeOutput(candidate.key, output, latency)
    track.outcome = outcome
    const broken = outcome.streamFailure
    const errorType = broken ? failureType(broken) : ""
    // One object as the listeners hear it: with the cost (and a broken stream's message) when they heard the start.
    fireAttemptEnd(
      ctx,
      begun.started,
      begun.started === undefined
        ? { endpoint: ctx.endpoint, candidate, latencyMs: latency, errorType, usage: outcome.usage, ttftMs: outcome.ttftMs }
        : broken
          ? {
              endpoint: ctx.endpoint,
              candidate,
              latencyMs: latency,
              errorType,
              usage: outcome.usage,
              ttftMs: outcome.ttftMs,
              costUsd: outcomeCost(accounting, candidate, outcome),
              message: broken.message
            }
          : {
              endpoint: ctx.endpoint,
              candidate,
              latencyMs: latency,
              errorType,
              usage: outcome.usage,
              ttftMs: outcome.ttftMs,
              costUsd: outcomeCost(accounting, candidate, outcome)
            }
    )
    if (!broken) resilience.succeeded(candidate, outcome.headers, now())
  }

  /** What an attempt's exit tells the resilience layer and the router, and what the dispatch does next. */
  const settleAttempt = Effect.fnUntraced(function* <R extends AttemptRequest, A extends AttemptOutcome>(
    d: Dispatch<R, A>,
    candidate: Candidate,
    begun: Begun,
    exit: Exit.Exit<A, AttemptFailed>,
    restore: Restore
  ) {
    const { request, plan, track } = d
    const { ctx } = request
    const { gate, started, startedAt } = begun
    const releaseProbe = gate.probe ? Effect.sync(() => resilience.release(candidate)) : Effect.void
    let result: Either.Either<A, AttemptFailed>
    if (Exit.isSuccess(exit)) result = Either.right(exit.value)
    else {
      const failure = Cause.failureOption(exit.cause)
      if (failure._tag === "None") {
        const interrupted = Cause.isInterrupted(exit.cause)
        const latencyMs = Date.now() - startedAt
        ctx.upstreamMs = (ctx.upstreamMs ?? 0) + latencyMs
        fireAttemptEnd(ctx, started, {
          endpoint: ctx.endpoint,
          candidate,
          latencyMs,
          errorType: interrupted ? "cancelled" : "internal_error",
          usage: undefined,
          ttftMs: null
        })
        if (interrupted) yield* releaseProbe
        // Interrupted or a defect: no typed failure is in this cause.
        return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
      }
      result = Either.left(failure.value)
    }
    const endedAt = Date.now()
    if (result._tag === "Right") {
      servedNow(d, candidate, begun, result.right, endedAt)
      const broken = result.right.streamFailure
      const classification = broken ? yield* resilience.failed(candidate, broken, gate.probe) : undefined
      yield* router.served(plan, candidate)
      // The stream broke after it began: still the upstream's error (the client got it in-stream).
      const hooked =
        broken && classification && failureHooks(ctx.hooks)
          ? upstreamFailed(ctx, d.attempts, candidate, broken, classification, true)
          : undefined
      if (hooked) yield* restore(hooked)
      return { kind: "served" as const, outcome: result.right }
    }
    const latency = endedAt - startedAt
    ctx.upstreamMs = (ctx.upstreamMs ?? 0) + latency
    const failed = result.left
    fireAttemptEnd(ctx, started, {
      endpoint: ctx.endpoint,
      candidate,
      latencyMs: latency,
      errorType: failed.failure ? failureType(failed.failure) : (failed.error.code ?? String(failed.error.status)),
      usage: undefined,
      ttftMs: null,
      message: failed.error.message
    })
    track.outcome = { status: failed.error.status, usage: undefined, ttftMs: null, error: failed.error.message }
    if (!failed.failure) {
      yield* releaseProbe
      return { kind: failed.skip && !isCommitted(request) ? ("skip" as const) : ("final" as const), error: failed.error }
    }
    const classification = yield* resilience.failed(candidate, failed.failure, gate.probe)
    yield* router.failed(plan, candidate)
    // The request's own faults say nothing about the candidate's health.
    if (classification.scope !== "client") memory.observe(candidate.key, latency, false, endedAt)
    yield* Effect.logInfo(
      `attempt failed (${classification.reason}, ${classification.scope})${classification.retryable ? "" : ", not retried"}: ${failed.error.message}`
    )
    ctx.progress?.emit("failed", {
      attempt: d.attempts,
      target: candidate.key,
      reason: classification.reason,
      retryable: classification.retryable
    })
    const hooked = failureHooks(ctx.hooks) ? upstreamFailed(ctx, d.attempts, candidate, failed.failure, classification, false) : undefined
    if (hooked) yield* restore(hooked)
    return { kind: !classification.retryable || isCommitted(request) ? ("final" as const) : ("next" as const), error: failed.error }
  })

  /** Tries the plan's candidates in order, falling back on retryable failures; answers the outcome of the one that served. */
  const dispatch = Effect.fnUntraced(function* <R extends AttemptRequest, A extends AttemptOutcome>(
    d: Dispatch<R, A>,
    from = 0,
    after?: InferenceError
  ) {
    const { request, plan, track } = d
    const { ctx, format: client } = request
    let lastError: InferenceError | undefined = after
    // Candidates passed over at attempt time (cooling down since the plan, probe taken).
    const skipped: Array<Blocked> = []
    // The level whose token limit passed a candidate over (the key, its user, team(s), the organisation).
    let limitedBy: { level: string; subject: string } | undefined
    for (let i = from; i < plan.candidates.length; i++) {
      const candidate = plan.candidates[i]!
      if (d.attempts >= MAX_ATTEMPTS) break
      // A target listed twice is tried once; one that failed earlier in this request is
      // re-checked, since its failure may have put it in cooldown or a terminal state.
      if (hasTried(d, candidate.key)) continue
      // One reading of the Clock for the candidate's admission and its gate.
      const at = now()
      const admission = resilience.admission(candidate, at)
      if (!admission.ok) {
        skipped.push({ candidate, reason: admission.reason, retryAfterMs: admission.retryAfterMs })
        continue
      }
      const limitTarget = {
        provider: candidate.connection.provider.id,
        model: candidate.model,
        requestedModel: request.model,
        connection: candidate.connection.name
      }
      // Several processes (Redis): the check holds the request's expected tokens atomically across them.
      const limit = accounting.exact
        ? yield* accounting.claimTokens(ctx.apiKeyId, limitTarget, track.hold)
        : accounting.tokenLimit(ctx.apiKeyId, limitTarget, track.hold)
      if (!limit.ok) {
        limitedBy = { level: limit.level, subject: limit.subject }
        skipped.push({
          candidate,
          reason: "token_limit",
          retryAfterMs: limit.retryAfterMs,
          detail: `${limit.limit.maxTokens} tokens per ${limit.limit.window} (${limit.limit.scope}${limit.limit.provider ? ` ${limit.limit.provider}` : ""}${limit.limit.model ? ` ${limit.limit.model}` : ""})`
        })
        continue
      }
      const step = yield* Effect.uninterruptibleMask((restore) => tryCandidate(d, candidate, at, restore))
      if (step.kind === "served") return step.outcome
      if (step.kind === "busy") {
        skipped.push({ candidate, reason: "circuit_half_open", retryAfterMs: null })
        continue
      }
      lastError = step.error
      if (step.kind === "final") return yield* Effect.fail(step.error)
    }
    if (d.attempts > 1) ctx.responseHeaders["x-gateway-fallback-attempts"] = String(d.attempts - 1)
    const final = lastError ?? allBlocked(client, { ...plan, blocked: [...plan.blocked, ...skipped] }, limitedBy)
    if (!lastError) {
      track.outcome = { status: final.status, usage: undefined, ttftMs: null, error: final.message }
      if (final.code === "token_limit_exceeded" && ctx.hooks !== undefined && ctx.hooks.onQuotaExhaust.length !== 0) {
        const waits = [...plan.blocked, ...skipped].map((b) => b.retryAfterMs).filter((w): w is number => w !== null)
        const fired = quotaExhausted(ctx, {
          kind: "token_limit",
          window: null,
          spentUsd: null,
          limitUsd: null,
          retryAfterMs: waits.length > 0 ? Math.min(...waits) : null,
          action: "refused",
          fallbackModel: null,
          message: final.message
        })
        if (fired) yield* fired
      }
    }
    return yield* Effect.fail(
      d.attempts > 1
        ? new InferenceError({ ...final, headers: { ...final.headers, "x-gateway-fallback-attempts": String(d.attempts - 1) } })
        : final
    )
  })

  /** A dispatch begins: the plan told to the listeners (synchronous). */
  const startDispatch = <R extends AttemptRequest, A extends AttemptOutcome>(
    request: R,
    plan: RoutePlan,
    track: Tracking,
    attempt: TryCandidate<R, A>
  ): Dispatch<R, A> => {
    if (track.tried === undefined) track.tried = plan.candidates[0]
    fireRouted(request.ctx, plan)
    return { request, plan, track, attempt, attempts: 0, tried: undefined }
  }

  const annotated = <R extends AttemptRequest, A extends AttemptOutcome, X>(d: Dispatch<R, A>, run: Effect.Effect<X, InferenceError>) =>
    infoOn
      ? run.pipe(
          Effect.annotateLogs({
            route: d.plan.kind === "direct" ? d.request.model : `${d.plan.kind}:${d.plan.scope}`,
            strategy: d.plan.strategy
          })
        )
      : run

  const guarded = <R extends AttemptRequest, A extends AttemptOutcome>(
    request: R,
    plan: RoutePlan,
    track: Tracking,
    attempt: TryCandidate<R, A>
  ): Effect.Effect<A, InferenceError> =>
    Effect.suspend(() => {
      const d = startDispatch(request, plan, track, attempt)
      return annotated(d, dispatch(d))
    })

  /**
   * The dispatch after its candidate at `index` was tried without an effect (the common path) and
   * did not simply serve: the attempt's exit settled as `tryCandidate` settles it, then the next
   * candidates, exactly as `guarded` would have gone on.
   */
  const continueAfter = <R extends AttemptRequest, A extends AttemptOutcome>(
    d: Dispatch<R, A>,
    index: number,
    begun: Begun,
    exit: Exit.Exit<A, AttemptFailed>
  ): Effect.Effect<A, InferenceError> =>
    annotated(
      d,
      Effect.flatMap(
        Effect.uninterruptibleMask((restore) => settleAttempt(d, d.plan.candidates[index]!, begun, exit, restore)),
        (step): Effect.Effect<A, InferenceError> =>
          step.kind === "served"
            ? Effect.succeed(step.outcome)
            : step.kind === "final"
              ? Effect.fail(step.error)
              : dispatch(d, index + 1, step.error)
      )
    )

  /** The dispatch from its candidate at `from` on, as `guarded` goes through it (the common path's hand-off before any attempt). */
  const dispatchFrom = <R extends AttemptRequest, A extends AttemptOutcome>(
    d: Dispatch<R, A>,
    from: number
  ): Effect.Effect<A, InferenceError> => annotated(d, dispatch(d, from))

  return { guarded, startDispatch, beginAttempt, servedNow, continueAfter, dispatchFrom }
}

/** The candidate a plan would try first (a fusion plan's judge when it has no panel; else a blocked one, to name it). */
export const firstOf = (plan: RoutePlan): Candidate | undefined => plan.candidates[0] ?? plan.fusion?.judge ?? plan.blocked[0]?.candidate

/**
 * The plan narrowed to the candidates that can serve an endpoint (embeddings: no Anthropic
 * connection; the WebSocket relay: a Responses-API one), blocked ones included; undefined when
 * none can. A fusion plan is tried as its panel's first candidates (its judge when it has no
 * panel): endpoints other than chat run no panel.
 */
export const narrowPlan = (plan: RoutePlan, able: (c: Candidate) => boolean): RoutePlan | undefined => {
  const all = plan.candidates.length === 0 && plan.fusion ? [plan.fusion.judge] : plan.candidates
  const candidates = all.filter(able)
  const blocked = plan.blocked.filter((b) => able(b.candidate))
  if (candidates.length === 0 && blocked.length === 0) return undefined
  const { fusion: _fusion, ...rest } = plan
  return { ...rest, candidates, blocked }
}
