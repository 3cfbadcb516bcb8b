import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { AccountingShape } from "./Accounting.js"
import type { BudgetCheck, BudgetsShape } from "./Budgets.js"
import { type Held, NO_RESERVATION, type Reservation } from "./reservations.js"
import type { TokenLimitCheck, TokenLimitsShape } from "./TokenLimits.js"

const NOT_HELD = { budget: { ok: true } as BudgetCheck, hold: NO_RESERVATION }

/** What a request without a key is answered (budget, token limits), made once. */
const NO_KEY_BUDGET: BudgetCheck = Object.freeze({ ok: true })
const NO_KEY_LIMIT: TokenLimitCheck = Object.freeze({ ok: true })

/**
 * A request's admission by its key's budget and token limits, at the Clock's time, with what the
 * key's other requests in flight hold counted as spent: in this process's memory (`budget`,
 * `tokenLimit`), or, with exact shared totals (Redis), as holds taken atomically across processes
 * (`admit`, then `claimTokens` per target), released with the request's reservation. Made once
 * per layer.
 */
export const makeAdmission = (deps: {
  readonly budgets: BudgetsShape
  readonly limits: TokenLimitsShape
  readonly clock: Clock.Clock
  /** What each key's requests in flight hold (reservations.ts). */
  readonly held: ReadonlyMap<string, Held>
  readonly reserve: (apiKeyId: string | null) => Reservation
}): Pick<AccountingShape, "budget" | "exact" | "holdsShared" | "admit" | "reserve" | "tokenLimit" | "claimTokens"> => {
  const { budgets, limits, clock, held, reserve } = deps
  /** Holds made by `admit`: what their release gives back to the shared totals. */
  const sharedHolds = new WeakMap<Reservation, Array<() => void>>()

  return {
    budget: (apiKeyId) =>
      apiKeyId === null ? NO_KEY_BUDGET : budgets.check(apiKeyId, clock.unsafeCurrentTimeMillis(), held.get(apiKeyId)?.costUsd ?? 0),
    reserve,
    exact: budgets.exact,
    holdsShared: (apiKeyId) => apiKeyId !== null && (budgets.has(apiKeyId) || limits.has(apiKeyId)),
    admit: (apiKeyId) => {
      if (apiKeyId === null) return Effect.succeed(NOT_HELD)
      const now = clock.unsafeCurrentTimeMillis()
      const local = reserve(apiKeyId)
      // Shared holds taken for this request (its budget windows, then token limits per target).
      const releases: Array<() => void> = []
      const hold: Reservation = {
        costUsd: local.costUsd,
        tokens: local.tokens,
        release: () => {
          local.release()
          for (const r of releases.splice(0)) r()
        }
      }
      sharedHolds.set(hold, releases)
      return Effect.map(budgets.claim(apiKeyId, local.costUsd, now), (claimed) => {
        // The shared store unreachable: this process's view, as with one process.
        if (claimed === undefined)
          return { budget: budgets.check(apiKeyId, now, Math.max(0, (held.get(apiKeyId)?.costUsd ?? 0) - local.costUsd)), hold }
        releases.push(claimed.release)
        // The levels above the key (its user, team(s), the organisation): this process's view of their spend.
        return { budget: claimed.check.ok ? budgets.checkAbove(apiKeyId, now, local.costUsd) : claimed.check, hold }
      })
    },
    claimTokens: (apiKeyId, target, own) => {
      if (apiKeyId === null) return Effect.succeed({ ok: true } as TokenLimitCheck)
      const releases = own === undefined ? undefined : sharedHolds.get(own)
      const now = clock.unsafeCurrentTimeMillis()
      const localCheck = () => limits.check(apiKeyId, target, now, Math.max(0, (held.get(apiKeyId)?.tokens ?? 0) - (own?.tokens ?? 0)))
      if (releases === undefined) return Effect.sync(localCheck)
      return Effect.map(limits.claim(apiKeyId, target, own!.tokens, now), (claimed) => {
        if (claimed === undefined) return localCheck()
        releases.push(claimed.release)
        return claimed.check.ok ? limits.checkAbove(apiKeyId, target, now, own!.tokens) : claimed.check
      })
    },
    tokenLimit: (apiKeyId, target, own) =>
      apiKeyId === null
        ? NO_KEY_LIMIT
        : limits.check(
            apiKeyId,
            target,
            clock.unsafeCurrentTimeMillis(),
            Math.max(0, (held.get(apiKeyId)?.tokens ?? 0) - (own?.tokens ?? 0))
          )
  }
}
