import {
  TOKEN_LIMIT_SCOPES,
  TOKEN_LIMIT_WINDOWS,
  type TokenLimitScope,
  type TokenLimitView,
  type TokenLimitWindow
} from "../../domain/accounting.js"
import { toIso } from "../../platform/store/Db.js"
import type { LimitTarget } from "./TokenLimits.js"
import { fixedWindow } from "./windows.js"

/**
 * A token limit in memory (docs/accounting.md, "Token limits"): what it applies to, its current
 * window's used tokens, moved on when the window ends, and the view the API answers. The store
 * (tokenLimitStore.ts) loads and writes them; the request path (tokenLimitUse.ts) checks and adds
 * to them.
 */

export interface Row {
  readonly id: string
  readonly api_key_id: string
  readonly scope: string
  readonly target: string | null
  readonly max_tokens: number
  readonly window: string
  readonly created_at: number
}

export interface LimitState {
  readonly id: string
  readonly apiKeyId: string
  readonly scope: TokenLimitScope
  readonly provider: string | null
  readonly model: string | null
  readonly maxTokens: number
  readonly window: TokenLimitWindow
  readonly createdAt: number
  start: number
  end: number
  used: number
  /** `quota.exceeded` was published for this window (or the window was already full at load). */
  notified: boolean
}

/** A limit as stored, before its window is loaded. */
export type LimitBase = Omit<LimitState, "start" | "end" | "used" | "notified">

/**
 * Whether a limit applies to a request. Provider: the target's provider id (case-insensitive).
 * Model (case-sensitive, exact): the model as the client wrote it, `<provider>/<model>` of the
 * target, or the target's bare model id.
 */
export const limitApplies = (
  limit: { readonly scope: TokenLimitScope; readonly provider: string | null; readonly model: string | null },
  target: LimitTarget
): boolean => {
  switch (limit.scope) {
    case "global":
      return true
    case "provider":
      return limit.provider !== null && limit.provider.toLowerCase() === target.provider.toLowerCase()
    case "model":
      return (
        limit.model !== null &&
        (limit.model === target.requestedModel ||
          limit.model === `${target.provider}/${target.model}` ||
          limit.model === target.model ||
          (target.connection !== undefined && limit.model === `${target.connection}/${target.model}`))
      )
  }
}

/** A stored row's limit (an unknown scope is global, an unknown window a day). */
export const fromRow = (row: Row): LimitBase => {
  const scope = (TOKEN_LIMIT_SCOPES as ReadonlyArray<string>).includes(row.scope) ? (row.scope as TokenLimitScope) : "global"
  const window = (TOKEN_LIMIT_WINDOWS as ReadonlyArray<string>).includes(row.window) ? (row.window as TokenLimitWindow) : "day"
  return {
    id: row.id,
    apiKeyId: row.api_key_id,
    scope,
    provider: scope === "provider" ? row.target : null,
    model: scope === "model" ? row.target : null,
    maxTokens: row.max_tokens,
    window,
    createdAt: row.created_at
  }
}

/** Moves a limit's window on when `now` passed its end: the new window starts from 0. */
export const roll = (l: LimitState, now: number) => {
  if (now < l.end) return
  const w = fixedWindow(l.window, now)
  l.start = w.start
  l.end = w.end
  l.used = 0
  l.notified = false
}

/** A limit as the API answers it. */
export const view = (l: LimitState): TokenLimitView => ({
  id: l.id,
  apiKeyId: l.apiKeyId,
  scope: l.scope,
  provider: l.provider,
  model: l.model,
  maxTokens: l.maxTokens,
  window: l.window,
  usedTokens: l.used,
  windowStart: toIso(l.start)!,
  resetsAt: toIso(l.end)!,
  createdAt: toIso(l.createdAt)!
})
