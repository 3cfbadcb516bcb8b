/**
 * Connection cooldowns and terminal states in memory (spec document 1, "Connection cooldown"):
 * the health a classified failure leaves (the backoff doubling per cooldown, capped), what a
 * success, a reset or new credentials clear, and the same state told to and heard from the other
 * gateway processes (the `cooldowns` channel of `SharedState`).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { SharedStateShape } from "../../platform/state/SharedState.js"
import type { CooldownWriter } from "./cooldownRows.js"
import type { CooldownChange, CooldownsShape } from "./Cooldowns.js"
import type { ResilienceConfigShape } from "./ResilienceConfig.js"
import type { Classification, ConnectionHealth, ConnectionRef, FailureInfo, TerminalState } from "./types.js"

/** The backoff doubles up to this many times (3 s × 2^30 is past any cap). */
const MAX_BACKOFF_EXPONENT = 30

/** Whether a test status is terminal (only new credentials or an operator reset leave it). */
export const isTerminal = (s: ConnectionHealth["testStatus"]): s is TerminalState => s !== null && s !== "unavailable"

/** A connection with nothing recorded. */
export const HEALTHY: ConnectionHealth = {
  rateLimitedUntil: null,
  testStatus: null,
  lastError: null,
  lastErrorType: null,
  errorCode: null,
  backoffLevel: 0
}

/** The health a classified failure at `now` leaves; undefined when it changes nothing (a terminal state stays as it is). */
const afterFailure = (
  current: ConnectionHealth,
  conn: ConnectionRef,
  c: Classification,
  f: FailureInfo,
  now: number,
  config: ResilienceConfigShape
): ConnectionHealth | undefined => {
  const errorFields = {
    lastError: f.message,
    lastErrorType: c.reason,
    errorCode: f.code ?? String(f.status)
  }
  if (c.terminal !== undefined) return { ...current, ...errorFields, testStatus: c.terminal, rateLimitedUntil: null }
  // Only new credentials or an operator reset leave a terminal state.
  if (isTerminal(current.testStatus)) return undefined
  if (!c.cooldown) return { ...current, ...errorFields }
  const settings = config.current().connectionCooldown
  const coolingDown = current.rateLimitedUntil !== null && now < current.rateLimitedUntil
  const retryAfter = c.retryAfterMs === undefined ? undefined : Math.min(c.retryAfterMs, settings.maxCooldownMs)
  if (coolingDown) {
    // A request already in flight when the cooldown began: same backoff level.
    const until = retryAfter === undefined ? current.rateLimitedUntil! : Math.max(current.rateLimitedUntil!, now + retryAfter)
    return { ...current, ...errorFields, rateLimitedUntil: until, testStatus: "unavailable" }
  }
  const oauth = conn.provider.authClass === "oauth"
  const base = oauth ? settings.oauthBaseMs : settings.apiKeyBaseMs
  // The exponent stops at 30 (past every cap): unbounded, 2^1024 is Infinity, and with a
  // base of 0 (cooldowns switched off) 0 × Infinity made the cooldown NaN: the
  // connection was never available again and its views failed to render.
  const backoff = base * 2 ** Math.min(current.backoffLevel, MAX_BACKOFF_EXPONENT)
  // An API-key 429 takes the upstream's wait as given (spec); any other transient
  // failure (5xx, timeout, transport) and OAuth never cool down for less than the backoff.
  const rateLimit = f.status === 429
  const wanted = oauth || !rateLimit ? Math.max(backoff, c.retryAfterMs ?? 0) : (c.retryAfterMs ?? backoff)
  const length = Math.min(wanted, settings.maxCooldownMs)
  return {
    ...current,
    ...errorFields,
    rateLimitedUntil: now + length,
    testStatus: "unavailable",
    backoffLevel: current.backoffLevel + 1
  }
}

export interface CooldownStateDeps {
  /** The health by connection id (loaded from the rows at start). */
  readonly entries: Map<string, ConnectionHealth>
  readonly config: ResilienceConfigShape
  /** Where the `cooldowns` channel is opened (once, here). */
  readonly shared: SharedStateShape
  /** Where each change is queued for its row. */
  readonly writer: CooldownWriter
}

/** The reads (`healthAt`, `availability`, `list`) and changes (failure, success, reset, forget) of the in-memory state. */
export const makeCooldownState = ({ entries, config, shared, writer }: CooldownStateDeps) => {
  const { markDirty } = writer

  // Another process's change: its read model is ours too; its row is that process's to write.
  const channel = shared.channel<CooldownChange>("cooldowns", (c) => {
    if (c.op === "set") entries.set(c.id, c.health)
    else if (c.op === "clear") entries.delete(c.id)
    else entries.clear()
  })

  const healthAt: CooldownsShape["healthAt"] = (id, now) => {
    const h = entries.get(id)
    if (h === undefined) return HEALTHY
    if (h.rateLimitedUntil !== null && now >= h.rateLimitedUntil) return { ...h, rateLimitedUntil: null, testStatus: null }
    return h
  }

  const availability: CooldownsShape["availability"] = (id, now) => {
    const h = healthAt(id, now)
    if (isTerminal(h.testStatus)) return { ok: false, state: h.testStatus, until: null }
    if (h.rateLimitedUntil !== null) return { ok: false, state: "cooldown", until: h.rateLimitedUntil }
    return { ok: true, state: "available", until: null }
  }

  const onFailure: CooldownsShape["onFailure"] = (conn, c, f) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        const current = entries.get(conn.id) ?? HEALTHY
        const next = afterFailure(current, conn, c, f, now, config)
        if (next === undefined) return current
        entries.set(conn.id, next)
        markDirty(conn.id)
        if (channel.shared) channel.publish({ op: "set", id: conn.id, health: next })
        return healthAt(conn.id, now)
      })
    )

  const unsafeOnSuccess: CooldownsShape["unsafeOnSuccess"] = (id) => {
    if (!entries.delete(id)) return
    markDirty(id)
    if (channel.shared) channel.publish({ op: "clear", id })
  }

  const reset: CooldownsShape["reset"] = (id) =>
    Effect.sync(() => {
      if (id !== undefined) {
        if (!entries.delete(id)) return 0
        markDirty(id)
        if (channel.shared) channel.publish({ op: "clear", id })
        return 1
      }
      const ids = [...entries.keys()]
      entries.clear()
      for (const i of ids) markDirty(i)
      if (channel.shared) channel.publish({ op: "clearAll" })
      return ids.length
    })

  const forget: CooldownsShape["forget"] = (id) =>
    Effect.sync(() => {
      entries.delete(id)
      writer.drop(id)
      if (channel.shared) channel.publish({ op: "clear", id })
    })

  const list: CooldownsShape["list"] = Effect.map(Clock.currentTimeMillis, (now) =>
    [...entries.keys()].sort().map((connectionId) => ({ connectionId, ...healthAt(connectionId, now) }))
  )

  return { healthAt, availability, onFailure, unsafeOnSuccess, reset, forget, list }
}
