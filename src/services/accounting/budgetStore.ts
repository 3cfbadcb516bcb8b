import type * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { BUDGET_INTERVALS, type BudgetConfig, type BudgetInterval, budgetConfig, decodeSetBudget } from "../../domain/accounting.js"
import { NotFound } from "../../domain/errors.js"
import type { BudgetsShape } from "./Budgets.js"
import { type BudgetState, budgetStatus, fromRow, type Row, roll, settleFlags, type WindowState } from "./budgetWindows.js"
import { windowEnd, windowStart } from "./windows.js"

/**
 * The database side of budgets (docs/accounting.md, "Budgets"): the `budgets` table read into
 * `states` (each window's spend summed from the `usage` table when a budget appears or its
 * windows move), and the management API's writes and reads.
 */
export const makeBudgetStore = (deps: {
  readonly sql: SqlClient.SqlClient
  /** The budgets in memory, by API key id (shared with the request path). */
  readonly states: Map<string, BudgetState>
}): Pick<BudgetsShape, "set" | "remove" | "status"> & { readonly loadAll: Effect.Effect<void> } => {
  const { sql, states } = deps

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
        const w: WindowState = {
          start,
          end: windowEnd(kind, config.resetTime, now),
          spent: yield* spentSince(config.apiKeyId, start),
          warned: false,
          exceeded: false
        }
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

  /** Every stored budget (one unchanged since it was installed is left as it is); one no longer stored goes. */
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
      const stored = yield* sql<{ created_at: number }>`SELECT created_at FROM budgets WHERE api_key_id = ${config.apiKeyId}`.pipe(
        Effect.orDie
      )
      const createdAt = stored[0]?.created_at ?? now
      const state = yield* install(config, createdAt, now, now)
      return budgetStatus(state, now)
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
        return s ? [budgetStatus(s, now)] : []
      }
      return [...states.values()].sort((a, b) => (a.config.apiKeyId < b.config.apiKeyId ? -1 : 1)).map((s) => budgetStatus(s, now))
    })

  return { loadAll, set, remove, status }
}
