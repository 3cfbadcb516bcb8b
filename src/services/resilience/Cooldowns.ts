import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import { SharedState } from "../../platform/state/SharedState.js"
import { ResilienceConfig } from "./ResilienceConfig.js"
import type { Classification, ConnectionHealth, ConnectionRef, FailureInfo, TerminalState } from "./types.js"

/** The backoff doubles up to this many times (3 s × 2^30 is past any cap). */
const MAX_BACKOFF_EXPONENT = 30
export type Availability = {
  readonly ok: boolean
  readonly state: "available" | "cooldown" | TerminalState
  /** End of the cooldown (epoch ms) while cooling down; null otherwise. */
  readonly until: number | null
}

export interface CooldownsShape {
  /** The connection's health at `now`; a cooldown whose time passed reads as available. */
  readonly healthAt: (connectionId: string, now: number) => ConnectionHealth
  /** Whether the connection may take a request at `now`, and why not. */
  readonly availability: (connectionId: string, now: number) => Availability
  /** Records a classified failure (terminal state, cooldown, or just the last error). */
  readonly onFailure: (conn: ConnectionRef, c: Classification, f: FailureInfo) => Effect.Effect<ConnectionHealth>
  /** A request succeeded: every error field, the backoff level and any terminal state cleared. */
  readonly onSuccess: (connectionId: string) => Effect.Effect<void>
  /** `onSuccess`, synchronously (the request path). */
  readonly unsafeOnSuccess: (connectionId: string) => void
  /** Operator reset (one connection or all; also clears terminal states); how many were reset. */
  readonly reset: (connectionId?: string) => Effect.Effect<number>
  /** Credentials changed or the connection was removed: drop its state (the row is reset by its owner). */
  readonly forget: (connectionId: string) => Effect.Effect<void>
  /** Every connection with recorded state, sorted by id. */
  readonly list: Effect.Effect<ReadonlyArray<{ readonly connectionId: string } & ConnectionHealth>>
  /** Writes every pending change now (tests, shutdown). */
  readonly flush: Effect.Effect<void>
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): a connection's health after
 * a change, or that it was cleared. The process that made the change writes the row.
 */
export type CooldownChange =
  | { readonly op: "set"; readonly id: string; readonly health: ConnectionHealth }
  | { readonly op: "clear"; readonly id: string }
  | { readonly op: "clearAll" }

/** Minimum time between two write-behind batches. */
export const WRITE_INTERVAL = "250 millis"

const TEST_STATUSES: ReadonlySet<string> = new Set(["unavailable", "banned", "expired", "credits_exhausted"])

const isTerminal = (s: ConnectionHealth["testStatus"]): s is TerminalState => s !== null && s !== "unavailable"

const HEALTHY: ConnectionHealth = {
  rateLimitedUntil: null,
  testStatus: null,
  lastError: null,
  lastErrorType: null,
  errorCode: null,
  backoffLevel: 0
}

interface Row {
  readonly id: string
  readonly rate_limited_until: number | null
  readonly test_status: string | null
  readonly last_error: string | null
  readonly last_error_type: string | null
  readonly error_code: string | null
  readonly backoff_level: number | null
}

const fromRow = (r: Row): ConnectionHealth | undefined => {
  const testStatus = r.test_status !== null && TEST_STATUSES.has(r.test_status) ? (r.test_status as ConnectionHealth["testStatus"]) : null
  const rateLimitedUntil = r.rate_limited_until === null ? null : Number(r.rate_limited_until)
  const backoffLevel = Number(r.backoff_level ?? 0)
  // Only rows carrying resilience state are loaded (test results of the connection checks are not ours).
  if (testStatus === null && rateLimitedUntil === null && backoffLevel === 0) return undefined
  return {
    rateLimitedUntil,
    testStatus: isTerminal(testStatus) ? testStatus : rateLimitedUntil === null ? null : "unavailable",
    lastError: r.last_error,
    lastErrorType: r.last_error_type,
    errorCode: r.error_code,
    backoffLevel
  }
}

/**
 * Connection cooldowns and terminal states (spec document 1, "Connection cooldown"). In memory
 * and authoritative for the request path; changes reach the `connections` row through a
 * background writer (at most every 250 ms, and once more when the scope closes), so terminal
 * states and active cooldowns survive a restart and a request never waits for a write. Each
 * change also goes to the other gateway processes on the `cooldowns` channel (`SharedState`).
 */
export class Cooldowns extends Context.Tag("gateway/Cooldowns")<Cooldowns, CooldownsShape>() {
  static readonly layer = Layer.scoped(
    Cooldowns,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const config = yield* ResilienceConfig
      const shared = yield* SharedState.orLocal
      const entries = new Map<string, ConnectionHealth>()
      const dirty = new Set<string>()
      const wake = yield* Queue.sliding<void>(1)
      /** One batch at a time: `flush` waits for a batch the worker is writing. */
      const writing = yield* Effect.makeSemaphore(1)

      const rows = yield* sql<Row>`SELECT id, rate_limited_until, test_status, last_error, last_error_type, error_code, backoff_level FROM connections`.pipe(Effect.orDie)
      for (const r of rows) {
        const h = fromRow(r)
        if (h !== undefined) entries.set(r.id, h)
      }

      // Another process's change: its read model is ours too; its row is that process's to write.
      const channel = shared.channel<CooldownChange>("cooldowns", (c) => {
        if (c.op === "set") entries.set(c.id, c.health)
        else if (c.op === "clear") entries.delete(c.id)
        else entries.clear()
      })

      const markDirty = (id: string) => {
        dirty.add(id)
        wake.unsafeOffer(undefined)
      }

      const writeDirty: Effect.Effect<void> = Effect.suspend(() => {
        if (dirty.size === 0) return Effect.void
        const ids = [...dirty]
        dirty.clear()
        const write = Effect.forEach(
          ids,
          (id) => {
            const h = entries.get(id) ?? HEALTHY
            return sql`UPDATE connections SET rate_limited_until = ${h.rateLimitedUntil}, test_status = ${h.testStatus}, last_error = ${h.lastError}, last_error_type = ${h.lastErrorType}, error_code = ${h.errorCode}, backoff_level = ${h.backoffLevel} WHERE id = ${id}`
          },
          { discard: true }
        )
        return sql.withTransaction(write).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              // Not written: try again with the next batch (the row is read fresh then).
              if (Exit.isFailure(exit)) {
                for (const id of ids) dirty.add(id)
                wake.unsafeOffer(undefined)
              }
            })
          ),
          Effect.catchAllCause((cause) => Effect.logWarning("connection state write failed; will retry", cause))
        )
      }).pipe(writing.withPermits(1))

      // Registered before the worker so that it runs after the worker has been interrupted.
      yield* Effect.addFinalizer(() => writeDirty)
      yield* Effect.forkScoped(Effect.forever(Queue.take(wake).pipe(Effect.zipRight(writeDirty), Effect.zipRight(Effect.sleep(WRITE_INTERVAL)))))

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
            const errorFields = {
              lastError: f.message,
              lastErrorType: c.reason,
              errorCode: f.code ?? String(f.status)
            }
            let next: ConnectionHealth
            if (c.terminal !== undefined) {
              next = { ...current, ...errorFields, testStatus: c.terminal, rateLimitedUntil: null }
            } else if (isTerminal(current.testStatus)) {
              // Only new credentials or an operator reset leave a terminal state.
              return current
            } else if (c.cooldown) {
              const settings = config.current().connectionCooldown
              const coolingDown = current.rateLimitedUntil !== null && now < current.rateLimitedUntil
              const retryAfter = c.retryAfterMs === undefined ? undefined : Math.min(c.retryAfterMs, settings.maxCooldownMs)
              if (coolingDown) {
                // A request already in flight when the cooldown began: same backoff level.
                const until = retryAfter === undefined ? current.rateLimitedUntil! : Math.max(current.rateLimitedUntil!, now + retryAfter)
                next = { ...current, ...errorFields, rateLimitedUntil: until, testStatus: "unavailable" }
              } else {
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
                next = {
                  ...current,
                  ...errorFields,
                  rateLimitedUntil: now + length,
                  testStatus: "unavailable",
                  backoffLevel: current.backoffLevel + 1
                }
              }
            } else {
              next = { ...current, ...errorFields }
            }
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
          dirty.delete(id)
          if (channel.shared) channel.publish({ op: "clear", id })
        })

      const list: CooldownsShape["list"] = Effect.map(Clock.currentTimeMillis, (now) =>
        [...entries.keys()].sort().map((connectionId) => ({ connectionId, ...healthAt(connectionId, now) }))
      )

      return { healthAt, availability, onFailure, onSuccess: (id) => Effect.sync(() => unsafeOnSuccess(id)), unsafeOnSuccess, reset, forget, list, flush: writeDirty }
    })
  )
}
