/**
 * One request through the pipeline: `run` (the write-ahead, its session, its tracking and usage
 * row) then `serve` (guardrails, onRequest, the budget, the response cache, the plan and its
 * dispatch: a fusion panel, the guarded attempt, or quota share's waits for a cooldown to end).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { BudgetCheck } from "../services/accounting/Budgets.js"
import { formatCost } from "../services/accounting/cost.js"
import type { ResponseCacheShape } from "../services/accounting/ResponseCache.js"
import type { FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import type { GuardrailsShape } from "../services/guardrails/Guardrails.js"
import type { ResilienceShape } from "../services/resilience/Resilience.js"
import type { ResilienceConfigShape } from "../services/resilience/ResilienceConfig.js"
import type { RoutePlan } from "../services/routing/plan.js"
import { requestFeatures } from "../services/routing/auto/features.js"
import type { RoutingMemoryShape } from "../services/routing/RoutingMemory.js"
import type { RequestFeatures } from "../services/routing/types.js"
import type { UsageShape } from "../services/usage/Usage.js"
import { costHeaders, sendWhole } from "./answers.js"
import type { AttemptOutcome, Tracking } from "../kernel/attempts.js"
import { attachCacheEntry, attachUsageRow } from "./builtinHooks.js"
import type { makeCacheLookup } from "./cacheLookup.js"
import type { InferenceCall } from "./call.js"
import { clientError, type InferenceError } from "../kernel/errors.js"
import type { makeFusion } from "./fusion.js"
import { quotaExhausted, requestReceived, routeResolved } from "../kernel/hooks.js"
import { committed, openProgress, type HttpRequestContext, requestHeader } from "./io.js"
import { NO_FEATURES, type makePlanning } from "./planning.js"
import { planResetAt, type QuotaWait } from "./quotaWait.js"
import { conversationOf, explicitSession } from "./session.js"

/** What one request's serving reads and changes. */
interface Serving {
  /** The call as the request's hooks left it (onRequest may replace its body). */
  current: InferenceCall
  readonly track: Tracking
  /** The request's features, decoded from `current` once, when routing first asks. */
  readonly features: () => RequestFeatures
  /** The client's own session id (X-Session-Id or the body's). */
  readonly sessionId: string | undefined
  readonly wantsProgress: boolean
}

/** A hook blocked the request: its usage row says so. */
const refused = (track: Tracking, e: InferenceError) =>
  Effect.sync(() => (track.outcome = { status: e.status, usage: undefined, ttftMs: null, error: e.message }))

export interface CooldownWaitsDeps {
  readonly resilienceConfig: ResilienceConfigShape
  readonly resilience: ResilienceShape
  readonly memory: RoutingMemoryShape
  /** The time the resilience state is kept in (the Clock's). */
  readonly now: () => number
}

/**
 * When a quota-share combo's failure is waited out: a 429 while some candidate is in a
 * cooldown of known end (and its quota not exhausted), at most `maxAttempts` times, each
 * wait at most `maxWaitMs` and all of them within `budgetMs`; anything else ends it with
 * that failure. The wait is read from the resilience state, not by planning again (that
 * would charge the quota-share deficits twice).
 */
export const makeCooldownWaits =
  ({ resilienceConfig, resilience, memory, now }: CooldownWaitsDeps) =>
  (latest: () => RoutePlan, ctx: HttpRequestContext) => {
    const settings = resilienceConfig.current().comboCooldownWait
    let waited = 0
    const waitFor = (e: InferenceError): number | undefined => {
      if (!settings.enabled || committed(ctx) || e.status !== 429) return undefined
      const at = now()
      // Cooldowns only: a quota used up is the quota queue's to wait out (src/inference/quotaWait.ts), when the request may.
      const ready = planResetAt({ resilience, memory }, latest(), at, false)
      return ready === undefined ? undefined : ready - at
    }
    return Schedule.identity<InferenceError>().pipe(
      Schedule.map(waitFor),
      Schedule.whileOutput((wait) => wait !== undefined && wait <= settings.maxWaitMs && waited + wait <= settings.budgetMs),
      Schedule.intersect(Schedule.recurs(settings.maxAttempts)),
      Schedule.modifyDelayEffect(([wait, n]) => {
        waited += wait!
        ctx.progress?.emit("waiting", { ms: wait!, reason: "cooldown" })
        return Effect.as(
          Effect.logInfo(
            `quota share ${latest().scope}: waiting ${wait} ms for a cooldown to end (wait ${n + 1} of ${settings.maxAttempts})`
          ),
          Duration.millis(wait! + 5)
        )
      })
    )
  }

export interface ServeDeps {
  readonly guardrails: GuardrailsShape
  readonly accounting: AccountingShape
  readonly flags: FeatureFlagsShape
  readonly cache: ResponseCacheShape
  /** The response cache's lookup (src/inference/cacheLookup.ts). */
  readonly lookup: ReturnType<typeof makeCacheLookup>["lookup"]
  readonly planFor: ReturnType<typeof makePlanning>["planFor"]
  /** A fusion plan's panel and judge (src/inference/fusion.ts). */
  readonly fuse: ReturnType<typeof makeFusion>["fuse"]
  /** The guarded attempt with the pipeline's own try. */
  readonly execute: (call: InferenceCall, plan: RoutePlan, track: Tracking) => Effect.Effect<AttemptOutcome, InferenceError>
  readonly cooldownWaits: ReturnType<typeof makeCooldownWaits>
  /** Waiting out a quota: the dispatch parked until a reset when the request may wait (src/inference/quotaWait.ts). */
  readonly quotaWait: QuotaWait
}

/**
 * The request's serving, after its usage row is attached: made once, with the layer
 * (docs/performance.md, "Generator functions on the request path").
 */
export const makeServe = ({ guardrails, accounting, flags, cache, lookup, planFor, fuse, execute, cooldownWaits, quotaWait }: ServeDeps) =>
  Effect.fnUntraced(function* (call: InferenceCall, s: Serving) {
    const { ctx, format: client } = call
    const { track, features, sessionId, wantsProgress } = s
    // The guardrails' hook, when any of their flags is on (src/guardrails).
    const guard = guardrails.attach(ctx)
    if (guard) yield* guard
    if (ctx.hooks!.onRequest.length !== 0) {
      const body = yield* Effect.tapError(requestReceived(ctx, client, s.current), (e) => refused(track, e))
      if (body) s.current = { ...s.current, body }
    }
    // Budget: a spent window sends the request to the free fallback model, or refuses it.
    // Several processes (Redis): the check and the hold are one atomic step across them.
    let budget: BudgetCheck
    if (accounting.exact) {
      const admitted = yield* accounting.admit(ctx.apiKeyId)
      track.hold = admitted.hold
      budget = admitted.budget
    } else budget = accounting.budget(ctx.apiKeyId)
    let routed = s.current
    if (!budget.ok) {
      const retryAfter = String(Math.max(1, Math.ceil(budget.retryAfterMs / 1000)))
      const emergency = (yield* flags.enabled("GATEWAY_EMERGENCY_FALLBACK")) ? yield* accounting.emergencyModel : undefined
      const spent = `the ${budget.window} budget of ${budget.subject} is spent ($${budget.spentUsd.toFixed(4)} of $${budget.limitUsd.toFixed(4)})`
      if (ctx.hooks!.onQuotaExhaust.length !== 0) {
        const fired = quotaExhausted(ctx, {
          kind: "budget",
          window: budget.window,
          spentUsd: budget.spentUsd,
          limitUsd: budget.limitUsd,
          retryAfterMs: budget.retryAfterMs,
          action: emergency ? "emergency_fallback" : "refused",
          fallbackModel: emergency ?? null,
          message: spent
        })
        if (fired) yield* fired
      }
      if (!emergency) {
        track.outcome = { status: 429, usage: undefined, ttftMs: null, error: spent }
        return yield* Effect.fail(
          clientError(
            client,
            {
              status: 429,
              kind: "rate_limit",
              code: "budget_exhausted",
              message: `${spent}; it resets in ${retryAfter} s${(yield* flags.enabled("GATEWAY_EMERGENCY_FALLBACK")) ? " (no free fallback model is connected; set GATEWAY_EMERGENCY_FALLBACK_MODEL)" : ""}`,
              level: budget.level
            },
            { "retry-after": retryAfter }
          )
        )
      }
      yield* Effect.logInfo(`${spent}: emergency fallback to ${emergency}`)
      ctx.responseHeaders["x-gateway-emergency-fallback"] = emergency
      routed = { ...s.current, model: emergency }
      track.model = emergency
    }

    if (!accounting.exact) track.hold = accounting.reserve(ctx.apiKeyId)

    // Progress events need the answer open early: SSE streams only (NDJSON and JSON arrays have no comments).
    if (wantsProgress && routed.stream && client.framing === "sse" && !routed.jsonArrayStream && !ctx.res.headersSent)
      openProgress(ctx, client.streamContentType)

    // Response cache (non-streamed, deterministic requests only).
    // The usual case (streamed, or the cache off) does not enter the lookup.
    const cached = routed.stream ? undefined : yield* lookup(routed)
    if (cached) ctx.responseHeaders["x-gateway-cache"] = cached.hit ? "HIT" : "MISS"
    if (cached?.hit) {
      const hit = cached.hit
      track.cacheHit = true
      track.outcome = { status: 200, usage: hit.usage ?? undefined, ttftMs: null, error: null }
      track.cachedProvider = hit.provider
      Object.assign(
        ctx.responseHeaders,
        costHeaders(ctx, hit.provider ?? "cache", hit.servedModel ?? hit.model, hit.usage ?? undefined, 0, true),
        {
          "x-gateway-cost-saved": formatCost(hit.costUsd)
        }
      )
      // `routed` captures nothing: a hit is not stored again.
      sendWhole(routed, hit.body)
      return
    }
    // A miss is kept by the response cache's hook when the answer is a whole 200.
    if (cached?.key) attachCacheEntry(cache, accounting, routed, track, { ...cached, key: cached.key })
    let served = routed

    const first = yield* planFor(served.model, client, { features, ctx, sessionId })
    // The models each level (the key, its user, team(s), the organisation) allows.
    const modelRefused = accounting.modelRefusal(ctx.apiKeyId, served.model, () => candidatesOf(first))
    if (modelRefused) {
      const message = `model "${served.model}" is not allowed for ${modelRefused.label} (its models: ${modelRefused.models.join(", ")})`
      track.outcome = { status: 403, usage: undefined, ttftMs: null, error: message }
      return yield* Effect.fail(
        clientError(client, { status: 403, kind: "permission", code: "model_not_allowed", message, level: modelRefused.level })
      )
    }
    ctx.progress?.emit("routed", { route: first.kind, strategy: first.strategy, candidates: first.candidates.map((c) => c.key) })
    const hooks = ctx.hooks!
    if (hooks.onModelSelect.length !== 0 || (hooks.onComboResolve.length !== 0 && first.kind !== "direct")) {
      const body = yield* Effect.tapError(routeResolved(ctx, client, served.model, first, served.body, served.endpoint), (e) =>
        refused(track, e)
      )
      if (body) served = { ...served, body }
    }
    if (first.fusion) yield* fuse(served, first, first.fusion, track)
    else {
      const replan = Effect.suspend(() => planFor(served.model, client, { features, ctx, sessionId }))
      // Quota share: a 429 for a short transient cooldown is waited out (cooldownWaits) and the
      // request planned and dispatched again.
      const quotaShare = (start: RoutePlan) => {
        let plan = start
        let attempts = 0
        const attempt = Effect.suspend(() => (attempts++ === 0 ? Effect.succeed(start) : replan)).pipe(
          Effect.flatMap((next) => execute(served, (plan = next), track))
        )
        return Effect.retry(
          attempt,
          cooldownWaits(() => plan, ctx)
        )
      }
      // A 429 still there after that is waited out in the quota queue, when the request may wait.
      yield* quotaWait.queued(served, first, {
        run: (plan) => (plan.kind === "quota-share" ? quotaShare(plan) : execute(served, plan, track)),
        replan
      })
    }
  })

/** A plan's candidates as the levels' allowed models match them. */
export const candidatesOf = (plan: RoutePlan) =>
  plan.candidates.map((c) => ({ model: c.model, key: c.key, provider: c.connection.provider.id }))

export interface RunDeps {
  readonly usage: UsageShape
  readonly accounting: AccountingShape
  /** The request will write a usage row for its endpoint: written ahead while it runs (InFlight). */
  readonly writeAhead: (ctx: HttpRequestContext, endpoint: string) => () => void
  readonly serve: ReturnType<typeof makeServe>
}

/**
 * `Inference.run`, made once with the layer: the request written ahead, its session named, its
 * tracking and usage row attached (one row per request, whatever happened), then served.
 */
export const makeRun =
  ({ usage, accounting, writeAhead, serve }: RunDeps) =>
  (call: InferenceCall) =>
    Effect.suspend(() => {
      const { ctx, format: client } = call
      writeAhead(ctx, call.endpoint)
      const sessionId = explicitSession(ctx.req, call.body)
      ctx.responseHeaders["x-gateway-session-id"] = sessionId ?? conversationOf(ctx, call.model, call.body)
      const wantsProgress = String(requestHeader(ctx, "x-gateway-progress") ?? "").toLowerCase() === "true"
      if (wantsProgress) ctx.responseHeaders["x-gateway-progress"] = "enabled"
      const track: Tracking = {
        tried: undefined,
        outcome: { status: 0, usage: undefined, ttftMs: null, error: null },
        fallbacks: 0,
        cacheHit: false,
        model: call.model,
        panelCostUsd: 0
      }
      // One usage row per request, whatever happened (a client that left included): the
      // built-in hook on the request's end (the dispatcher ends every request).
      attachUsageRow(usage, accounting, call, track)
      let cached: RequestFeatures | undefined
      const serving: Serving = {
        current: call,
        track,
        sessionId,
        wantsProgress,
        features: () => {
          if (!cached) {
            try {
              cached = requestFeatures((serving.current.decode ?? client.decodeRequest)(serving.current.body), sessionId)
            } catch {
              cached = NO_FEATURES(sessionId)
            }
          }
          return cached
        }
      }
      return accounting.prepared() ? serve(call, serving) : Effect.zipRight(accounting.prepare, serve(call, serving))
    })
