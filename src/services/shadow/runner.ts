/**
 * Shadow traffic's sampling and calls: a sampled request is sent again to each shadow target through the gateway's own
 * routes after the primary's answer has gone out, never changing it, within bounds (docs/shadow.md#what-a-sampled-request-does).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type { ShadowTarget } from "../../domain/shadow.js"
import type { HookRequest, RequestEvent, ResponseEvent } from "../../kernel/hookEvents.js"
import { attach } from "../../kernel/hooks.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { OwnRoutes } from "../../kernel/internalCall.js"
import type { RequestContext } from "../../kernel/request.js"
import { Settings } from "../../platform/settings/Settings.js"
import { followVersion, StoreVersion } from "../../platform/store/StoreVersion.js"
import { ApiKeys } from "../auth/ApiKeys.js"
import { type Combo, Combos } from "../routing/Combos.js"
import { type Baseline, type ExchangeOptions, exchange, type RecordedRequest, SHADOW_HEADER } from "./exchange.js"
import { Shadow } from "./Shadow.js"

export { SHADOW_HEADER } from "./exchange.js"

/** How long a sampled shadow call may wait for a moment without client requests. */
const MAX_WAIT_MS = 10_000

interface Sampled extends RecordedRequest {
  /** The request's query string (known once routed). */
  query: string
  readonly targets: ReadonlyArray<ShadowTarget>
  readonly frames: Array<string>
}

export const ShadowRunner = Layer.scopedDiscard(
  Effect.gen(function* () {
    const shadow = yield* Shadow
    const settings = yield* Settings
    const combos = yield* Combos
    const keys = yield* ApiKeys
    const hooks = yield* RequestHooks
    const own = yield* OwnRoutes
    const runtime = yield* Effect.runtime<never>()
    const fork = Runtime.runFork(runtime)

    /** Sampled requests between their onRequest and their route (then attached to the request). */
    const pending = new Map<string, Sampled>()
    let inFlight = 0
    /** Sampled shadow calls waiting for a moment without client requests (see `drain`). */
    const waiting: Array<{ readonly at: number; readonly start: () => void }> = []
    /** Client requests in flight (shadow calls themselves not counted). */
    let primaries = 0
    /** Consecutive failures of a target, and until when it is left alone. */
    const failing = new Map<string, { count: number; until: number }>()

    type Scope = { readonly scope: string; readonly targets: ReadonlyArray<ShadowTarget> } | undefined
    /** The most specific shadow targets: the combo's, else the key's, else the gateway's settings'. */
    const scopeIn = (model: string, combo: Combo | null | undefined, keyId: string | null): Scope => {
      const own = combo?.config.shadow
      if (combo && own && own.length > 0) return { scope: combo.name, targets: own }
      const key = keyId === null ? undefined : keys.peekById(keyId)
      if (key !== undefined && key.shadow.length > 0) return { scope: `key:${key.id}`, targets: key.shadow }
      const global = settings.current().shadow
      return global.length > 0 ? { scope: combo?.name ?? model, targets: global } : undefined
    }

    const exchangeOptions: ExchangeOptions = {
      own,
      get judgeModel() {
        return settings.current().shadowOptions.judgeModel
      },
      mayJudge: () => shadow.spentToday() < settings.current().shadowOptions.budgetUsdPerDay,
      spend: (usd) => shadow.spend(usd)
    }

    const runOne = (s: Sampled, target: ShadowTarget, index: number, primaryText: string, primary: ResponseEvent) =>
      Effect.gen(function* () {
        const u = primary.usage
        const baseline: Baseline = {
          model: u?.model ?? null,
          text: primaryText,
          streamed: primary.streamed,
          latencyMs: u?.latencyMs ?? null,
          ttftMs: u?.ttftMs ?? null,
          tokens: u ? { input: u.usage.input ?? 0, output: u.usage.output ?? 0 } : null,
          costUsd: u?.costUsd ?? null
        }
        const { pair, ok } = yield* exchange(
          exchangeOptions,
          s,
          target.model,
          { call: `${s.requestId}_shadow_${index}`, judge: `${s.requestId}_judge_${index}` },
          baseline
        )
        const f = failing.get(target.model) ?? { count: 0, until: 0 }
        if (!ok) failing.set(target.model, { count: f.count + 1, until: f.count + 1 >= 3 ? Date.now() + 60_000 : 0 })
        else failing.delete(target.model)
        yield* shadow.record(pair)
      })

    /** The primary's answer went out: each sampled target gets the same request, within the bounds. */
    const finish = (s: Sampled, event: ResponseEvent) => {
      if (event.status !== 200) return shadow.skip("primary_failed")
      if ((event.usage?.fallbackAttempts ?? 0) > 0) return shadow.skip("incident")
      const text = event.streamed ? s.frames.join("") : typeof event.body === "string" ? event.body : (event.body?.toString("utf8") ?? "")
      // Nothing of the answer was seen as written (a transport whose frames the capture does not get): nothing to compare.
      if (text === "") return shadow.skip("no_answer")
      const options = settings.current().shadowOptions
      s.targets.forEach((target, index) => {
        if (shadow.spentToday() >= options.budgetUsdPerDay) return shadow.skip("budget")
        if ((failing.get(target.model)?.until ?? 0) > Date.now()) return shadow.skip("incident")
        // Running and waiting together stay within twice the concurrency: beyond, the sample goes.
        if (inFlight + waiting.length >= options.concurrency * 2) return shadow.skip("concurrency")
        waiting.push({
          at: Date.now(),
          start: () => {
            inFlight++
            fork(
              runOne(s, target, index, text, event).pipe(
                Effect.catchAllCause((cause) => Effect.logWarning(`shadow call to ${target.model} failed`, cause)),
                Effect.ensuring(
                  Effect.sync(() => {
                    inFlight--
                    drain()
                  })
                )
              )
            )
          }
        })
      })
      drain()
    }

    /**
     * Shadow calls yield to the gateway's own traffic: one starts only while no client request is
     * in flight (a request's end starts the next), within the concurrency; one that waited
     * longer than MAX_WAIT_MS goes (`busy`). So a shadow call never shares the CPU with a client
     * request that was already there when it began.
     */
    const drain = () => {
      const options = settings.current().shadowOptions
      while (waiting.length > 0 && Date.now() - waiting[0]!.at > MAX_WAIT_MS) {
        waiting.shift()
        shadow.skip("busy")
      }
      while (primaries === 0 && waiting.length > 0 && inFlight < options.concurrency) waiting.shift()!.start()
    }

    const capture = (s: Sampled) => ({
      name: "shadow.capture",
      onFrame: (e: { readonly text: string }) => void s.frames.push(e.text),
      onResponse: (e: ResponseEvent) => void finish(s, e)
    })

    const sample = (found: Scope, event: RequestEvent, request: HookRequest): undefined => {
      if (found === undefined) return undefined
      const targets = found.targets.filter((t) => t.sampleRate > 0 && Math.random() < t.sampleRate)
      if (targets.length === 0) return undefined
      pending.set(request.requestId, {
        requestId: request.requestId,
        scope: found.scope,
        format: event.format,
        path: request.path,
        query: "",
        body: event.body,
        stream: event.stream,
        targets,
        frames: []
      })
      return undefined
    }

    let off: (() => void) | undefined
    const sync = () => {
      const active =
        settings.current().shadow.length > 0 || (combosSnapshot?.some((c) => (c.config.shadow?.length ?? 0) > 0) ?? false) || keysShadowed
      if (active && off === undefined) {
        const offHook = hooks.register({
          name: "shadow.sample",
          // First: the body kept is the client's own, before other hooks change it (they run again on the shadow call).
          priority: 1,
          // A request no shadow scope takes (another model, no key or global shadow) stays on the common path.
          wants: (model, apiKeyId) => {
            const known = combos.peekByName(model)
            return known === undefined || scopeIn(model, known, apiKeyId) !== undefined
          },
          onRequest: (event, request) => {
            if (request.headers[SHADOW_HEADER] !== undefined) return undefined
            const known = combos.peekByName(event.model)
            // The combos in memory are not known fresh (one just changed): read them first.
            if (known === undefined)
              return Effect.map(combos.byName(event.model), (combo) =>
                sample(scopeIn(event.model, combo, request.apiKeyId), event, request)
              )
            return sample(scopeIn(event.model, known, request.apiKeyId), event, request)
          }
        })
        const offListener = hooks.listen({
          name: "shadow.capture",
          begin: (ctx: RequestContext) => {
            if (ctx.headers[SHADOW_HEADER] === undefined) primaries++
          },
          routed: (ctx: RequestContext) => {
            const s = pending.get(ctx.requestId)
            if (s === undefined) return
            pending.delete(ctx.requestId)
            s.query = ctx.query.toString()
            attach(ctx, capture(s))
          },
          end: (ctx: RequestContext) => {
            if (pending.size > 0) pending.delete(ctx.requestId)
            if (ctx.headers[SHADOW_HEADER] === undefined && --primaries <= 0) {
              primaries = 0
              if (waiting.length > 0) drain()
            }
          }
        })
        off = () => {
          offHook()
          offListener()
        }
      } else if (!active && off !== undefined) {
        off()
        off = undefined
      }
    }

    let combosSnapshot: ReadonlyArray<{ readonly config: { readonly shadow?: ReadonlyArray<ShadowTarget> | undefined } }> | undefined =
      yield* combos.list
    let keysShadowed = yield* keys.anyShadowed
    sync()
    const unsubscribe = settings.subscribe(() => sync())
    // Combos and keys change through the API, the CLI or another gateway: looked at (from memory)
    // on the timer shared with the other followers of the store version, under a second apart.
    yield* followVersion(
      yield* Effect.serviceOption(StoreVersion),
      Effect.flatMap(Effect.zip(combos.list, keys.anyShadowed), ([list, shadowed]) =>
        Effect.sync(() => {
          combosSnapshot = list
          keysShadowed = shadowed
          sync()
        })
      )
    )
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribe()
        off?.()
      })
    )
  })
)
