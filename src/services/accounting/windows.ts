/**
 * Accounting windows, all in UTC (no time zones, no DST): budget windows start at `resetTime`, token-limit windows are
 * fixed calendar windows (docs/accounting.md#budgets, docs/accounting.md#token-limits).
 */

export type BudgetWindow = "daily" | "weekly" | "monthly"
export type LimitWindow = "minute" | "hour" | "day" | "week" | "month"

export const BUDGET_WINDOWS: ReadonlyArray<BudgetWindow> = ["daily", "weekly", "monthly"]

export const MINUTE_MS = 60_000
export const HOUR_MS = 3_600_000
export const DAY_MS = 86_400_000
export const WEEK_MS = 7 * DAY_MS

const RESET_TIME = /^([01]\d|2[0-3]):([0-5]\d)$/

/** Minutes after midnight of an `HH:MM`; an invalid value counts as 00:00. */
const minutesOf = (resetTime: string): number => {
  const m = RESET_TIME.exec(resetTime)
  return m ? Number(m[1]) * 60 + Number(m[2]) : 0
}

/** The most recent boundary of a budget window at or before `now` (epoch ms). */
export const windowStart = (kind: BudgetWindow, resetTime: string, now: number): number => {
  const offset = minutesOf(resetTime) * MINUTE_MS
  const d = new Date(now)
  const y = d.getUTCFullYear()
  const mo = d.getUTCMonth()
  switch (kind) {
    case "daily": {
      const today = Date.UTC(y, mo, d.getUTCDate()) + offset
      return today <= now ? today : today - DAY_MS
    }
    case "weekly": {
      // getUTCDay: 0 = Sunday; days since Monday: Monday 0 ... Sunday 6.
      const sinceMonday = (d.getUTCDay() + 6) % 7
      const monday = Date.UTC(y, mo, d.getUTCDate() - sinceMonday) + offset
      return monday <= now ? monday : monday - WEEK_MS
    }
    case "monthly": {
      const first = Date.UTC(y, mo, 1) + offset
      return first <= now ? first : Date.UTC(y, mo - 1, 1) + offset
    }
  }
}

/** The next boundary of a budget window after `now`: when the current window resets. */
export const windowEnd = (kind: BudgetWindow, resetTime: string, now: number): number => {
  const start = windowStart(kind, resetTime, now)
  switch (kind) {
    case "daily":
      return start + DAY_MS
    case "weekly":
      return start + WEEK_MS
    case "monthly": {
      const s = new Date(start)
      return Date.UTC(s.getUTCFullYear(), s.getUTCMonth() + 1, 1) + minutesOf(resetTime) * MINUTE_MS
    }
  }
}

/** The fixed UTC window of a token limit holding `now`: `start <= now < end`. */
export const fixedWindow = (kind: LimitWindow, now: number): { readonly start: number; readonly end: number } => {
  switch (kind) {
    case "minute": {
      const start = Math.floor(now / MINUTE_MS) * MINUTE_MS
      return { start, end: start + MINUTE_MS }
    }
    case "hour": {
      const start = Math.floor(now / HOUR_MS) * HOUR_MS
      return { start, end: start + HOUR_MS }
    }
    case "day":
      return { start: windowStart("daily", "00:00", now), end: windowEnd("daily", "00:00", now) }
    case "week":
      return { start: windowStart("weekly", "00:00", now), end: windowEnd("weekly", "00:00", now) }
    case "month":
      return { start: windowStart("monthly", "00:00", now), end: windowEnd("monthly", "00:00", now) }
  }
}
