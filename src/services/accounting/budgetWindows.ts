import {
  BUDGET_INTERVALS,
  type BudgetConfig,
  type BudgetInterval,
  type BudgetStatus,
  type BudgetWindowStatus,
  budgetLimit
} from "../../domain/accounting.js"
import { toIso } from "../../platform/store/Db.js"
import { windowEnd, windowStart } from "./windows.js"

/**
 * A key's budget in memory (docs/accounting.md, "Budgets"): its configuration and the spend of each of
 * its three windows (daily, weekly, monthly), moved on when a window ends, and the status the API
 * answers. The store (budgetStore.ts) loads and writes them; the request path (budgetSpend.ts)
 * checks and adds to them.
 */

export interface Row {
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

export interface WindowState {
  start: number
  end: number
  spent: number
  /** `quota.exceeded` with kind warning was published (or the spend had already crossed at load). */
  warned: boolean
  /** Same for kind exceeded. */
  exceeded: boolean
}

export interface BudgetState {
  config: BudgetConfig
  createdAt: number
  updatedAt: number
  /** All three windows are tracked, limited or not, so adding a limit later keeps the spend. */
  readonly windows: Record<BudgetInterval, WindowState>
}

/** A stored row's budget (a limit that is not a positive number is none; an unknown interval is monthly). */
export const fromRow = (row: Row): BudgetConfig => {
  const limit = (n: number | null) => (typeof n === "number" && n > 0 ? n : null)
  const interval = (BUDGET_INTERVALS as ReadonlyArray<string>).includes(row.reset_interval)
    ? (row.reset_interval as BudgetInterval)
    : "monthly"
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
 * Spend is a float sum of many small costs (10 × 0.1 is 0.9999999999999999): spend within
 * 1e-10 USD (the last digit of `X-Gateway-Response-Cost`) of a level counts as reaching it.
 */
export const EPSILON_USD = 1e-10
/** Whether `spent` reached `level` (within EPSILON_USD). */
export const reached = (spent: number, level: number) => spent >= level - EPSILON_USD

/** Moves a window on when `now` passed its end: the new window starts from 0. */
export const roll = (kind: BudgetInterval, resetTime: string, w: WindowState, now: number) => {
  if (now < w.end) return
  w.start = windowStart(kind, resetTime, now)
  w.end = windowEnd(kind, resetTime, now)
  w.spent = 0
  w.warned = false
  w.exceeded = false
}

/** Marks thresholds already crossed as notified: changing a budget or restarting publishes nothing. */
export const settleFlags = (config: BudgetConfig, kind: BudgetInterval, w: WindowState) => {
  const limit = budgetLimit(config, kind)
  w.warned = limit !== null && reached(w.spent, config.warningThreshold * limit)
  w.exceeded = limit !== null && reached(w.spent, limit)
}

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

/** A budget's status at `now` (its windows rolled on): each limited window, and the primary one's figures at the top level. */
export const budgetStatus = (state: BudgetState, now: number): BudgetStatus => {
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
