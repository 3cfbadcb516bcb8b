import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BudgetInterval, BudgetStatus } from "../../domain/accounting.js"
import type { BadRequest, NotFound } from "../../domain/errors.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import { makeBudgetSpend } from "./budgetSpend.js"
import { makeBudgetStore } from "./budgetStore.js"
import type { BudgetState } from "./budgetWindows.js"

export { EPSILON_USD } from "./budgetWindows.js"

export type BudgetCheck =
  | { readonly ok: true }
  | {
      readonly ok: false
      /** The exceeded window that resets last. */
      readonly window: BudgetInterval
      readonly limitUsd: number
      readonly spentUsd: number
      /** Until that window resets. */
      readonly retryAfterMs: number
    }

export interface BudgetsShape {
  /** `POST /api/usage/budget` and the CLI: decodes the body, upserts, answers the status. */
  readonly set: (input: unknown) => Effect.Effect<BudgetStatus, BadRequest | NotFound>
  readonly remove: (apiKeyId: string) => Effect.Effect<void, NotFound>
  /** `GET /api/usage/budget`: every budget, or the one of `apiKeyId` (empty when it has none). */
  readonly status: (apiKeyId?: string) => Effect.Effect<ReadonlyArray<BudgetStatus>>
  /** Request path, synchronous: refused while any window's spend is at or above its limit. */
  /** `reservedUsd`: the estimated cost of this key's requests still in flight, counted as spent. */
  readonly check: (apiKeyId: string | null, now: number, reservedUsd?: number) => BudgetCheck
  /** Request path: adds a response's cost to the key's windows (memory only) and publishes `quota.exceeded`. */
  readonly record: (apiKeyId: string | null, costUsd: number) => Effect.Effect<void>
  /** `record` at `now`, synchronously (the request path). */
  readonly unsafeRecord: (apiKeyId: string | null, costUsd: number, now: number) => void
  /** True when spend is exact across processes (`SharedState.totals` on Redis): the request path calls `claim`. */
  readonly exact: boolean
  /**
   * Across processes, atomically: refuses while a window's spend plus every process's holds has
   * reached its limit; else holds `estimateUsd` in each window until `release`. `undefined` when
   * the shared store is unreachable (the caller checks its own view with `check`).
   */
  readonly claim: (apiKeyId: string, estimateUsd: number, now: number) => Effect.Effect<BudgetClaim | undefined>
  /** Whether the key has a budget (its `claim` is then a round trip when `exact`). */
  readonly has: (apiKeyId: string) => boolean
  /**
   * Picks up budgets another process (the CLI) wrote. Queries only when `StoreVersion` is
   * provided and reports a commit from another connection; otherwise a no-op.
   */
  readonly refresh: Effect.Effect<void>
}

export interface BudgetClaim {
  readonly check: BudgetCheck
  /** Gives the hold back (once the request's spend is recorded). */
  readonly release: () => void
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): a response's cost, which
 * every process adds to the key's windows (sums commute, so the order of arrival does not matter).
 * Budgets themselves live in the database and are picked up through `refresh`.
 */
export interface BudgetSpend {
  readonly apiKeyId: string
  readonly costUsd: number
  readonly at: number
}

/**
 * Per-key USD budgets. Spend per window is loaded from the `usage` table at start (and when a
 * budget appears), then kept in memory: `check` and `record` never touch the database. Recorded
 * spend also goes to the other gateway processes on the `budgets` channel (`SharedState`).
 */
export class Budgets extends Context.Tag("gateway/Budgets")<Budgets, BudgetsShape>() {
  static readonly layer = Layer.effect(
    Budgets,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const bus = yield* EventBus
      const version = yield* Effect.serviceOption(StoreVersion)
      const shared = yield* SharedState.orLocal
      const states = new Map<string, BudgetState>()

      const { loadAll, set, remove, status } = makeBudgetStore({ sql, states })
      const refresh = yield* makeVersionedReload(version, loadAll)
      // Opens the `budgets` channel: after the first load, as the other processes' spend adds to the loaded windows.
      const spend = makeBudgetSpend({ states, bus, shared })

      return { set, remove, status, refresh, ...spend }
    })
  )
}
