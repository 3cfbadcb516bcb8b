import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import type { Usage } from "../../domain/canonical.js"
import { RequestHooks, type Settlement } from "../../kernel/hooks.js"
import { fireSettled } from "../../kernel/listeners.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { dispatchModel } from "../routing/Router.js"
import { AccountingConfig } from "./AccountingConfig.js"
import { type BudgetCheck, Budgets } from "./Budgets.js"
import { type MediaUnits, mediaCost, tokenCost } from "./cost.js"
import { Pricing } from "./Pricing.js"
import { InboundLimits } from "./InboundLimits.js"
import { type LimitTarget, type TokenLimitCheck, TokenLimits } from "./TokenLimits.js"
import { Usage as UsageService, type UsageRecord } from "../usage/Usage.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import { SharedState } from "../../platform/state/SharedState.js"

/** A request's hold on its key's budget and token limits while it runs. */
export interface Reservation {
  readonly costUsd: number
  readonly tokens: number
  readonly release: () => void
}

const NO_RESERVATION: Reservation = { costUsd: 0, tokens: 0, release: () => {} }
const NOT_HELD = { budget: { ok: true } as BudgetCheck, hold: NO_RESERVATION }

/** Weight of the latest request in a key's running average. */
const EWMA_WEIGHT = 0.3

export type { Settlement }

export interface AccountingShape {
  /**
   * Brings prices, budgets and limits up to date with what other processes (the CLI) committed:
   * no query unless the database changed, checked at most once a second. Run once per request.
   */
  readonly prepare: Effect.Effect<void>
  /** Whether `prepare` would do nothing now (the database is the one last refreshed): the request path skips it. */
  readonly prepared: () => boolean
  /**
   * The key's budget before a request: a spent window refuses it. Requests of the key still in
   * flight count with their expected cost (the key's recent average), so a parallel burst cannot
   * spend far past the limit before the first answers are counted.
   */
  readonly budget: (apiKeyId: string | null) => BudgetCheck
  /** True when budgets are exact across processes (Redis): the pipeline calls `admit` instead of `budget` and `reserve`. */
  readonly exact: boolean
  /**
   * With `exact`: whether the key's admission is a round trip (it has a budget or a token limit).
   * A key with neither is admitted from memory, as in one process.
   */
  readonly holdsShared: (apiKeyId: string | null) => boolean
  /**
   * `budget` and `reserve` in one step that is atomic across processes: the hold counts in every
   * process's check at once, so a burst split across gateways cannot spend past the limit. The
   * hold is answered even when the budget refuses (release it as usual).
   */
  readonly admit: (apiKeyId: string | null) => Effect.Effect<{ readonly budget: BudgetCheck; readonly hold: Reservation }>
  /**
   * Holds the key's expected cost and tokens for a request until it settles; answers the hold
   * (pass it to `tokenLimit`, release it once settled).
   */
  readonly reserve: (apiKeyId: string | null) => Reservation
  /** A token limit that stops the key from using a target now (sync, at the Clock's time, as `settle` records); other in-flight requests count. */
  readonly tokenLimit: (apiKeyId: string | null, target: LimitTarget, own?: Reservation) => TokenLimitCheck
  /**
   * `tokenLimit` atomic across processes (with `exact`): holds `own`'s expected tokens in each
   * applicable limit until `own` is released. `own` must come from `admit`; otherwise (or with
   * the shared store unreachable) it is `tokenLimit`.
   */
  readonly claimTokens: (apiKeyId: string | null, target: LimitTarget, own?: Reservation) => Effect.Effect<TokenLimitCheck>
  /** USD of one answer at the prices in force (0 when unpriced). */
  readonly cost: (provider: string, model: string, usage: Partial<Usage> | undefined) => number
  /** USD of one media answer: its tokens (where reported) plus its units (images, seconds, characters, searches) at the prices in force. */
  readonly mediaCost: (provider: string, model: string, usage: Partial<Usage> | undefined, units: MediaUnits) => number
  /** The free model a budget-exhausted request goes to, if there is one. */
  readonly emergencyModel: Effect.Effect<string | undefined>
  /** After a request: spend and tokens, then the lifecycle's `settled` listeners (synchronous: every request settles). */
  readonly settle: (s: Settlement) => void
  /**
   * For routes outside the pipeline (embeddings, media, the WebSocket transport): prices the
   * request (its tokens, plus its media `units` when given), writes its usage row and settles
   * it. Answers the cost.
   */
  readonly finish: (r: UsageRecord & { readonly units?: MediaUnits }) => Effect.Effect<number>
}

/**
 * Accounting on the request path: reads of in-memory budgets, limits and prices before and
 * after each request; nothing here writes to the database synchronously (usage rows go through
 * the batched writer, budgets and limits keep their counters in memory).
 */
export class Accounting extends Context.Tag("gateway/Accounting")<Accounting, AccountingShape>() {
  static readonly layer = Layer.effect(
    Accounting,
    Effect.gen(function* () {
      const pricing = yield* Pricing
      const budgets = yield* Budgets
      const limits = yield* TokenLimits
      const inbound = yield* InboundLimits
      const hooks = yield* RequestHooks
      const connections = yield* Connections
      const config = yield* AccountingConfig
      const usage = yield* UsageService
      // Budget and limit windows keep the Clock's time (a TestClock in tests); read synchronously.
      const clock = yield* Effect.clock
      const version = yield* Effect.serviceOption(StoreVersion)

      const emergencyModel: AccountingShape["emergencyModel"] = Effect.gen(function* () {
        if (config.emergencyFallbackModel) return config.emergencyFallbackModel
        const enabled = (yield* connections.list).filter((c) => c.enabled)
        // A local provider costs nothing; otherwise a catalog model priced at zero.
        const local = enabled.find((c) => c.provider.category === "local" && dispatchModel(c))
        if (local) return `${local.name}/${dispatchModel(local)}`
        for (const c of enabled) {
          const free = c.provider.models.find((m) => {
            const p = m.kind === "chat" ? pricing.priceOf(c.provider.id, m.id) : undefined
            return p !== undefined && p.input === 0 && p.output === 0
          })
          if (free) return `${c.name}/${free.id}`
        }
        return undefined
      })

      const cost: AccountingShape["cost"] = (provider, model, u) => tokenCost(pricing.priceOf(provider, model), u)
      const priceMedia: AccountingShape["mediaCost"] = (provider, model, u, units) => {
        const price = pricing.priceOf(provider, model)
        return tokenCost(price, u) + mediaCost(price, units, u)
      }

      // Per key: the running average of a request's cost and tokens, and what is held in flight.
      const averages = new BoundedMap<string, { costUsd: number; tokens: number }>({ maxEntries: 10_000 })
      const held = new Map<string, { costUsd: number; tokens: number; count: number }>()
      /** Holds made by `admit`: what their release gives back to the shared totals. */
      const sharedHolds = new WeakMap<Reservation, Array<() => void>>()
      // Every key's requests together: what a key this process has not served yet is expected to
      // cost (without it, a new key's first burst would hold nothing, and with several processes a
      // key another process served would race its budget unheld).
      let overall: { costUsd: number; tokens: number } | undefined
      const ewma = (a: { costUsd: number; tokens: number } | undefined, costUsd: number, tokens: number) =>
        a ? { costUsd: a.costUsd + EWMA_WEIGHT * (costUsd - a.costUsd), tokens: a.tokens + EWMA_WEIGHT * (tokens - a.tokens) } : { costUsd, tokens }
      // With several processes a key's average goes to the others on the `averages` channel: a
      // process that has not served the key yet holds what it really costs (its first request
      // anywhere, then at most once a second per key). A received average is blended in like a request.
      type AverageChange = { readonly k: string; readonly c: number; readonly t: number }
      const averagesChannel = (yield* SharedState.orLocal).channel<AverageChange>("averages", (m) => {
        if (typeof m?.k !== "string" || !Number.isFinite(m.c) || !Number.isFinite(m.t)) return
        averages.set(m.k, ewma(averages.get(m.k), m.c, m.t))
      })
      const publishedAt = new BoundedMap<string, number>({ maxEntries: 10_000 })
      const learn = (apiKeyId: string, costUsd: number, tokens: number) => {
        const a = ewma(averages.get(apiKeyId), costUsd, tokens)
        averages.set(apiKeyId, a)
        overall = ewma(overall, costUsd, tokens)
        if (averagesChannel.shared) {
          const now = clock.unsafeCurrentTimeMillis()
          const last = publishedAt.get(apiKeyId)
          if (last === undefined || now - last >= 1_000) {
            publishedAt.set(apiKeyId, now)
            averagesChannel.publish({ k: apiKeyId, c: a.costUsd, t: a.tokens })
          }
        }
      }
      const reserve: AccountingShape["reserve"] = (apiKeyId) => {
        if (apiKeyId === null) return NO_RESERVATION
        const a = averages.get(apiKeyId) ?? overall ?? { costUsd: 0, tokens: 0 }
        const h = held.get(apiKeyId) ?? { costUsd: 0, tokens: 0, count: 0 }
        h.costUsd += a.costUsd
        h.tokens += a.tokens
        h.count++
        held.set(apiKeyId, h)
        let released = false
        return {
          costUsd: a.costUsd,
          tokens: a.tokens,
          release: () => {
            if (released) return
            released = true
            h.costUsd -= a.costUsd
            h.tokens -= a.tokens
            if (--h.count <= 0) held.delete(apiKeyId)
          }
        }
      }

      const settle: AccountingShape["settle"] = (s) => {
        const ok = s.status >= 200 && s.status < 300
        const now = clock.unsafeCurrentTimeMillis()
        if (s.apiKeyId !== null && s.costUsd > 0) budgets.unsafeRecord(s.apiKeyId, s.costUsd, now)
        const tokens = (s.usage?.inputTokens ?? 0) + (s.usage?.outputTokens ?? 0)
        if (s.apiKeyId !== null && ok) learn(s.apiKeyId, s.costUsd, tokens)
        inbound.settle(s.requestId, s.apiKeyId, tokens)
        if (s.apiKeyId !== null && tokens > 0 && s.provider && s.model) {
          limits.unsafeRecord(
            s.apiKeyId,
            { provider: s.provider, model: s.model, requestedModel: s.requestedModel, ...(s.connection ? { connection: s.connection } : {}) },
            tokens,
            now
          )
        }
        // The lifecycle's listeners hear of it (the webhooks' request events among them).
        fireSettled(hooks.current(), s)
      }

      // Prices, budgets and limits change under this process only when another one commits: with
      // the database version unchanged since the last full refresh, a request's check is one step.
      let refreshedAt: number | undefined
      const refreshAll = Effect.zipRight(pricing.refresh, Effect.zipRight(budgets.refresh, limits.refresh))
      const prepared = () => {
        if (Option.isNone(version)) return false
        const known = version.value.peek()
        return known !== undefined && known === refreshedAt
      }
      const prepare = Effect.suspend(() => {
        if (prepared()) return Effect.void
        if (Option.isNone(version)) return refreshAll
        // The version known before the refresh: a commit seen while it ran is picked up next time.
        const before = version.value.peek()
        return Effect.tap(refreshAll, () => {
          refreshedAt = before
        })
      })

      return {
        cost,
        mediaCost: priceMedia,
        settle,
        finish: (r) =>
          Effect.gen(function* () {
            const u = { inputTokens: r.usage.input ?? undefined, outputTokens: r.usage.output ?? undefined, cachedInputTokens: r.usage.cached ?? undefined } as Partial<Usage>
            const { units, ...row } = r
            const costUsd = r.provider && r.model && r.status >= 200 && r.status < 300 ? (units ? priceMedia(r.provider, r.model, u, units) : cost(r.provider, r.model, u)) : 0
            yield* usage.record({ ...row, costUsd })
            settle({
              requestId: r.requestId,
              apiKeyId: r.apiKeyId,
              provider: r.provider,
              model: r.model,
              requestedModel: r.requestedModel ?? r.model ?? "",
              status: r.status,
              usage: u,
              costUsd,
              error: r.error
            })
            return costUsd
          }),
        prepare,
        prepared,
        budget: (apiKeyId) => (apiKeyId === null ? { ok: true as const } : budgets.check(apiKeyId, clock.unsafeCurrentTimeMillis(), held.get(apiKeyId)?.costUsd ?? 0)),
        reserve,
        exact: budgets.exact,
        holdsShared: (apiKeyId) => apiKeyId !== null && (budgets.has(apiKeyId) || limits.has(apiKeyId)),
        admit: (apiKeyId) => {
          if (apiKeyId === null) return Effect.succeed(NOT_HELD)
          const now = clock.unsafeCurrentTimeMillis()
          const local = reserve(apiKeyId)
          // Shared holds taken for this request (its budget windows, then token limits per target).
          const releases: Array<() => void> = []
          const hold: Reservation = {
            costUsd: local.costUsd,
            tokens: local.tokens,
            release: () => {
              local.release()
              for (const r of releases.splice(0)) r()
            }
          }
          sharedHolds.set(hold, releases)
          return Effect.map(budgets.claim(apiKeyId, local.costUsd, now), (claimed) => {
            // The shared store unreachable: this process's view, as with one process.
            if (claimed === undefined) return { budget: budgets.check(apiKeyId, now, Math.max(0, (held.get(apiKeyId)?.costUsd ?? 0) - local.costUsd)), hold }
            releases.push(claimed.release)
            return { budget: claimed.check, hold }
          })
        },
        claimTokens: (apiKeyId, target, own) => {
          if (apiKeyId === null) return Effect.succeed({ ok: true } as TokenLimitCheck)
          const releases = own === undefined ? undefined : sharedHolds.get(own)
          const now = clock.unsafeCurrentTimeMillis()
          const localCheck = () => limits.check(apiKeyId, target, now, Math.max(0, (held.get(apiKeyId)?.tokens ?? 0) - (own?.tokens ?? 0)))
          if (releases === undefined) return Effect.sync(localCheck)
          return Effect.map(limits.claim(apiKeyId, target, own!.tokens, now), (claimed) => {
            if (claimed === undefined) return localCheck()
            releases.push(claimed.release)
            return claimed.check
          })
        },
        tokenLimit: (apiKeyId, target, own) =>
          apiKeyId === null ? { ok: true } : limits.check(apiKeyId, target, clock.unsafeCurrentTimeMillis(), Math.max(0, (held.get(apiKeyId)?.tokens ?? 0) - (own?.tokens ?? 0))),
        emergencyModel
      } satisfies AccountingShape
    })
  )
}
