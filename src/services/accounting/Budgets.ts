import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BudgetInterval, BudgetStatus } from "../../domain/accounting.js"
import type { BadRequest, NotFound } from "../../domain/errors.js"
import type { Level } from "../../domain/teams.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import { makeBudgetSpend } from "./budgetSpend.js"
import { makeBudgetStore } from "./budgetStore.js"
import type { BudgetState } from "./budgetWindows.js"
import { Levels } from "./Levels.js"

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
      /** The level whose budget is spent (docs/accounting.md, "Limits at every level"). */
      readonly level: Level
      readonly subjectId: string
      /** How answers name it: `this API key`, `team 'research' (team_ab12)`, `the organisation`. */
      readonly subject: string
    }

export interface BudgetsShape {
  /** `POST /api/usage/budget` and the CLI: decodes the body, upserts, answers the status. */
  readonly set: (input: unknown) => Effect.Effect<BudgetStatus, BadRequest | NotFound>
  /** Removes the budget of a subject (a key's id, `team_…`, `usr_…`, `org`). */
  readonly remove: (subjectId: string) => Effect.Effect<void, NotFound>
  /**
   * `GET /api/usage/budget`: every key's budget, or the one of a subject (empty when it has none);
   * `{ level }` lists the budgets of one level, or of every level with `all`.
   */
  readonly status: (subject?: string | { readonly level: Level | "all" }) => Effect.Effect<ReadonlyArray<BudgetStatus>>
  /**
   * Request path, synchronous: refused while any window's spend is at or above its limit, on the
   * key's own budget or on a level above it (its user, team(s), the organisation).
   * `reservedUsd`: the estimated cost of this key's requests still in flight, counted as spent.
   */
  readonly check: (apiKeyId: string | null, now: number, reservedUsd?: number) => BudgetCheck
  /** `check` of the levels above the key only (with shared exact totals the key's own is claimed). */
  readonly checkAbove: (apiKeyId: string, now: number, reservedUsd?: number) => BudgetCheck
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
 * USD budgets of keys and of the levels above them (the organisation, teams, users). Spend per window is loaded from the `usage` table at start (and when a
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
      const levels = yield* Effect.serviceOption(Levels)
      const lv = levels._tag === "Some" ? levels.value : undefined

      const { loadAll, set, remove, status, levelled } = makeBudgetStore({ sql, states, levels: lv })
      const refresh = yield* makeVersionedReload(version, loadAll)
      // Opens the `budgets` channel: after the first load, as the other processes' spend adds to the loaded windows.
      const spend = makeBudgetSpend({ states, bus, shared, levels: lv, levelled })

      return { set, remove, status, refresh, ...spend }
    })
  )
}
