import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { EventBusShape } from "../../platform/events/EventBus.js"
import type { SharedStateShape, TotalEntry } from "../../platform/state/SharedState.js"
import { levelOf } from "../../domain/teams.js"
import { toIso } from "../../platform/store/Db.js"
import type { LevelsShape } from "./Levels.js"
import { type LimitState, limitApplies, roll, view } from "./tokenLimitWindows.js"
import type { LimitTarget, TokenLimitCheck, TokenLimitClaim, TokenLimitsShape, TokenUse } from "./TokenLimits.js"

const NOTHING_HELD = () => {}

/**
 * Token limits on the request path, synchronous and in memory: the check before a request (a
 * full window of an applicable limit refuses it), the tokens after it (announcing a window that
 * fills as `quota.exceeded`, and telling the other processes on the `token-limits` channel), and,
 * with exact shared totals (Redis), the claim that holds a request's estimate across processes.
 * Made once per layer: the channel is opened here.
 */

/** The answer of every request within its limits (checked on every request), made once. */
const WITHIN: TokenLimitCheck = Object.freeze({ ok: true })
export const makeTokenLimitUse = (deps: {
  /** The limits in memory by API key id, oldest first (the store loads them). */
  readonly byKey: ReadonlyMap<string, ReadonlyArray<LimitState>>
  readonly bus: Option.Option<EventBusShape>
  readonly shared: SharedStateShape
  /** The levels above each key (absent: keys' limits only). */
  readonly levels: LevelsShape | undefined
  /** How many subjects above the key level have limits. */
  readonly levelled: () => number
}): Pick<TokenLimitsShape, "check" | "checkAbove" | "record" | "unsafeRecord" | "exact" | "claim" | "has"> => {
  const { byKey, bus, shared, levels, levelled } = deps

  type Worst = { limit: LimitState; retryAfterMs: number } | undefined
  /** The worse of `worst` and `limits`' reached one that resets last. */
  const worstOf = (limits: ReadonlyArray<LimitState>, target: LimitTarget, now: number, reserved: number, worst: Worst): Worst => {
    for (const l of limits) {
      if (!limitApplies(l, target)) continue
      roll(l, now)
      if (l.used + reserved < l.maxTokens) continue
      const retryAfterMs = Math.max(0, l.end - now)
      if (!worst || retryAfterMs > worst.retryAfterMs) worst = { limit: l, retryAfterMs }
    }
    return worst
  }
  const answer = (worst: Worst): TokenLimitCheck => {
    if (!worst) return WITHIN
    const id = worst.limit.apiKeyId
    const level = levelOf(id)
    return {
      ok: false,
      limit: view(worst.limit),
      retryAfterMs: worst.retryAfterMs,
      level,
      subject: level === "key" ? "this API key" : (levels?.label(id) ?? id)
    }
  }
  const worstAbove = (apiKeyId: string, target: LimitTarget, now: number, reserved: number, worst: Worst): Worst => {
    if (levels === undefined || levelled() === 0) return worst
    for (const id of levels.above(apiKeyId)) {
      const limits = byKey.get(id)
      if (limits) worst = worstOf(limits, target, now, reserved, worst)
    }
    return worst
  }

  const check = (apiKeyId: string | null, target: LimitTarget, now: number, reserved = 0): TokenLimitCheck => {
    if (apiKeyId === null) return WITHIN
    const limits = byKey.get(apiKeyId)
    const own = limits ? worstOf(limits, target, now, reserved, undefined) : undefined
    return answer(worstAbove(apiKeyId, target, now, reserved, own))
  }

  const checkAbove = (apiKeyId: string, target: LimitTarget, now: number, reserved = 0): TokenLimitCheck =>
    answer(worstAbove(apiKeyId, target, now, reserved, undefined))

  /** Adds tokens at `now`; `local` as in Budgets (only this process's own use is announced and published). */
  const add = (apiKeyId: string, target: LimitTarget, tokens: number, now: number, local: boolean): void => {
    const limits = byKey.get(apiKeyId)
    // Whether any limit counts these tokens: a key with none, at no level, tells nobody (no message per request).
    let counted = limits !== undefined
    if (levels !== undefined && levelled() > 0)
      for (const id of levels.above(apiKeyId)) {
        const above = byKey.get(id)
        if (above) {
          addTo(above, apiKeyId, target, tokens, now, local)
          counted = true
        }
      }
    if (!counted) return
    if (limits) addTo(limits, apiKeyId, target, tokens, now, local)
    if (local && channel.shared) channel.publish({ apiKeyId, target, tokens, at: now })
    if (local && totals.exact && limits) totals.add(entries(limits, target, now), tokens)
  }

  /** Adds a request's tokens to one subject's limits (the key's own or a level's above it). */
  const addTo = (limits: ReadonlyArray<LimitState>, apiKeyId: string, target: LimitTarget, tokens: number, now: number, local: boolean) => {
    for (const l of limits) {
      if (!limitApplies(l, target)) continue
      roll(l, now)
      l.used += tokens
      if (!l.notified && l.used >= l.maxTokens) {
        l.notified = true
        if (local && Option.isSome(bus)) {
          bus.value.publish("quota.exceeded", {
            source: "token_limit",
            api_key_id: apiKeyId,
            ...(levelOf(l.apiKeyId) === "key" ? {} : { level: levelOf(l.apiKeyId), subject_id: l.apiKeyId }),
            kind: "exceeded",
            limit_id: l.id,
            scope: l.scope,
            provider: l.provider,
            model: l.model,
            window: l.window,
            used_tokens: l.used,
            max_tokens: l.maxTokens,
            window_start: toIso(l.start),
            resets_at: toIso(l.end)
          })
        }
      }
    }
  }

  const totals = shared.totals
  /** The shared totals of the limits that apply to `target` at `now` (each starts from this process's view). */
  const entries = (limits: ReadonlyArray<LimitState>, target: LimitTarget, now: number) => {
    const out: Array<TotalEntry & { readonly state: LimitState }> = []
    for (const l of limits) {
      if (!limitApplies(l, target)) continue
      roll(l, now)
      out.push({ key: `tokens:${l.id}:${l.start}`, limit: l.maxTokens, init: l.used, expireAt: l.end + 3_600_000, state: l })
    }
    return out
  }

  const claim = (apiKeyId: string, target: LimitTarget, estimate: number, now: number): Effect.Effect<TokenLimitClaim | undefined> => {
    const limits = byKey.get(apiKeyId)
    const held = limits === undefined ? [] : entries(limits, target, now)
    if (held.length === 0) return Effect.succeed({ check: { ok: true }, release: NOTHING_HELD })
    const by = Number.isFinite(estimate) && estimate > 0 ? estimate : 0
    return Effect.map(totals.claim(held, by), (claimed): TokenLimitClaim | undefined => {
      if (claimed === undefined) return undefined
      if (claimed.ok) return { check: { ok: true }, release: by === 0 ? NOTHING_HELD : () => totals.add(held, -by) }
      let worst: { limit: LimitState; retryAfterMs: number } | undefined
      held.forEach((e, i) => {
        if ((claimed.values[i] ?? 0) < e.limit - 1e-10) return
        const retryAfterMs = Math.max(0, e.state.end - now)
        if (!worst || retryAfterMs > worst.retryAfterMs) worst = { limit: e.state, retryAfterMs }
      })
      return { check: answer(worst as Worst), release: NOTHING_HELD }
    })
  }

  const channel = shared.channel<TokenUse>("token-limits", (u) => {
    if (Number.isFinite(u.tokens) && u.tokens > 0) add(u.apiKeyId, u.target, u.tokens, u.at, false)
  })

  const unsafeRecord = (apiKeyId: string | null, target: LimitTarget, tokens: number, now: number): void => {
    if (apiKeyId === null || !(tokens > 0) || !Number.isFinite(tokens)) return
    add(apiKeyId, target, tokens, now, true)
  }

  const record = (apiKeyId: string | null, target: LimitTarget, tokens: number) =>
    Effect.map(Clock.currentTimeMillis, (now) => unsafeRecord(apiKeyId, target, tokens, now))

  return {
    check,
    checkAbove,
    record,
    unsafeRecord,
    exact: totals.exact,
    claim,
    has: (apiKeyId: string) => (byKey.get(apiKeyId)?.length ?? 0) > 0
  }
}
