/**
 * Whether the store takes writes, as the writes say, and the rows held in memory (bounded) until it does again; synchronous:
 * the request path calls `hold` once per row (docs/resilience.md#when-the-store-fails).
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import { positiveInteger } from "../config/AppConfig.js"
import { unavailableCause } from "./dialect.js"

export const BACKLOG_ENV = "GATEWAY_STORE_BACKLOG_MAX_ROWS"

/**
 * 100,000 rows. A usage row held in memory is about 1 KB (21 columns; the cache entries, which
 * carry answers, are rarer), so the bound is ~100 MB at worst; a gateway process serving ~1,500
 * requests a second (docs/performance.md) fills it in a little over a minute of outage, and a
 * typical one (tens a second) in an hour. Past that memory would grow without end.
 */
export const DEFAULT_BACKLOG_MAX_ROWS = 100_000

/** A dropped row is logged at most this often per table (each drop is counted). */
const DROP_LOG_EVERY_MS = 60_000

export interface StoreHealthShape {
  /** False from a write that failed because the store is unavailable until a write goes through. */
  readonly up: () => boolean
  /** Why the store is unavailable (one line), while it is. */
  readonly cause: () => string | undefined
  /**
   * A statement failed: answers the cause when the store is unavailable (the store then reads as
   * down, logged once per outage), undefined when it failed for another reason (a bad row, a bug).
   */
  readonly failed: (error: unknown) => string | undefined
  /** A write went through: the store is up (logged once after an outage). */
  readonly succeeded: () => void
  /**
   * Room for one more row of `table` in memory: true and counted as held, or false (the bound is
   * reached: the row is dropped, counted and logged).
   */
  readonly hold: (table: string) => boolean
  /** `n` held rows were written (or given up on for a reason of their own). */
  readonly release: (n: number) => void
  /** Rows held now (queued, being written or waiting for the store). */
  readonly held: () => number
  /** The bound (GATEWAY_STORE_BACKLOG_MAX_ROWS). */
  readonly max: number
  /** Rows dropped since start, per table. */
  readonly dropped: () => ReadonlyMap<string, number>
  /**
   * Logs a background job's failure as a warning, unless it failed because the store is
   * unavailable: that is said once per outage (here), not by every job every round.
   */
  readonly warn: (message: string, cause: Cause.Cause<unknown>) => Effect.Effect<void>
  /** Counts `n` rows of `table` as dropped (a bad row, a shutdown with the store still down), and logs `why` (at most once a minute per
   * table). */
  readonly drop: (table: string, n: number, why: string | undefined) => void
}

export class StoreHealth extends Context.Tag("gateway/StoreHealth")<StoreHealth, StoreHealthShape>() {
  /** Reads GATEWAY_STORE_BACKLOG_MAX_ROWS. */
  static readonly layer = Layer.effect(
    StoreHealth,
    Effect.flatMap(positiveInteger(BACKLOG_ENV, "rows", DEFAULT_BACKLOG_MAX_ROWS), (max) => makeStoreHealth(max))
  )
  /** A given bound (tests). */
  static readonly layerTest = (max = DEFAULT_BACKLOG_MAX_ROWS) => Layer.effect(StoreHealth, makeStoreHealth(max))
}

export const makeStoreHealth = (max: number): Effect.Effect<StoreHealthShape> =>
  Effect.map(Effect.runtime<never>(), (runtime) => {
    const log = Runtime.runFork(runtime)
    let down: string | undefined
    let downSince = 0
    let held = 0
    const dropped = new Map<string, number>()
    const lastDropLog = new Map<string, number>()

    const drop = (table: string, n: number, why: string | undefined) => {
      dropped.set(table, (dropped.get(table) ?? 0) + n)
      if (why === undefined) return
      const now = Date.now()
      if (now - (lastDropLog.get(table) ?? 0) < DROP_LOG_EVERY_MS) return
      lastDropLog.set(table, now)
      log(Effect.logError(`store: dropped ${table} rows (${dropped.get(table)} since start): ${why}`))
    }

    const failed = (error: unknown): string | undefined => {
      const cause = unavailableCause(error)
      if (cause === undefined) return undefined
      if (down === undefined) {
        downSince = Date.now()
        log(
          Effect.logWarning(
            `store: ${cause}; requests go on, rows are kept in memory (at most ${max}, ${BACKLOG_ENV}) and written when it is back`
          )
        )
      }
      down = cause
      return cause
    }

    return {
      up: () => down === undefined,
      cause: () => down,
      failed,
      warn: (message, cause) => {
        for (const e of [...Cause.failures(cause), ...Cause.defects(cause)]) if (failed(e) !== undefined) return Effect.void
        return Effect.logWarning(message, cause)
      },
      succeeded: () => {
        if (down === undefined) return
        down = undefined
        log(
          Effect.logInfo(
            `store: writes go through again after ${Math.round((Date.now() - downSince) / 100) / 10} s; ${held} rows held are being written`
          )
        )
      },
      hold: (table) => {
        if (held >= max) {
          drop(table, 1, `${held} rows are already waiting for the store (${BACKLOG_ENV}=${max})${down ? `: ${down}` : ""}`)
          return false
        }
        held++
        return true
      },
      release: (n) => {
        held = Math.max(0, held - n)
      },
      held: () => held,
      max,
      dropped: () => dropped,
      drop
    } satisfies StoreHealthShape
  })
