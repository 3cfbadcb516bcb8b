import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { SharedState } from "../../platform/state/SharedState.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import { ResilienceConfig } from "./ResilienceConfig.js"
import type { LockoutView } from "./types.js"

/** A model on a connection, as the lockout layer sees it. */
export interface LockoutRef {
  readonly provider: string
  readonly connectionId: string
  readonly connectionName: string
  readonly model: string
}

/** DELETE /api/resilience/model-cooldowns: one (provider, model[, connection id or name]) or all. */
export type LockoutTarget = { readonly provider: string; readonly model: string; readonly connection?: string } | { readonly all: true }

export interface LockoutsShape {
  /** Whether the model is locked on this connection at `now` (expired entries read unlocked). */
  readonly lockedAt: (
    provider: string,
    connectionId: string,
    model: string,
    now: number
  ) => { readonly locked: boolean; readonly until: number | null }
  /** A failure with the upstream status: locks (or re-locks, escalated) when enabled and the status counts. */
  readonly onFailure: (ref: LockoutRef, status: number, reason: string) => Effect.Effect<LockoutView | undefined>
  /** A success: the failure count halves; at 0 the entry is gone. */
  readonly onSuccess: (ref: LockoutRef) => Effect.Effect<void>
  /** `onSuccess`, synchronously (the request path). */
  readonly unsafeOnSuccess: (ref: LockoutRef) => void
  /** Clears matching entries; answers how many active lockouts were lifted. */
  readonly clear: (target: LockoutTarget) => Effect.Effect<number>
  /** Active lockouts, soonest to expire first. */
  readonly list: Effect.Effect<ReadonlyArray<LockoutView>>
}

interface Entry {
  readonly provider: string
  readonly connectionId: string
  connectionName: string
  readonly model: string
  failures: number
  lastFailureAt: number
  until: number
  reason: string
  status: number
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): an entry after a failure
 * (the newest), a success on a key (its count halves there too), or an operator's clear.
 */
export type LockoutChange =
  | { readonly op: "put"; readonly key: string; readonly entry: Entry }
  | { readonly op: "success"; readonly key: string }
  | { readonly op: "clear"; readonly target: LockoutTarget }

/** Most lockout entries kept in memory. */
export const MAX_ENTRIES = 10_000

const keyOf = (provider: string, connectionId: string, model: string) => `${provider}\u0000${connectionId}\u0000${model}`

/** Not locked: what nearly every check answers, one shared object (no key built while nothing is locked). */
const UNLOCKED: { readonly locked: boolean; readonly until: number | null } = Object.freeze({ locked: false, until: null })

const view = (e: Entry, now: number): LockoutView => ({
  provider: e.provider,
  connection: e.connectionName,
  model: e.model,
  reason: e.reason,
  status: e.status,
  failures: e.failures,
  expiresAt: e.until,
  remainingMs: Math.max(0, e.until - now)
})

/**
 * Model lockouts (spec document 1, "Model lockout"): in process memory, keyed by provider,
 * connection and model; lost on restart. Off unless `modelLockout.enabled`; while disabled no
 * lockout applies. Escalation: `base × 2^(min(failures − 1, maxBackoffSteps))`, capped at
 * `maxCooldownMs`; a failure more than `maxCooldownMs` after the previous one starts over at 1.
 * Each change also goes to the other gateway processes on the `lockouts` channel (`SharedState`).
 */
export class Lockouts extends Context.Tag("gateway/Lockouts")<Lockouts, LockoutsShape>() {
  static readonly layer = Layer.effect(
    Lockouts,
    Effect.gen(function* () {
      const config = yield* ResilienceConfig
      const shared = yield* SharedState.orLocal
      /**
       * Bounded (keys include model ids a client chooses): in order of the last failure, so the
       * entry dropped for a new one is the one that failed longest ago (expired first, as every
       * lockout lasts at most maxCooldownMs).
       */
      const entries = new BoundedMap<string, Entry>({ maxEntries: MAX_ENTRIES })
      const settings = () => config.current().modelLockout

      const matching = (target: LockoutTarget, e: Entry) =>
        "all" in target ||
        (e.provider === target.provider &&
          e.model === target.model &&
          (target.connection === undefined ||
            target.connection === e.connectionId ||
            target.connection.toLowerCase() === e.connectionName.toLowerCase()))

      /** A success: the failure count halves; at 0 the entry is gone. Answers whether there was an entry. */
      const succeed = (key: string): boolean => {
        const e = entries.get(key)
        if (e === undefined) return false
        e.failures = Math.floor(e.failures / 2)
        if (e.failures === 0) entries.delete(key)
        return true
      }

      // Another process's change, applied as is.
      const channel = shared.channel<LockoutChange>("lockouts", (c) => {
        if (c.op === "put") entries.set(c.key, { ...c.entry })
        else if (c.op === "success") succeed(c.key)
        else for (const [key, e] of [...entries]) if (matching(c.target, e)) entries.delete(key)
      })

      const lockedAt: LockoutsShape["lockedAt"] = (provider, connectionId, model, now) => {
        if (entries.size === 0) return UNLOCKED
        const e = entries.get(keyOf(provider, connectionId, model))
        if (e === undefined || !settings().enabled || now >= e.until) return UNLOCKED
        return { locked: true, until: e.until }
      }

      const onFailure: LockoutsShape["onFailure"] = (ref, status, reason) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.sync(() => {
            const s = settings()
            if (!s.enabled || !s.errorCodes.includes(status)) return undefined
            const key = keyOf(ref.provider, ref.connectionId, ref.model)
            const previous = entries.get(key)
            // Escalation window: a failure within maxCooldownMs of the previous one escalates.
            const failures = previous !== undefined && now - previous.lastFailureAt <= s.maxCooldownMs ? previous.failures + 1 : 1
            const duration = Math.min(
              s.useExponentialBackoff ? s.baseCooldownMs * 2 ** Math.min(failures - 1, s.maxBackoffSteps) : s.baseCooldownMs,
              s.maxCooldownMs
            )
            const e: Entry = {
              provider: ref.provider,
              connectionId: ref.connectionId,
              connectionName: ref.connectionName,
              model: ref.model,
              failures,
              lastFailureAt: now,
              until: now + duration,
              reason,
              status
            }
            entries.set(key, e)
            if (channel.shared) channel.publish({ op: "put", key, entry: e })
            return view(e, now)
          })
        )

      const unsafeOnSuccess: LockoutsShape["unsafeOnSuccess"] = (ref) => {
        // Nothing to halve, and nothing to tell the other processes (succeed would answer false).
        if (entries.size === 0) return
        const key = keyOf(ref.provider, ref.connectionId, ref.model)
        if (succeed(key) && channel.shared) channel.publish({ op: "success", key })
      }

      const clear: LockoutsShape["clear"] = (target) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.sync(() => {
            let lifted = 0
            for (const [key, e] of [...entries]) {
              if (!matching(target, e)) continue
              if (now < e.until) lifted += 1
              entries.delete(key)
            }
            if (channel.shared) channel.publish({ op: "clear", target })
            return lifted
          })
        )

      const list: LockoutsShape["list"] = Effect.map(Clock.currentTimeMillis, (now) => {
        if (!settings().enabled) return []
        return [...entries.values()]
          .filter((e) => now < e.until)
          .map((e) => view(e, now))
          .sort(
            (a, b) =>
              a.remainingMs - b.remainingMs ||
              a.provider.localeCompare(b.provider) ||
              a.connection.localeCompare(b.connection) ||
              a.model.localeCompare(b.model)
          )
      })

      return { lockedAt, onFailure, onSuccess: (ref) => Effect.sync(() => unsafeOnSuccess(ref)), unsafeOnSuccess, clear, list }
    })
  )
}
