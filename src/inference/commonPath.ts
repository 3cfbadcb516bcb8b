/**
 * The common request without a fiber (docs/ARCHITECTURE.md, "The common path"). A refusal leaves nothing done; once committed, the
 * first thing not common hands the same dispatch to the pipeline (`continueAfter`, `dispatchFrom`), so behaviour is the pipeline's.
 */
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { LimitTarget } from "../services/accounting/TokenLimits.js"
import type { GuardrailsShape } from "../services/guardrails/Guardrails.js"
import type { ResilienceShape } from "../services/resilience/Resilience.js"
import type { RoutePlan } from "../services/routing/plan.js"
import type { Candidate } from "../services/routing/types.js"
import type { UsageShape } from "../services/usage/Usage.js"
import type { FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import { type AttemptFailed, type AttemptOutcome, newTracking, recordRequestNow, type Tracking } from "../kernel/attempts.js"
import type { InferenceError } from "../kernel/errors.js"
import { type HookTable, modelSelectLeftAlone, modelSelectNow, settleModelSelect } from "../kernel/hooks.js"
import type { AttemptResult } from "./attempt.js"
import { attachUsageRow } from "./builtinHooks.js"
import type { InferenceCall } from "./call.js"
import type { makeGuardedAttempt } from "./fallback.js"
import { requestHeader } from "./io.js"
import { candidatesOf } from "./serving.js"
import { conversationOf, explicitSession } from "./session.js"

/**
 * Why a request does not take the common path: the rule's one list (each reason is a test in
 * test/common-path.test.ts, and a label of `gateway_requests_path_total`).
 */
export type CommonPathRefusal =
  /** GATEWAY_COMMON_PATH is off (the operator's way out, and for comparisons). */
  | "off"
  /** A route the common path does not serve (only chat completions, messages and responses today), or an internal call. */
  | "route"
  /** An Idempotency-Key or X-Request-Id: the answer is recorded for duplicates. */
  | "idempotency"
  /** The key could not be checked from memory, was refused, or has inbound rate limits (a counter to admit against). */
  | "key"
  /** The body is not a request the route takes (the pipeline answers its 400). */
  | "body"
  /** A flag or a cache the decision reads is not known fresh in memory. */
  | "cold"
  /** Budgets and limits are held across processes (Redis): the hold is a round trip. */
  | "shared_limits"
  /** A hook is registered or attached to this request (plugins, policies, the inspector watching bodies), or a guardrail acts on it. */
  | "hooks"
  /** X-Gateway-Progress: the answer opens early for progress events. */
  | "progress"
  /** The key's budget is spent (a refusal or the emergency model). */
  | "budget"
  /** The response cache looks this request up. */
  | "cache"
  /** The router has no plan in memory for the model (auto, quota share, a combo not planned yet), or refuses it. */
  | "plan"
  /** A fusion panel, an auto pool or a quota-share group. */
  | "plan_kind"
  /** The first candidate needs an effect to be called: an OAuth token, a proxy, an answer held to a schema. */
  | "target"
  /** Requests are parked waiting for a quota to reset (docs/resilience.md, "Waiting out a quota"): one that may wait goes behind them. */
  | "queue"
  /** A bridge model is configured and the request has image, audio or PDF parts (docs/bridge.md): the plan may be reordered and parts described. */
  | "bridge"
  /** A Responses request with `mcp` tools: the gateway's MCP tool loop serves it (docs/mcp.md, "MCP tools in model requests"). */
  | "mcp"
  /** A Responses request with Codex's compaction trigger last in its input: the gateway may answer it itself (docs/agents.md, "Codex compaction"). */
  | "compaction"
  /**
   * A Responses request with `previous_response_id` whose answering connection (it decides how the
   * id is resolved: ResponseStore.expand) the router does not know in memory.
   */
  | "previous_response"

/**
 * Whether a request has hooks that may block or rewrite it before it goes out: onRequest,
 * onAttemptStart. The others run on the common path as on the pipeline: onModelSelect at once
 * (handing off when one changes anything), the write path's and the end's through the same
 * writers and `endRequest`, the failure events on the pipeline's side of a hand-off.
 */
export const hooksInUse = (hooks: HookTable | undefined, model: string, apiKeyId: string | null): boolean =>
  hooks !== undefined && (wanted(hooks.onRequest, model, apiKeyId) || wanted(hooks.onAttemptStart, model, apiKeyId))

/** Whether a hook of `entries` may act on this request (one without `wants` may act on any). */
const wanted = (
  entries: ReadonlyArray<{ readonly wants: ((model: string, apiKeyId: string | null) => boolean) | undefined }>,
  model: string,
  apiKeyId: string | null
): boolean => {
  for (const e of entries) if (e.wants === undefined || e.wants(model, apiKeyId)) return true
  return false
}

type Guarded = ReturnType<typeof makeGuardedAttempt>

export interface CommonPathDeps {
  readonly flags: FeatureFlagsShape
  readonly accounting: AccountingShape
  readonly guardrails: GuardrailsShape
  readonly resilience: ResilienceShape
  readonly usage: UsageShape
  readonly guarded: Guarded
  /** The request will write a usage row: written ahead while it runs (InFlight). */
  readonly writeAhead: (call: InferenceCall) => void
  /** What the response cache would do with the request (undefined: not known fresh). */
  readonly cacheWanted: (call: InferenceCall) => "off" | "miss" | "look" | undefined
  /** The plan the router knows for the request's model, without an effect (undefined: not in memory). */
  readonly peekPlan: (call: InferenceCall, sessionId: string | undefined) => Either.Either<RoutePlan, unknown> | undefined
  readonly attempt: (
    call: InferenceCall,
    candidate: Candidate,
    options: { readonly probe: boolean }
  ) => Effect.Effect<AttemptOutcome, AttemptFailed>
  /** The pipeline's dispatch of a call over a plan (the guarded attempt with `attempt`). */
  readonly execute: (call: InferenceCall, plan: RoutePlan, track: Tracking) => Effect.Effect<AttemptOutcome, InferenceError>
  readonly attemptNow: (
    call: InferenceCall,
    candidate: Candidate,
    options: { readonly probe: boolean },
    done: (result: AttemptResult) => void
  ) => void
  readonly canAttemptNow: (call: InferenceCall, candidate: Candidate) => boolean
  /** The router's `served` without an effect: what a combo remembers of the candidate that answered. */
  readonly servedNow: (plan: RoutePlan, candidate: Candidate) => void
  /** Whether the request may need a bridge (docs/bridge.md); absent: bridging is not part of the gateway. */
  readonly bridging?: ((call: InferenceCall) => boolean) | undefined
  /** Requests parked waiting for a quota to reset, in all (src/services/resilience/QuotaQueue.ts). */
  readonly queueLoad: { readonly parked: number }
  /** A hand-off's dispatch, a 429 then waited out in the quota queue when the request may wait (src/inference/quotaWait.ts). */
  readonly waited: (
    call: InferenceCall,
    plan: RoutePlan,
    track: Tracking,
    sessionId: string | undefined,
    first: Effect.Effect<AttemptOutcome, InferenceError>
  ) => Effect.Effect<AttemptOutcome, InferenceError>
  /** The resilience state's time (the Clock's). */
  readonly now: () => number
}

/** How a request the common path took ends: `done` (answered, its usage row queued) or the Effect that finishes it. */
export interface CommonPathEnds {
  readonly done: () => void
  readonly handoff: (rest: Effect.Effect<void, InferenceError>) => void
}

export const makeCommonPath = (deps: CommonPathDeps) => {
  const {
    flags,
    accounting,
    guardrails,
    resilience,
    usage,
    guarded,
    writeAhead,
    cacheWanted,
    peekPlan,
    attempt,
    execute,
    attemptNow,
    canAttemptNow,
    servedNow,
    bridging,
    queueLoad,
    waited,
    now
  } = deps

  /**
   * The candidates `modelRefusal` may ask for, made once per plan: the router keeps the usual
   * request's plan (src/services/routing/Router.ts), so the thunk of the last plan seen is reused
   * rather than made per request.
   */
  let refusalPlan: RoutePlan | undefined
  let refusalCandidates: () => ReturnType<typeof candidatesOf> = () => []
  const candidatesFor = (plan: RoutePlan): (() => ReturnType<typeof candidatesOf>) => {
    if (plan !== refusalPlan) {
      refusalPlan = plan
      refusalCandidates = () => candidatesOf(plan)
    }
    return refusalCandidates
  }

  /**
   * What the token limits read of the first candidate, made once per candidate and model asked
   * for: the usual request names the same ones (its plan is kept), so no object per request.
   */
  let limitCandidate: Candidate | undefined
  let limitTarget: LimitTarget | undefined
  const limitTargetOf = (candidate: Candidate, requestedModel: string): LimitTarget => {
    if (candidate !== limitCandidate || limitTarget === undefined || limitTarget.requestedModel !== requestedModel) {
      limitTarget = {
        provider: candidate.connection.provider.id,
        model: candidate.model,
        requestedModel,
        connection: candidate.connection.name
      }
      limitCandidate = candidate
    }
    return limitTarget
  }

  /**
   * The rule, for a call a common route prepared: the refusal, or the plan and first candidate
   * the request will be tried on. Reads memory only and changes nothing.
   */
  const decide = (
    call: InferenceCall,
    sessionId: string | undefined
  ): CommonPathRefusal | { readonly plan: RoutePlan; readonly candidate: Candidate; readonly cache: "off" | "miss" } => {
    const { ctx } = call
    if (!accounting.prepared() || flags.peekEnabled("GATEWAY_USAGE_LOGGING_ENABLED") === undefined) return "cold"
    if (accounting.exact && accounting.holdsShared(ctx.apiKeyId)) return "shared_limits"
    if (hooksInUse(ctx.hooks, call.model, ctx.apiKeyId) || ctx.rewrite !== undefined) return "hooks"
    const guarding = guardrails.screenNow(call.format.id, call.body)
    if (guarding !== false) return guarding === undefined ? "cold" : "hooks"
    if (String(requestHeader(ctx, "x-gateway-progress") ?? "").toLowerCase() === "true") return "progress"
    if (!accounting.budget(ctx.apiKeyId).ok) return "budget"
    if (queueLoad.parked !== 0) return "queue"
    if (bridging !== undefined && bridging(call)) return "bridge"
    const cache = cacheWanted(call)
    if (cache === undefined || cache === "look") return cache === undefined ? "cold" : "cache"
    const known = peekPlan(call, sessionId)
    if (known === undefined || known._tag === "Left") return "plan"
    const plan = known.right
    // A level's allowed models refuse it: the pipeline answers the 403.
    if (accounting.modelRefusal(ctx.apiKeyId, call.model, candidatesFor(plan)) !== undefined) return "plan"
    if (plan.fusion !== undefined || (plan.kind !== "direct" && plan.kind !== "combo")) return "plan_kind"
    const candidate = plan.candidates[0]
    if (candidate === undefined || !canAttemptNow(call, candidate)) return "target"
    return { plan, candidate, cache }
  }

  /** The rest of a committed request as the pipeline's Effect; the usage row is then the pipeline's own hook unless `hooked` attached it. */
  const handOff = (
    call: InferenceCall,
    track: Tracking,
    hooked: boolean,
    ends: CommonPathEnds,
    rest: Effect.Effect<unknown, InferenceError>
  ): void => {
    if (!hooked) attachUsageRow(usage, accounting, call, track)
    ends.handoff(Effect.asVoid(rest))
  }

  /**
   * Serves `call` on the common path when the rule takes it: answers the refusal (nothing done:
   * run the request through the pipeline), or undefined when it took it (`ends` is called once).
   */
  const runNow = (call: InferenceCall, ends: CommonPathEnds): CommonPathRefusal | undefined => {
    const { ctx } = call
    const sessionId = explicitSession(ctx.req, call.body)
    // Named before the plan: without a session id, the plan keeps the conversation where its cache is warm.
    const session = sessionId ?? conversationOf(ctx, call.model, call.body)
    const decided = decide(call, sessionId)
    if (typeof decided === "string") return decided
    const { plan, candidate, cache } = decided

    // Committed: what the pipeline's run and serve do before the dispatch, in the same order.
    writeAhead(call)
    ctx.responseHeaders["x-gateway-session-id"] = session
    const track: Tracking = newTracking(call.model)
    track.hold = accounting.reserve(ctx.apiKeyId)
    // The cache is on and the request not cacheable: the lookup's only trace is its header.
    if (cache === "miss") ctx.responseHeaders["x-gateway-cache"] = "MISS"
    // Handlers on the request's end read its usage row from their event: then the row is the
    // pipeline's own hook (written by `endRequest`), else plain data at the end.
    const hooked = ctx.hooks !== undefined && (ctx.hooks.onResponse.length !== 0 || ctx.hooks.onError.length !== 0)
    if (hooked) attachUsageRow(usage, accounting, call, track)
    // onModelSelect handlers (context compression, plugins): run at once; one that changes the
    // body, blocks or needs an effect hands the rest to the pipeline with what they decided.
    if (ctx.hooks !== undefined && ctx.hooks.onModelSelect.length !== 0) {
      const fired = modelSelectNow(ctx, call.format, call.model, plan, call.body, call.endpoint)
      if (!modelSelectLeftAlone(fired)) {
        handOff(
          call,
          track,
          hooked,
          ends,
          Effect.flatMap(settleModelSelect(ctx, call.format, fired), (body) => {
            const c = body ? { ...call, body } : call
            return waited(c, plan, track, sessionId, execute(c, plan, track))
          })
        )
        return undefined
      }
    }
    const d = guarded.startDispatch(call, plan, track, attempt)

    // The dispatch's first candidate: its admission and token limit, as `dispatch` checks them.
    const at = now()
    const limit = accounting.tokenLimit(ctx.apiKeyId, limitTargetOf(candidate, call.model), track.hold)
    if (!resilience.admission(candidate, at).ok || !limit.ok) {
      handOff(call, track, hooked, ends, waited(call, plan, track, sessionId, guarded.dispatchFrom(d, 0)))
      return undefined
    }
    const begun = guarded.beginAttempt(d, candidate, at)
    if (begun === "busy") {
      handOff(call, track, hooked, ends, waited(call, plan, track, sessionId, guarded.dispatchFrom(d, 0)))
      return undefined
    }
    attemptNow(call, candidate, begun.probe ? PROBE : NO_PROBE, (result) => {
      begun.end()
      if (result._tag === "served" && result.outcome.streamFailure === undefined) {
        guarded.servedNow(d, candidate, begun, result.outcome, Date.now())
        // A combo's routing memory (last good, sticky session, combo.switched); a direct plan keeps none.
        servedNow(plan, candidate)
        if (hooked || recordRequestNow(usage, accounting, call, track)) return ends.done()
        return handOff(call, track, hooked, ends, Effect.void)
      }
      // The client went away before its answer was whole (the pipeline's fiber is interrupted
      // then, whatever the upstream does after): settled as an interrupted attempt, a 499.
      const gone = result._tag === "gone" || (ctx.res.closed && !ctx.res.writableFinished)
      handOff(
        call,
        track,
        hooked,
        ends,
        gone
          ? Effect.uninterruptible(guarded.continueAfter(d, 0, begun, Exit.interrupt(FiberId.none)))
          : waited(call, plan, track, sessionId, guarded.continueAfter(d, 0, begun, exitOf(result)))
      )
    })
    return undefined
  }

  return { runNow, decide }
}

/** An attempt's options, one object each rather than one per request. */
const PROBE = { probe: true } as const
const NO_PROBE = { probe: false } as const

/** An attempt's result as the Exit the pipeline's attempt would have ended with. */
const exitOf = (result: AttemptResult): Exit.Exit<AttemptOutcome, AttemptFailed> =>
  result._tag === "served"
    ? Exit.succeed(result.outcome)
    : result._tag === "failed"
      ? Exit.fail(result.failed)
      : result._tag === "gone"
        ? Exit.interrupt(FiberId.none)
        : Exit.die(result.defect)
