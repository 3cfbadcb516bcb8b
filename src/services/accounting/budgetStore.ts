import type * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import {
  BUDGET_INTERVALS,
  type BudgetConfig,
  type BudgetInterval,
  type BudgetStatus,
  budgetConfig,
  budgetLimit,
  decodeSetBudget,
  subjectRef
} from "../../domain/accounting.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { levelOf } from "../../domain/teams.js"
import type { BudgetsShape } from "./Budgets.js"
import { type BudgetState, budgetStatus, fromRow, type Row, roll, settleFlags, type WindowState } from "./budgetWindows.js"
import type { LevelsShape } from "./Levels.js"
import { usageOfSubject } from "./levelUsage.js"
import { windowEnd, windowStart } from "./windows.js"

const LIMIT_FIELDS = { daily: "dailyLimitUsd", weekly: "weeklyLimitUsd", monthly: "monthlyLimitUsd" } as const

/**
 * The database side of budgets (docs/accounting.md, "Budgets"): the `budgets` table read into
 * `states` (each window's spend summed from the `usage` table when a budget appears or its
 * windows move), and the management API's writes and reads.
 */
export const makeBudgetStore = (deps: {
  readonly sql: SqlClient.SqlClient
  /** The budgets in memory, by subject id (a key's, `team_…`, `usr_…`, `org`; shared with the request path). */
  readonly states: Map<string, BudgetState>
  readonly levels: LevelsShape | undefined
}): Pick<BudgetsShape, "set" | "remove" | "status"> & {
  readonly loadAll: Effect.Effect<void>
  /** How many budgets are above the key level (none: the request path looks no further than the key). */
  readonly levelled: () => number
} => {
  const { sql, states, levels } = deps
  let levelledCount = 0
  const count = () => {
    let n = 0
    for (const id of states.keys()) if (levelOf(id) !== "key") n++
    levelledCount = n
  }

  // A level's spend: its keys' usage rows (usageOfSubject: which keys count toward which level).
  const spentSince = (subjectId: string, since: number) =>
    sql<{ spent: number | null }>`SELECT SUM(cost_usd) AS spent FROM usage WHERE ${usageOfSubject(sql, subjectId)} AND ts >= ${since}`.pipe(
      Effect.map((rows) => Number(rows[0]?.spent ?? 0)),
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
    count()
  })

  /** Why a budget may not be set on `subjectId`: a window's limit above the nearest level above's. */
  const ceiling = (subjectId: string, config: BudgetConfig): string | undefined => {
    if (levels === undefined) return undefined
    for (const kind of BUDGET_INTERVALS) {
      const value = budgetLimit(config, kind)
      if (value === null) continue
      for (const a of levels.ancestors(subjectId)) {
        const parent = states.get(a)
        const limit = parent ? budgetLimit(parent.config, kind) : null
        if (limit !== null && value > limit) return `${LIMIT_FIELDS[kind]} ${value} is above ${levels.label(a)}'s ${limit}`
      }
    }
    return undefined
  }

  const set = (input: unknown) =>
    Effect.gen(function* () {
      const decoded = yield* decodeSetBudget(input)
      const subject = subjectRef(decoded)
      let subjectId: string
      if (levels !== undefined) {
        yield* levels.reload
        subjectId = yield* levels.resolve(subject)
      } else {
        if (typeof subject === "string" || subject.level !== "key")
          return yield* new BadRequest({ message: "budgets are set on API keys here" })
        const keys = yield* sql<{ id: string }>`SELECT id FROM api_keys WHERE id = ${subject.ref}`.pipe(Effect.orDie)
        if (keys.length === 0) return yield* new NotFound({ message: `no API key with id '${subject.ref}'` })
        subjectId = subject.ref
      }
      const config = budgetConfig({ ...decoded, apiKeyId: subjectId })
      const above = ceiling(subjectId, config)
      if (above !== undefined) return yield* new BadRequest({ message: above })
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
      count()
      return viewOf(state, now)
    })

  const remove = (apiKeyId: string) =>
    Effect.gen(function* () {
      const rows = yield* sql<{ api_key_id: string }>`SELECT api_key_id FROM budgets WHERE api_key_id = ${apiKeyId}`.pipe(Effect.orDie)
      if (rows.length === 0 && !states.has(apiKeyId)) {
        const which = levelOf(apiKeyId) === "key" ? `API key '${apiKeyId}'` : (levels?.label(apiKeyId) ?? apiKeyId)
        return yield* new NotFound({ message: `${which} has no budget` })
      }
      yield* sql`DELETE FROM budgets WHERE api_key_id = ${apiKeyId}`.pipe(Effect.orDie)
      states.delete(apiKeyId)
      count()
    })

  /** A budget's status; a level's names its subject (a key's is as before). */
  const viewOf = (state: BudgetState, now: number): BudgetStatus => {
    const view = budgetStatus(state, now)
    const id = state.config.apiKeyId
    const level = levelOf(id)
    if (level === "key") return view
    return {
      ...view,
      level,
      ...(level === "team" ? { teamId: id } : level === "user" ? { userId: id } : { organisation: true as const }),
      ...(levels !== undefined ? { subjectName: levels.name(id) } : {})
    }
  }

  const status: BudgetsShape["status"] = (subject) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      if (typeof subject === "string") {
        const s = states.get(subject)
        return s ? [viewOf(s, now)] : []
      }
      const level = subject?.level ?? "key"
      return [...states.values()]
        .filter((s) => level === "all" || levelOf(s.config.apiKeyId) === level)
        .sort((a, b) => (a.config.apiKeyId < b.config.apiKeyId ? -1 : 1))
        .map((s) => viewOf(s, now))
    })

  return { loadAll, set, remove, status, levelled: () => levelledCount }
}
