import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { BUDGET_INTERVALS, budgetLimit } from "../../domain/accounting.js"
import type { EventBusShape } from "../../platform/events/EventBus.js"
import type { SharedStateShape, TotalEntry } from "../../platform/state/SharedState.js"
import { levelOf } from "../../domain/teams.js"
import { toIso } from "../../platform/store/Db.js"
import type { BudgetCheck, BudgetClaim, BudgetSpend, BudgetsShape } from "./Budgets.js"
import { type BudgetState, reached, roll } from "./budgetWindows.js"
import type { LevelsShape } from "./Levels.js"

const OK: BudgetCheck = { ok: true }

const NOTHING_HELD = () => {}
const HOUR_MS = 3_600_000

/**
 * Budgets on the request path, synchronous and in memory: the check before a request (a spent
 * window refuses it), the spend after it (announcing crossed thresholds as `quota.exceeded`, and
 * telling the other processes on the `budgets` channel), and, with exact shared totals (Redis),
 * the claim that holds a request's estimate across processes. Made once per layer: the channel
 * is opened here.
 */
export const makeBudgetSpend = (deps: {
  /** The budgets in memory, by subject id (the store loads them). */
  readonly states: ReadonlyMap<string, BudgetState>
  readonly bus: EventBusShape
  readonly shared: SharedStateShape
  /** The levels above each key (absent: keys' budgets only). */
  readonly levels: LevelsShape | undefined
  /** How many budgets are above the key level. */
  readonly levelled: () => number
}): Pick<BudgetsShape, "check" | "checkAbove" | "record" | "unsafeRecord" | "exact" | "claim" | "has"> => {
  const { states, bus, shared, levels, levelled } = deps

  /** `state`'s windows at `now`: the worse of `worst` and its exceeded window that resets last. */
  const checkState = (state: BudgetState, now: number, reservedUsd: number, worst: BudgetCheck): BudgetCheck => {
    for (const kind of BUDGET_INTERVALS) {
      const limit = budgetLimit(state.config, kind)
      if (limit === null) continue
      const w = state.windows[kind]
      roll(kind, state.config.resetTime, w, now)
      if (!reached(w.spent + reservedUsd, limit)) continue
      const retryAfterMs = Math.max(0, w.end - now)
      if (worst.ok || retryAfterMs > worst.retryAfterMs) {
        const id = state.config.apiKeyId
        const level = levelOf(id)
        const subject = level === "key" ? "this API key" : (levels?.label(id) ?? id)
        worst = { ok: false, window: kind, limitUsd: limit, spentUsd: w.spent, retryAfterMs, level, subjectId: id, subject }
      }
    }
    return worst
  }

  // The levels above the key: one comparison while no level has a budget.
  const checkAbove = (apiKeyId: string, now: number, reservedUsd = 0): BudgetCheck => {
    if (levels === undefined || levelled() === 0) return OK
    let worst: BudgetCheck = OK
    for (const id of levels.above(apiKeyId)) {
      const state = states.get(id)
      if (state) worst = checkState(state, now, reservedUsd, worst)
    }
    return worst
  }

  const check = (apiKeyId: string | null, now: number, reservedUsd = 0): BudgetCheck => {
    if (apiKeyId === null) return OK
    const state = states.get(apiKeyId)
    const own = state ? checkState(state, now, reservedUsd, OK) : OK
    if (levels === undefined || levelled() === 0) return own
    const above = checkAbove(apiKeyId, now, reservedUsd)
    return own.ok ? above : above.ok || own.retryAfterMs >= above.retryAfterMs ? own : above
  }

  /**
   * Adds spend at `now`. `local`: this process's own (it announces crossed thresholds and
   * tells the other processes); another process's spend only marks thresholds as crossed.
   */
  const add = (apiKeyId: string, costUsd: number, now: number, local: boolean): void => {
    const state = states.get(apiKeyId)
    // Whether any budget counts this spend: a key with none, at no level, tells nobody (no message per request).
    let counted = state !== undefined
    if (levels !== undefined && levelled() > 0)
      for (const id of levels.above(apiKeyId)) {
        const above = states.get(id)
        if (above) {
          addTo(above, apiKeyId, costUsd, now, local)
          counted = true
        }
      }
    if (!counted) return
    if (state) addTo(state, apiKeyId, costUsd, now, local)
    if (local && channel.shared) channel.publish({ apiKeyId, costUsd, at: now })
    if (local && totals.exact && state) totals.add(entries(state, now), costUsd)
  }

  /** Adds spend of a request of `apiKeyId` to one budget (the key's own or a level's above it). */
  const addTo = (state: BudgetState, apiKeyId: string, costUsd: number, now: number, local: boolean): void => {
    const c = state.config
    const subjectId = c.apiKeyId
    const subjectLevel = levelOf(subjectId)
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
          ...(subjectLevel === "key" ? {} : { level: subjectLevel, subject_id: subjectId }),
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
  }

  const totals = shared.totals
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
        if (worst.ok || retryAfterMs > worst.retryAfterMs)
          worst = {
            ok: false,
            window: kinds[i]!,
            limitUsd: e.limit,
            spentUsd,
            retryAfterMs,
            level: "key",
            subjectId: apiKeyId,
            subject: "this API key"
          }
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

  const record = (apiKeyId: string | null, costUsd: number) =>
    Effect.map(Clock.currentTimeMillis, (now) => unsafeRecord(apiKeyId, costUsd, now))

  return { check, checkAbove, record, unsafeRecord, exact: totals.exact, claim, has: (apiKeyId: string) => states.has(apiKeyId) }
}
