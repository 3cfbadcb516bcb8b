import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import type { Usage } from "../../domain/canonical.js"
import type { Settlement } from "../../kernel/hooks.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { AccountingConfig } from "./AccountingConfig.js"
import { makeAdmission } from "./admission.js"
import { type BudgetCheck, Budgets } from "./Budgets.js"
import { type MediaUnits, mediaCost, tokenCost } from "./cost.js"
import { emergencyModel } from "./emergencyModel.js"
import { Pricing } from "./Pricing.js"
import { InboundLimits } from "./InboundLimits.js"
import { Levels, type ModelRefusal } from "./Levels.js"
import { makePrepare } from "./prepare.js"
import { makeReservations, type Reservation } from "./reservations.js"
import { makeSettlement } from "./settlement.js"
import { type LimitTarget, type TokenLimitCheck, TokenLimits } from "./TokenLimits.js"
import { Usage as UsageService, type UsageRecord } from "../usage/Usage.js"
import { SharedState } from "../../platform/state/SharedState.js"

export type { Reservation } from "./reservations.js"
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
  /** A token limit that stops the key from using a target now (sync, at the Clock's time, as `settle` records); other in-flight requests
   * count. */
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
  /**
   * The level (the key, its user, team(s), the organisation) whose allowed models do not include the
   * request's model: the id asked for, or every candidate it would go to. Undefined when all allow
   * it (at once while no level has a models list).
   */
  readonly modelRefusal: (
    apiKeyId: string | null,
    requested: string,
    /** Asked for only when a level has models and the id asked for matches none. */
    candidates: () => ReadonlyArray<{ readonly model: string; readonly key: string; readonly provider: string }>
  ) => ModelRefusal | undefined
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
 * the batched writer, budgets and limits keep their counters in memory). Its parts: the
 * reservations (reservations.ts), admission (admission.ts), settlement (settlement.ts), the
 * refresh before a request (prepare.ts) and the emergency model (emergencyModel.ts).
 */
export class Accounting extends Context.Tag("gateway/Accounting")<Accounting, AccountingShape>() {
  static readonly layer = Layer.effect(
    Accounting,
    Effect.gen(function* () {
      const pricing = yield* Pricing
      const budgets = yield* Budgets
      const limits = yield* TokenLimits
      const inbound = yield* InboundLimits
      const levels = yield* Levels
      const hooks = yield* RequestHooks
      const connections = yield* Connections
      const config = yield* AccountingConfig
      const usage = yield* UsageService
      // Budget and limit windows keep the Clock's time (a TestClock in tests); read synchronously.
      const clock = yield* Effect.clock
      const version = yield* Effect.serviceOption(StoreVersion)
      const shared = yield* SharedState.orLocal

      const cost: AccountingShape["cost"] = (provider, model, u) => tokenCost(pricing.priceOf(provider, model), u)
      const priceMedia: AccountingShape["mediaCost"] = (provider, model, u, units) => {
        const price = pricing.priceOf(provider, model)
        return tokenCost(price, u) + mediaCost(price, units, u)
      }
      // What each key's requests are expected to cost, and what those in flight hold.
      const { held, reserve, learn } = makeReservations({ clock, shared })
      // Before a request: its key's budget and token limits (held across processes with Redis).
      const admission = makeAdmission({ budgets, limits, clock, held, reserve })
      // After it: its spend and tokens, then the lifecycle's `settled` listeners.
      const { settle, finish } = makeSettlement({ budgets, limits, inbound, hooks, usage, clock, learn, cost, mediaCost: priceMedia })
      // Prices, budgets and limits kept up to date with what other processes commit.
      const { prepare, prepared } = makePrepare({ pricing, budgets, limits, levels, version })

      return {
        cost,
        mediaCost: priceMedia,
        settle,
        finish,
        prepare,
        prepared,
        ...admission,
        modelRefusal: (apiKeyId, requested, candidates) =>
          apiKeyId === null || !levels.anyModels() ? undefined : levels.modelRefusal(apiKeyId, requested, candidates),
        emergencyModel: emergencyModel({ config, connections, pricing })
      } satisfies AccountingShape
    })
  )
}
