import { makeStructured } from "./structuredAnswers.js"
import * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Duration from "effect/Duration"
import * as Schedule from "effect/Schedule"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Layer from "effect/Layer"
import { type CanonicalRequest, type CanonicalResponse } from "../domain/canonical.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { Connections } from "../upstream/providers/Connections.js"
import { OAuth } from "../services/oauth/OAuth.js"
import { UpstreamHttp } from "../upstream/client/UpstreamHttp.js"
import { InFlight } from "../services/usage/InFlight.js"
import { Usage as UsageService } from "../services/usage/Usage.js"
import { Accounting } from "../services/accounting/Accounting.js"
import { AccountingConfig } from "../services/accounting/AccountingConfig.js"
import type { BudgetCheck } from "../services/accounting/Budgets.js"
import { formatCost } from "../services/accounting/cost.js"
import { ResponseCache } from "../services/accounting/ResponseCache.js"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { ConnectionSlots } from "../services/resilience/ConnectionSlots.js"
import { Resilience } from "../services/resilience/Resilience.js"
import { ResilienceConfig } from "../services/resilience/ResilienceConfig.js"
import type { RoutePlan } from "../services/routing/plan.js"
import { requestFeatures } from "../services/routing/auto/features.js"
import { type RouteError, Router } from "../services/routing/Router.js"
import { RoutingMemory } from "../services/routing/RoutingMemory.js"
import type { Candidate, RequestFeatures } from "../services/routing/types.js"
import { costHeaders, encodeWhole, replayWhole, sendWhole } from "./answers.js"
import { allBlocked, type AttemptOutcome, type Tracking } from "../kernel/attempts.js"
import { attachCacheEntry, attachUsageRow } from "./builtinHooks.js"
import { makeCacheLookup } from "./cacheLookup.js"
import type { ExtraTokens, InferenceCall, InferenceShape } from "./call.js"
import { makeGuardedAttempt } from "./fallback.js"
import { clientError, type InferenceError } from "../kernel/errors.js"
import { makeFusion } from "./fusion.js"
import { quotaExhausted, requestReceived, routeResolved } from "../kernel/hooks.js"
import { Guardrails } from "../services/guardrails/Guardrails.js"
import { committed, openProgress, type HttpRequestContext, requestHeader } from "./io.js"
import { encodeFor, makeSending } from "./sending.js"
import { derivedSession, explicitSession } from "./session.js"
import { StreamWatchdog } from "./stream.js"
import { StreamTimeouts } from "./timeouts.js"
import { asksWhole } from "./nonStreamed.js"
import { makeAttempt } from "./attempt.js"
import { makeCommonPath } from "./commonPath.js"
import { Egress } from "../upstream/egress/Egress.js"

/** Features of a request that could not be decoded: the router still needs something. */
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

const NO_FEATURES = (sessionId: string | undefined): RequestFeatures => ({
  tokenEstimate: 0,
  maxOutputTokens: undefined,
  hasTools: false,
  hasImages: false,
  wantsReasoning: false,
  taskType: "chat",
  specificity: 0,
  sessionId
})

/**
 * The inference pipeline, one path for every inbound format. The router turns the model id into
 * an ordered list of candidates (connection + model); each attempt passes the body through
 * (normalised) when the upstream speaks the client's format, or decodes it into the canonical
 * form and encodes it for the upstream, then translates the answer back, streams event by
 * event. A retryable failure before anything reached the client falls back to the next
 * candidate; the resilience layer hears of every success and failure; one usage row is written
 * per request.
 */
export class Inference extends Context.Tag("gateway/Inference")<Inference, InferenceShape>() {
  static readonly layer = Layer.effect(
    Inference,
    Effect.gen(function* () {
      const connections = yield* Connections
      const http = yield* UpstreamHttp
      const usage = yield* UsageService
      const timeouts = yield* StreamTimeouts
      const inflight = yield* InFlight
      const writeAhead = (ctx: HttpRequestContext, endpoint: string) => {
        ctx.endpoint = endpoint
        inflight.begin({ requestId: ctx.requestId, startedAt: ctx.startedAt, endpoint, apiKeyId: ctx.apiKeyId })
        return () => inflight.end(ctx.requestId)
      }
      const watchdog = yield* StreamWatchdog
      const router = yield* Router
      const resilience = yield* Resilience
      const memory = yield* RoutingMemory
      const accounting = yield* Accounting
      const accountingConfig = yield* AccountingConfig
      const cache = yield* ResponseCache
      const flags = yield* FeatureFlags
      const guardrails = yield* Guardrails
      const resilienceConfig = yield* ResilienceConfig
      const slots = yield* ConnectionSlots
      // The resilience state keeps the Clock's time (a TestClock in tests); read synchronously.
      const clock = yield* Effect.clock
      const now = () => clock.unsafeCurrentTimeMillis()
      // Log annotations cost effects on every attempt: only when info lines are written at all.
      const infoOn = LogLevel.lessThanEqual(yield* FiberRef.get(FiberRef.currentMinimumLogLevel), LogLevel.Info)

      const routeError = (format: WireFormat) => (e: RouteError) =>
        clientError(format, { status: e.status, kind: e.status === 404 ? "not_found" : "invalid_request", message: e.message, code: e.code, param: "model" })

      /** `sessionId`: the client's own session id (X-Session-Id or the body's), read once per request. */
      const planInputOf = (input: { features?: () => RequestFeatures; ctx?: HttpRequestContext; sessionId?: string | undefined }) => {
        const { ctx, sessionId } = input
        return {
          features: input.features ?? (() => NO_FEATURES(sessionId)),
          ...(ctx ? { mode: requestHeader(ctx, "x-gateway-mode"), budget: requestHeader(ctx, "x-gateway-budget") } : {}),
          ...(sessionId ? { sessionId, apiKeyId: ctx?.apiKeyId } : {})
        }
      }

      const planFor = (
        model: string,
        format: WireFormat,
        input: { features?: () => RequestFeatures; ctx?: HttpRequestContext; sessionId?: string | undefined } = {}
      ): Effect.Effect<RoutePlan, InferenceError> => {
        const planInput = planInputOf(input)
        const known = router.peekPlan(model, planInput)
        if (known !== undefined) return Either.mapLeft(known, routeError(format))
        return Effect.mapError(router.plan(model, planInput), routeError(format))
      }

      const resolve: InferenceShape["resolve"] = (model, format) =>
        Effect.flatMap(planFor(model, format), (plan) => {
          const first = plan.candidates[0] ?? plan.fusion?.judge ?? plan.blocked[0]?.candidate
          return first ? Effect.succeed({ connection: first.connection, model: first.model }) : Effect.fail(allBlocked(format, plan))
        })

      const oauth = yield* Effect.serviceOption(OAuth)
      const egress = yield* Effect.serviceOption(Egress)
      const sending = makeSending({
        connections,
        http,
        timeouts,
        credentials: Option.isSome(oauth) ? oauth.value.fresh : undefined,
        renew: Option.isSome(oauth) ? oauth.value.renew : undefined,
        egress: Option.getOrUndefined(egress)
      })
      const { send, readFailure, wholeText } = sending
      const { conform } = makeStructured({ send, wholeText, encodeFor, cost: accounting.cost })

      /** Whether a non-streamed call is asked of `candidate` whole (src/inference/nonStreamed.ts). */
      const askWhole = (call: InferenceCall, candidate: Candidate): boolean => {
        const connection = candidate.connection
        const mode = connection.timeouts?.nonStreamed
        if (mode === "whole") return true
        const pace = mode === "stream" ? undefined : memory.outputPace(candidate.key)
        if (pace === undefined) return false
        let request: CanonicalRequest | undefined
        try {
          request = (call.decode ?? call.format.decodeRequest)(call.body)
        } catch {
          return false
        }
        return asksWhole({ mode, request, spec: candidate.spec, pace, headersTimeoutMs: connection.timeouts?.headersMs ?? timeouts.headersMs })
      }

      const { attempt, attemptNow, canAttemptNow } = makeAttempt({ sending, conform, accounting, timeouts, watchdog, askWhole })

      const guarding = makeGuardedAttempt({ resilience, accounting, memory, router, slots, now, infoOn })
      const { guarded } = guarding
      /** Chat, messages, responses, generate: the guarded attempt with the pipeline's own try. */
      const execute = (call: InferenceCall, plan: RoutePlan, track: Tracking): Effect.Effect<AttemptOutcome, InferenceError> => guarded(call, plan, track, attempt)

      /** Answers the client with a whole canonical response (replayed as events when it asked for a stream). */
      const respondWith = (call: InferenceCall, decoded: CanonicalResponse, served: { readonly candidate: Candidate; readonly costUsd: number; readonly tokens: ExtraTokens }) =>
        Effect.sync(() => {
          if (call.stream) return replayWhole(call, decoded)
          Object.assign(
            call.ctx.responseHeaders,
            costHeaders(call.ctx, served.candidate.connection.provider.id, served.candidate.model, undefined, served.costUsd, false, served.tokens)
          )
          sendWhole(call, JSON.stringify(encodeWhole(call, decoded)))
        })

      const { fuse } = makeFusion({ accounting, guarded, send, readFailure, wholeText, encodeFor, respondWith, execute })

      const { lookup, wanted: cacheWanted } = makeCacheLookup({ flags, cache, accounting, accountingConfig, inference: () => self })

      // The common request without a fiber (src/inference/commonPath.ts, docs/ARCHITECTURE.md).
      const { runNow } = makeCommonPath({
        flags,
        accounting,
        guardrails,
        resilience,
        usage,
        guarded: guarding,
        writeAhead: (call) => void writeAhead(call.ctx, call.endpoint),
        cacheWanted,
        peekPlan: (call, sessionId) => {
          let features: RequestFeatures | undefined
          const input = planInputOf({
            ctx: call.ctx,
            sessionId,
            features: () => {
              if (features === undefined) {
                try {
                  features = requestFeatures((call.decode ?? call.format.decodeRequest)(call.body), sessionId)
                } catch {
                  features = NO_FEATURES(sessionId)
                }
              }
              return features
            }
          })
          return router.peekPlan(call.model, input)
        },
        attempt,
        execute: (call, plan, track) => execute(call, plan, track),
        attemptNow,
        canAttemptNow,
        servedNow: router.servedNow,
        now
      })

      /** A hook blocked the request: its usage row says so. */
      const refused = (track: Tracking, e: InferenceError) => Effect.sync(() => (track.outcome = { status: e.status, usage: undefined, ttftMs: null, error: e.message }))

      // The request's serving, after its usage row is attached: created once (docs/performance.md,
      // "Generator functions on the request path").
      const serve = Effect.fnUntraced(function* (call: InferenceCall, s: Serving) {
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
          const spent = `the ${budget.window} budget of this API key is spent ($${budget.spentUsd.toFixed(4)} of $${budget.limitUsd.toFixed(4)})`
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
                  message: `${spent}; it resets in ${retryAfter} s${(yield* flags.enabled("GATEWAY_EMERGENCY_FALLBACK")) ? " (no free fallback model is connected; set GATEWAY_EMERGENCY_FALLBACK_MODEL)" : ""}`
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
        if (wantsProgress && routed.stream && client.framing === "sse" && !routed.jsonArrayStream && !ctx.res.headersSent) openProgress(ctx, client.streamContentType)

        // Response cache (non-streamed, deterministic requests only).
        // The usual case (streamed, or the cache off) does not enter the lookup.
        const cached = routed.stream ? undefined : yield* lookup(routed)
        if (cached) ctx.responseHeaders["x-gateway-cache"] = cached.hit ? "HIT" : "MISS"
        if (cached?.hit) {
          const hit = cached.hit
          track.cacheHit = true
          track.outcome = { status: 200, usage: hit.usage ?? undefined, ttftMs: null, error: null }
          track.cachedProvider = hit.provider
          Object.assign(ctx.responseHeaders, costHeaders(ctx, hit.provider ?? "cache", hit.servedModel ?? hit.model, hit.usage ?? undefined, 0, true), {
            "x-gateway-cost-saved": formatCost(hit.costUsd)
          })
          // `routed` captures nothing: a hit is not stored again.
          sendWhole(routed, hit.body)
          return
        }
        // A miss is kept by the response cache's hook when the answer is a whole 200.
        if (cached?.key) attachCacheEntry(cache, accounting, routed, track, { ...cached, key: cached.key })
        let served = routed

        const first = yield* planFor(served.model, client, { features, ctx, sessionId })
        ctx.progress?.emit("routed", { route: first.kind, strategy: first.strategy, candidates: first.candidates.map((c) => c.key) })
        const hooks = ctx.hooks!
        if (hooks.onModelSelect.length !== 0 || (hooks.onComboResolve.length !== 0 && first.kind !== "direct")) {
          const body = yield* Effect.tapError(routeResolved(ctx, client, served.model, first, served.body, served.endpoint), (e) => refused(track, e))
          if (body) served = { ...served, body }
        }
        if (first.fusion) yield* fuse(served, first, first.fusion, track)
        else if (first.kind !== "quota-share") yield* execute(served, first, track)
        else {
          // Quota share: a 429 for a short transient cooldown is waited out (cooldownWaits) and the
          // request planned and dispatched again.
          let plan = first
          let attempts = 0
          const attempt = Effect.suspend(() => (attempts++ === 0 ? Effect.succeed(first) : planFor(served.model, client, { features, ctx, sessionId }))).pipe(
            Effect.flatMap((next) => execute(served, (plan = next), track))
          )
          yield* Effect.retry(
            attempt,
            cooldownWaits(() => plan, ctx)
          )
        }
      })

      /**
       * When a quota-share combo's failure is waited out: a 429 while some candidate is in a
       * cooldown of known end (and its quota not exhausted), at most `maxAttempts` times, each
       * wait at most `maxWaitMs` and all of them within `budgetMs`; anything else ends it with
       * that failure. The wait is read from the resilience state, not by planning again (that
       * would charge the quota-share deficits twice).
       */
      const cooldownWaits = (latest: () => RoutePlan, ctx: HttpRequestContext) => {
        const settings = resilienceConfig.current().comboCooldownWait
        let waited = 0
        const waitFor = (e: InferenceError): number | undefined => {
          if (!settings.enabled || committed(ctx) || e.status !== 429) return undefined
          const plan = latest()
          const at = now()
          let wait: number | undefined
          for (const c of [...plan.candidates, ...plan.blocked.map((b) => b.candidate)]) {
            const a = resilience.admission(c, at)
            if (a.ok) wait = 0
            else if (a.reason === "cooldown" && a.retryAfterMs !== null && memory.quota(c.connection.id, c.model, at)?.exhausted !== true) {
              wait = Math.min(wait ?? Number.POSITIVE_INFINITY, a.retryAfterMs)
            }
          }
          return wait
        }
        return Schedule.identity<InferenceError>().pipe(
          Schedule.map(waitFor),
          Schedule.whileOutput((wait) => wait !== undefined && wait <= settings.maxWaitMs && waited + wait <= settings.budgetMs),
          Schedule.intersect(Schedule.recurs(settings.maxAttempts)),
          Schedule.modifyDelayEffect(([wait, n]) => {
            waited += wait!
            ctx.progress?.emit("waiting", { ms: wait!, reason: "cooldown" })
            return Effect.as(
              Effect.logInfo(`quota share ${latest().scope}: waiting ${wait} ms for a cooldown to end (wait ${n + 1} of ${settings.maxAttempts})`),
              Duration.millis(wait! + 5)
            )
          })
        )
      }

      const run = (call: InferenceCall) =>
        Effect.suspend(() => {
          const { ctx, format: client } = call
          writeAhead(ctx, call.endpoint)
          const sessionId = explicitSession(ctx.req, call.body)
          ctx.responseHeaders["x-gateway-session-id"] = sessionId ?? derivedSession(ctx.apiKeyId, call.model, call.body)
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

      const self: InferenceShape = { run, runNow, resolve, plan: (model, format) => planFor(model, format), guarded, send, readFailure, wholeText, track: writeAhead }

      return self
    })
  )
}
