import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type { CanonicalRequest } from "../domain/canonical.js"
import { Connections } from "../upstream/providers/Connections.js"
import { OAuth } from "../services/oauth/OAuth.js"
import { UpstreamHttp } from "../upstream/client/UpstreamHttp.js"
import { InFlight, type InFlightShape } from "../services/usage/InFlight.js"
import { Usage as UsageService } from "../services/usage/Usage.js"
import { Accounting } from "../services/accounting/Accounting.js"
import { AccountingConfig } from "../services/accounting/AccountingConfig.js"
import { ResponseCache } from "../services/accounting/ResponseCache.js"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { ConnectionSlots } from "../services/resilience/ConnectionSlots.js"
import { Resilience } from "../services/resilience/Resilience.js"
import { ResilienceConfig } from "../services/resilience/ResilienceConfig.js"
import { makeQuotaQueue, QuotaQueue } from "../services/resilience/QuotaQueue.js"
import { ApiKeys } from "../services/auth/ApiKeys.js"
import { Combos } from "../services/routing/Combos.js"
import { requestFeatures } from "../services/routing/auto/features.js"
import type { RoutePlan } from "../services/routing/plan.js"
import { Router } from "../services/routing/Router.js"
import { RoutingMemory, type RoutingMemoryShape } from "../services/routing/RoutingMemory.js"
import type { Candidate } from "../services/routing/types.js"
import { Guardrails } from "../services/guardrails/Guardrails.js"
import { Egress } from "../upstream/egress/Egress.js"
import type { AttemptOutcome, Tracking } from "../kernel/attempts.js"
import type { InferenceError } from "../kernel/errors.js"
import { costHeaders, encodeWhole, replayWhole, sendWhole } from "./answers.js"
import { makeAttempt } from "./attempt.js"
import { Bridges } from "./bridge/Bridges.js"
import { makeCacheLookup } from "./cacheLookup.js"
import type { InferenceCall, InferenceShape } from "./call.js"
import { makeCommonPath } from "./commonPath.js"
import { makeGuardedAttempt } from "./fallback.js"
import { type FusionDeps, makeFusion } from "./fusion.js"
import type { HttpRequestContext } from "./io.js"
import { asksWhole } from "./nonStreamed.js"
import { makePlanning, NO_FEATURES } from "./planning.js"
import { encodeFor, makeSending } from "./sending.js"
import { makeQuotaWait } from "./quotaWait.js"
import { makeCooldownWaits, makeRun, makeServe } from "./serving.js"
import { StreamWatchdog } from "./stream.js"
import { makeStructured } from "./structuredAnswers.js"
import { StreamTimeouts, type StreamTimeoutsShape } from "./StreamTimeouts.js"

/**
 * The request will write a usage row for `endpoint`: written ahead while it runs, so a crash does
 * not lose it (InFlight); answers the function that ends it.
 */
const makeWriteAhead = (inflight: InFlightShape) => (ctx: HttpRequestContext, endpoint: string) => {
  ctx.endpoint = endpoint
  inflight.begin({ requestId: ctx.requestId, startedAt: ctx.startedAt, endpoint, apiKeyId: ctx.apiKeyId })
  return () => inflight.end(ctx.requestId)
}

/** Whether a non-streamed call is asked of `candidate` whole (src/inference/nonStreamed.ts). */
const makeAskWhole =
  ({ memory, timeouts }: { readonly memory: RoutingMemoryShape; readonly timeouts: StreamTimeoutsShape }) =>
  (call: InferenceCall, candidate: Candidate): boolean => {
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

/** Answers the client with a whole canonical response (replayed as events when it asked for a stream). */
const respondWith: FusionDeps["respondWith"] = (call, decoded, served) =>
  Effect.sync(() => {
    if (call.stream) return replayWhole(call, decoded)
    const { candidate, costUsd, tokens } = served
    Object.assign(
      call.ctx.responseHeaders,
      costHeaders(call.ctx, candidate.connection.provider.id, candidate.model, undefined, costUsd, false, tokens)
    )
    sendWhole(call, JSON.stringify(encodeWhole(call, decoded)))
  })

/**
 * The inference pipeline, one path for every inbound format: candidates tried in order, each answer
 * translated back (docs/ARCHITECTURE.md, "The life of one chat request"). The layer wires the parts.
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
      const oauth = yield* Effect.serviceOption(OAuth)
      const egress = yield* Effect.serviceOption(Egress)
      const keys = Option.getOrUndefined(yield* Effect.serviceOption(ApiKeys))
      const combos = Option.getOrUndefined(yield* Effect.serviceOption(Combos))
      const bridges = Option.getOrUndefined(yield* Effect.serviceOption(Bridges))
      // The resilience state keeps the Clock's time (a TestClock in tests); read synchronously.
      const clock = yield* Effect.clock
      const now = () => clock.unsafeCurrentTimeMillis()
      // Log annotations cost effects on every attempt: only when info lines are written at all.
      const infoOn = LogLevel.lessThanEqual(yield* FiberRef.get(FiberRef.currentMinimumLogLevel), LogLevel.Info)

      const writeAhead = makeWriteAhead(inflight)
      const { planFor, resolve, peekPlan } = makePlanning({ router })
      /** A call planned again (after a wait in the quota queue), its features decoded when routing asks. */
      const replan = (call: InferenceCall, sessionId: string | undefined) =>
        Effect.suspend(() => {
          let features: ReturnType<typeof NO_FEATURES> | undefined
          return planFor(call.model, call.format, {
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
        })
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
      const askWhole = makeAskWhole({ memory, timeouts })
      const { attempt, attemptNow, canAttemptNow } = makeAttempt({ sending, conform, accounting, timeouts, watchdog, askWhole })

      const guarding = makeGuardedAttempt({ resilience, accounting, memory, router, slots, now, infoOn })
      const { guarded } = guarding
      /** Chat, messages, responses, generate: the guarded attempt with the pipeline's own try. */
      const execute = (call: InferenceCall, plan: RoutePlan, track: Tracking): Effect.Effect<AttemptOutcome, InferenceError> =>
        bridges === undefined || !bridges.on()
          ? guarded(call, plan, track, attempt)
          : // A request with parts some target cannot take (docs/bridge.md): native targets first, the others bridged.
            Effect.flatMap(bridges.prepare(call, plan, attempt), (b) =>
              b === undefined ? guarded(call, plan, track, attempt) : guarded(call, b.plan, track, b.attempt)
            )
      const { fuse } = makeFusion({ accounting, guarded, send, readFailure, wholeText, encodeFor, respondWith, execute })
      // Waiting out a quota (src/inference/quotaWait.ts): the queue, and each request's allowed wait from its key and its combo.
      const queue = Option.getOrElse(yield* Effect.serviceOption(QuotaQueue), () =>
        makeQuotaQueue(() => resilienceConfig.current().quotaQueue.maxParked, now)
      )
      const quotaWait = makeQuotaWait({
        queue,
        resilience,
        memory,
        keyWait: (id) => (keys === undefined ? Effect.succeed(null) : Effect.map(keys.byId(id), (k) => k?.maxQueueWaitSeconds ?? null)),
        comboWait: (name) =>
          combos === undefined ? Effect.succeed(null) : Effect.map(combos.byName(name), (c) => c?.config.maxQueueWaitSeconds ?? null),
        now
      })
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
        peekPlan,
        attempt,
        execute: (call, plan, track) => execute(call, plan, track),
        attemptNow,
        canAttemptNow,
        servedNow: router.servedNow,
        queueLoad: queue.load,
        waited: (call, plan, track, sessionId, first) =>
          quotaWait.afterFailure(call, plan, first, { run: (p) => execute(call, p, track), replan: replan(call, sessionId) }),
        bridging: bridges?.wants,
        now
      })

      // A request's serving and run (src/inference/serving.ts).
      const cooldownWaits = makeCooldownWaits({ resilienceConfig, resilience, memory, now })
      const serve = makeServe({ guardrails, accounting, flags, cache, lookup, planFor, fuse, execute, cooldownWaits, quotaWait })
      const run = makeRun({ usage, accounting, writeAhead, serve })

      const self: InferenceShape = {
        run,
        runNow,
        resolve,
        plan: (model, format) => planFor(model, format),
        guarded,
        send,
        readFailure,
        wholeText,
        track: writeAhead
      }
      return self
    })
  )
}
