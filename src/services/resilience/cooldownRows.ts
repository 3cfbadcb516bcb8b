/**
 * The resilience columns of the `connections` rows: read into memory at start (rows carrying
 * resilience state only), and each change written behind, in batches at most every
 * WRITE_INTERVAL, so a request never waits for a write.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import { HEALTHY, isTerminal } from "./cooldownState.js"
import type { ConnectionHealth } from "./types.js"

/** Minimum time between two write-behind batches. */
export const WRITE_INTERVAL = "250 millis"

const TEST_STATUSES: ReadonlySet<string> = new Set(["unavailable", "banned", "expired", "credits_exhausted"])

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

/** The stored health of every connection that has some, into `entries` (the layer's start). */
export const loadHealth = (sql: SqlClient.SqlClient, entries: Map<string, ConnectionHealth>): Effect.Effect<void> =>
  Effect.map(
    sql<Row>`SELECT id, rate_limited_until, test_status, last_error, last_error_type, error_code, backoff_level FROM connections`.pipe(
      Effect.orDie
    ),
    (rows) => {
      for (const r of rows) {
        const h = fromRow(r)
        if (h !== undefined) entries.set(r.id, h)
      }
    }
  )

export interface CooldownWriterDeps {
  readonly sql: SqlClient.SqlClient
  /** The in-memory health, authoritative: a row is written from it as it is when its batch goes. */
  readonly entries: ReadonlyMap<string, ConnectionHealth>
}

export interface CooldownWriter {
  /** The connection's row is to be written with the next batch (synchronous). */
  readonly markDirty: (id: string) => void
  /** The connection's pending write is dropped (its state was forgotten; its owner resets the row). */
  readonly drop: (id: string) => void
  /** Writes every pending change now, one batch at a time (a failed batch is retried with the next). */
  readonly writeDirty: Effect.Effect<void>
  /** The background writer: a batch when woken, then at least WRITE_INTERVAL before the next. */
  readonly worker: Effect.Effect<never>
}

/** The write-behind of changed rows. */
export const makeCooldownWriter = ({ sql, entries }: CooldownWriterDeps): Effect.Effect<CooldownWriter> =>
  Effect.gen(function* () {
    const dirty = new Set<string>()
    const wake = yield* Queue.sliding<void>(1)
    /** One batch at a time: `flush` waits for a batch the worker is writing. */
    const writing = yield* Effect.makeSemaphore(1)

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

    const worker = Effect.forever(Queue.take(wake).pipe(Effect.zipRight(writeDirty), Effect.zipRight(Effect.sleep(WRITE_INTERVAL))))

    const drop = (id: string) => {
      dirty.delete(id)
    }

    return { markDirty, drop, writeDirty, worker } satisfies CooldownWriter
  })
