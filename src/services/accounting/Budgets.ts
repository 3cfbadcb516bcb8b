import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  BUDGET_INTERVALS,
  type BudgetConfig,
  type BudgetInterval,
  type BudgetStatus,
  type BudgetWindowStatus,
  budgetConfig,
  budgetLimit,
  decodeSetBudget
} from "../../domain/accounting.js"
import { type BadRequest, NotFound } from "../../domain/errors.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { SharedState, type TotalEntry } from "../../platform/state/SharedState.js"
import { toIso } from "../../platform/store/Db.js"
import { makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import { windowEnd, windowStart } from "./windows.js"

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

const NOTHING_HELD = () => {}

interface Row {
  readonly api_key_id: string
  readonly daily_limit_usd: number | null
  readonly weekly_limit_usd: number | null
  readonly monthly_limit_usd: number | null
  readonly warning_threshold: number
  readonly reset_interval: string
  readonly reset_time: string
  readonly created_at: number
  readonly updated_at: number
}

interface WindowState {
  start: number
  end: number
  spent: number
  /** `quota.exceeded` with kind warning was published (or the spend had already crossed at load). */
  warned: boolean
  /** Same for kind exceeded. */
  exceeded: boolean
}

interface BudgetState {
  config: BudgetConfig
  createdAt: number
  updatedAt: number
  /** All three windows are tracked, limited or not, so adding a limit later keeps the spend. */
  readonly windows: Record<BudgetInterval, WindowState>
}

const fromRow = (row: Row): BudgetConfig => {
  const limit = (n: number | null) => (typeof n === "number" && n > 0 ? n : null)
  const interval = (BUDGET_INTERVALS as ReadonlyArray<string>).includes(row.reset_interval) ? (row.reset_interval as BudgetInterval) : "monthly"
  return {
    apiKeyId: row.api_key_id,
    dailyLimitUsd: limit(row.daily_limit_usd),
    weeklyLimitUsd: limit(row.weekly_limit_usd),
    monthlyLimitUsd: limit(row.monthly_limit_usd),
    warningThreshold: row.warning_threshold,
    resetInterval: interval,
    resetTime: row.reset_time
  }
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
 * Spend is a float sum of many small costs (10 × 0.1 is 0.9999999999999999): spend within
 * 1e-10 USD (the last digit of `X-Gateway-Response-Cost`) of a level counts as reaching it.
 */
export const EPSILON_USD = 1e-10
const reached = (spent: number, level: number) => spent >= level - EPSILON_USD

/** Moves a window on when `now` passed its end: the new window starts from 0. */
const roll = (kind: BudgetInterval, resetTime: string, w: WindowState, now: number) => {
  if (now < w.end) return
  w.start = windowStart(kind, resetTime, now)
  w.end = windowEnd(kind, resetTime, now)
  w.spent = 0
  w.warned = false
  w.exceeded = false
}

/** Marks thresholds already crossed as notified: changing a budget or restarting publishes nothing. */
const settleFlags = (config: BudgetConfig, kind: BudgetInterval, w: WindowState) => {
  const limit = budgetLimit(config, kind)
  w.warned = limit !== null && reached(w.spent, config.warningThreshold * limit)
  w.exceeded = limit !== null && reached(w.spent, limit)
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

      const spentSince = (apiKeyId: string, since: number) =>
        sql<{ spent: number | null }>`SELECT SUM(cost_usd) AS spent FROM usage WHERE api_key_id = ${apiKeyId} AND ts >= ${since}`.pipe(
          Effect.map((rows) => rows[0]?.spent ?? 0),
          Effect.orDie
        )

      const loadWindows = (config: BudgetConfig, now: number) =>
        Effect.gen(function* () {
          const windows = {} as Record<BudgetInterval, WindowState>
          for (const kind of BUDGET_INTERVALS) {
            const start = windowStart(kind, config.resetTime, now)
            const w: WindowState = { start, end: windowEnd(kind, config.resetTime, now), spent: yield* spentSince(config.apiKeyId, start), warned: false, exceeded: false }
            settleFlags(config, kind, w)
            windows[kind] = w
          }
          return windows
        })

      /** Installs a budget: keeps the in-memory spend when the windows are the same, else reloads it. */
      const install = (config: BudgetConfig, createdAt: number, updatedAt: number, now: number) =>
        Effect.gen(function* () {
          const current = states.get(config.apiKeyId)
          if (current && current.config.resetTime === config.resetTime) {
            current.config = config
            current.createdAt = createdAt
            current.updatedAt = updatedAt
            for (const kind of BUDGET_INTERVALS) {
              roll(kind, config.resetTime, current.windows[kind], now)
              settleFlags(config, kind, current.windows[kind])
            }
            return current
          }
          const state: BudgetState = { config, createdAt, updatedAt, windows: yield* loadWindows(config, now) }
          states.set(config.apiKeyId, state)
          return state
        })

      const loadAll = Effect.gen(function* () {
        const rows = yield* sql<Row>`SELECT * FROM budgets ORDER BY api_key_id`.pipe(Effect.orDie)
        const now = yield* Clock.currentTimeMillis
        const seen = new Set<string>()
        for (const row of rows) {
          seen.add(row.api_key_id)
          const current = states.get(row.api_key_id)
          if (current && current.updatedAt === row.updated_at) continue
          yield* install(fromRow(row), row.created_at, row.updated_at, now)
        }
        for (const id of [...states.keys()]) if (!seen.has(id)) states.delete(id)
      })

      const refresh = yield* makeVersionedReload(version, loadAll)

      const windowView = (state: BudgetState, kind: BudgetInterval): BudgetWindowStatus | undefined => {
        const limit = budgetLimit(state.config, kind)
        if (limit === null) return undefined
        const w = state.windows[kind]
        return {
          limitUsd: limit,
          spentUsd: w.spent,
          remainingUsd: Math.max(0, limit - w.spent),
          windowStart: toIso(w.start)!,
          resetsAt: toIso(w.end)!,
          warning: reached(w.spent, state.config.warningThreshold * limit),
          exceeded: reached(w.spent, limit)
        }
      }

      const view = (state: BudgetState, now: number): BudgetStatus => {
        const c = state.config
        const windows: { -readonly [K in BudgetInterval]?: BudgetWindowStatus } = {}
        for (const kind of BUDGET_INTERVALS) {
          roll(kind, c.resetTime, state.windows[kind], now)
          const v = windowView(state, kind)
          if (v) windows[kind] = v
        }
        const primary = windows[c.resetInterval] ?? BUDGET_INTERVALS.map((k) => windows[k]).find((v) => v !== undefined)
        const w = state.windows[c.resetInterval]
        return {
          apiKeyId: c.apiKeyId,
          dailyLimitUsd: c.dailyLimitUsd,
          weeklyLimitUsd: c.weeklyLimitUsd,
          monthlyLimitUsd: c.monthlyLimitUsd,
          warningThreshold: c.warningThreshold,
          resetInterval: c.resetInterval,
          resetTime: c.resetTime,
          windows,
          limitUsd: primary?.limitUsd ?? 0,
          spentUsd: primary?.spentUsd ?? w.spent,
          remainingUsd: primary?.remainingUsd ?? 0,
          resetsAt: primary?.resetsAt ?? toIso(w.end)!,
          warning: primary?.warning ?? false,
          exceeded: BUDGET_INTERVALS.some((k) => windows[k]?.exceeded === true),
          createdAt: toIso(state.createdAt)!,
          updatedAt: toIso(state.updatedAt)!
        }
      }

      const set = (input: unknown) =>
        Effect.gen(function* () {
          const decoded = yield* decodeSetBudget(input)
          const keys = yield* sql<{ id: string }>`SELECT id FROM api_keys WHERE id = ${decoded.apiKeyId}`.pipe(Effect.orDie)
          if (keys.length === 0) return yield* new NotFound({ message: `no API key with id '${decoded.apiKeyId}'` })
          const config = budgetConfig(decoded)
          const now = yield* Clock.currentTimeMillis
          yield* sql`INSERT INTO budgets ${sql.insert({
            api_key_id: config.apiKeyId,
            daily_limit_usd: config.dailyLimitUsd,
            weekly_limit_usd: config.weeklyLimitUsd,
            monthly_limit_usd: config.monthlyLimitUsd,
            warning_threshold: config.warningThreshold,
            reset_interval: config.resetInterval,
            reset_time: config.resetTime,
            created_at: now,
            updated_at: now
          })} ON CONFLICT (api_key_id) DO UPDATE SET
            daily_limit_usd = excluded.daily_limit_usd,
            weekly_limit_usd = excluded.weekly_limit_usd,
            monthly_limit_usd = excluded.monthly_limit_usd,
            warning_threshold = excluded.warning_threshold,
            reset_interval = excluded.reset_interval,
            reset_time = excluded.reset_time,
            updated_at = excluded.updated_at`.pipe(Effect.orDie)
          const stored = yield* sql<{ created_at: number }>`SELECT created_at FROM budgets WHERE api_key_id = ${config.apiKeyId}`.pipe(Effect.orDie)
          const createdAt = stored[0]?.created_at ?? now
          const state = yield* install(config, createdAt, now, now)
          return view(state, now)
        })

      const remove = (apiKeyId: string) =>
        Effect.gen(function* () {
          const rows = yield* sql<{ api_key_id: string }>`SELECT api_key_id FROM budgets WHERE api_key_id = ${apiKeyId}`.pipe(Effect.orDie)
          if (rows.length === 0 && !states.has(apiKeyId)) return yield* new NotFound({ message: `API key '${apiKeyId}' has no budget` })
          yield* sql`DELETE FROM budgets WHERE api_key_id = ${apiKeyId}`.pipe(Effect.orDie)
          states.delete(apiKeyId)
        })

      const status = (apiKeyId?: string) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          if (apiKeyId !== undefined) {
            const s = states.get(apiKeyId)
            return s ? [view(s, now)] : []
          }
          return [...states.values()].sort((a, b) => (a.config.apiKeyId < b.config.apiKeyId ? -1 : 1)).map((s) => view(s, now))
        })

      const check = (apiKeyId: string | null, now: number, reservedUsd = 0): BudgetCheck => {
        if (apiKeyId === null) return { ok: true }
        const state = states.get(apiKeyId)
        if (!state) return { ok: true }
        let worst: BudgetCheck = { ok: true }
        for (const kind of BUDGET_INTERVALS) {
          const limit = budgetLimit(state.config, kind)
          if (limit === null) continue
          const w = state.windows[kind]
          roll(kind, state.config.resetTime, w, now)
          if (!reached(w.spent + reservedUsd, limit)) continue
          const retryAfterMs = Math.max(0, w.end - now)
          if (worst.ok || retryAfterMs > worst.retryAfterMs) worst = { ok: false, window: kind, limitUsd: limit, spentUsd: w.spent, retryAfterMs }
        }
        return worst
      }

      /**
       * Adds spend at `now`. `local`: this process's own (it announces crossed thresholds and
       * tells the other processes); another process's spend only marks thresholds as crossed.
       */
      const add = (apiKeyId: string, costUsd: number, now: number, local: boolean): void => {
        const state = states.get(apiKeyId)
        if (!state) return
        const c = state.config
        for (const kind of BUDGET_INTERVALS) {
          const w = state.windows[kind]
          roll(kind, c.resetTime, w, now)
          w.spent += costUsd
          const limit = budgetLimit(c, kind)
          if (limit === null) continue
          const publish = (level: "warning" | "exceeded", threshold: number) =>
            bus.publish("quota.exceeded", {
              source: "budget",
              api_key_id: apiKeyId,
              window: kind,
              kind: level,
              threshold,
              spent_usd: w.spent,
              limit_usd: limit,
              window_start: toIso(w.start),
              resets_at: toIso(w.end)
            })
          if (!w.warned && reached(w.spent, c.warningThreshold * limit)) {
            w.warned = true
            if (local) publish("warning", c.warningThreshold)
          }
          if (!w.exceeded && reached(w.spent, limit)) {
            w.exceeded = true
            if (local) publish("exceeded", 1)
          }
        }
        if (local && channel.shared) channel.publish({ apiKeyId, costUsd, at: now })
        if (local && totals.exact) totals.add(entries(state, now), costUsd)
      }

      const totals = shared.totals
      const HOUR_MS = 3_600_000
      /** The shared totals of the key's limited windows at `now` (each starts from this process's view of it). */
      const entries = (state: BudgetState, now: number): Array<TotalEntry> => {
        const out: Array<TotalEntry> = []
        for (const kind of BUDGET_INTERVALS) {
          const limit = budgetLimit(state.config, kind)
          if (limit === null) continue
          const w = state.windows[kind]
          roll(kind, state.config.resetTime, w, now)
          out.push({ key: `budget:${state.config.apiKeyId}:${kind}:${w.start}`, limit, init: w.spent, expireAt: w.end + HOUR_MS })
        }
        return out
      }

      const claim = (apiKeyId: string, estimateUsd: number, now: number): Effect.Effect<BudgetClaim | undefined> => {
        const state = states.get(apiKeyId)
        if (!state) return Effect.succeed({ check: { ok: true }, release: NOTHING_HELD })
        const held = entries(state, now)
        if (held.length === 0) return Effect.succeed({ check: { ok: true }, release: NOTHING_HELD })
        const by = Number.isFinite(estimateUsd) && estimateUsd > 0 ? estimateUsd : 0
        return Effect.map(totals.claim(held, by), (claimed): BudgetClaim | undefined => {
          if (claimed === undefined) return undefined
          if (claimed.ok) return { check: { ok: true }, release: by === 0 ? NOTHING_HELD : () => totals.add(held, -by) }
          let worst: BudgetCheck = { ok: true }
          const kinds = BUDGET_INTERVALS.filter((k) => budgetLimit(state.config, k) !== null)
          held.forEach((e, i) => {
            const spentUsd = claimed.values[i] ?? 0
            if (!reached(spentUsd, e.limit)) return
            const retryAfterMs = Math.max(0, state.windows[kinds[i]!].end - now)
            if (worst.ok || retryAfterMs > worst.retryAfterMs) worst = { ok: false, window: kinds[i]!, limitUsd: e.limit, spentUsd, retryAfterMs }
          })
          return { check: worst, release: NOTHING_HELD }
        })
      }

      const channel = shared.channel<BudgetSpend>("budgets", (s) => {
        if (Number.isFinite(s.costUsd) && s.costUsd > 0) add(s.apiKeyId, s.costUsd, s.at, false)
      })

      const unsafeRecord = (apiKeyId: string | null, costUsd: number, now: number): void => {
        if (apiKeyId === null || !(costUsd > 0) || !Number.isFinite(costUsd)) return
        add(apiKeyId, costUsd, now, true)
      }

      const record = (apiKeyId: string | null, costUsd: number) => Effect.map(Clock.currentTimeMillis, (now) => unsafeRecord(apiKeyId, costUsd, now))

      return { set, remove, status, check, record, unsafeRecord, refresh, exact: totals.exact, claim, has: (apiKeyId: string) => states.has(apiKeyId) }
    })
  )
}
