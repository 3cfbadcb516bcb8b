import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Cause from "effect/Cause"
import { isBusy, transaction } from "../../platform/store/dialect.js"
import { StoreHealth } from "../../platform/store/StoreHealth.js"

/**
 * The database side of webhook delivery, batched: calls record synchronously and one fiber writes what accumulated
 * within LINGER in one transaction; a delivery finished before its row was written is never written (docs/webhooks.md#delivery).
 */

/** A pending delivery's row. */
export interface DeliveryRow {
  readonly id: string
  readonly webhook_id: string
  readonly event: string
  readonly body: string
  readonly created_at: number
  readonly seq: number
}

/** What one webhook's row gets at the next write. */
interface HookChange {
  lastTriggeredAt: number | null
  lastStatus: number | null
  /** A delivery succeeded since the last write: failure_count restarts from `failures`. */
  reset: boolean
  /** Failed deliveries since the last write (after the last success when `reset`). */
  failures: number
}

export interface Bookkeeping {
  /** A delivery accepted: its row is written at the next write, unless it is finished first. */
  readonly persist: (row: DeliveryRow) => void
  /** A delivery finished (delivered, finally failed, or dropped): its row goes. */
  readonly finished: (id: string) => void
  /** An attempt's time and status (`last_triggered_at`, `last_status`). */
  readonly attempted: (webhookId: string, at: number, status: number) => void
  /** A delivery's end for the failure count: success resets it, failure adds one. */
  readonly counted: (webhookId: string, ok: boolean) => void
  /** A removed webhook: whatever is buffered for it is forgotten. */
  readonly forget: (webhookId: string) => void
  /**
   * Writes everything recorded so far (management reads and writes call it first: they see every
   * delivery's effect). While the store is unavailable it is kept, and written once it is back.
   */
  readonly flush: Effect.Effect<void>
}

/**
 * How long the writer waits for more once something was recorded. Also the durability bound of
 * a kill -9: a delivery accepted within the last LINGER (plus the write) is not yet on disk. A
 * graceful stop writes everything (the layer's finalizer, after the workers stopped).
 */
export const LINGER = "20 millis"
/** Rows per INSERT and ids per DELETE (6 parameters a row stays far under SQLite's bound). */
const CHUNK = 500

const chunks = <A>(xs: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < xs.length; i += CHUNK) out.push(xs.slice(i, i + CHUNK))
  return out
}

export const makeBookkeeping = (disableAfter: number): Effect.Effect<Bookkeeping, never, SqlClient.SqlClient | StoreHealth | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const health = yield* StoreHealth
    let inserts = new Map<string, DeliveryRow>()
    let deletes = new Set<string>()
    let hooks = new Map<string, HookChange>()
    const dirty = yield* Effect.makeLatch(false)
    const lock = yield* Effect.makeSemaphore(1)

    const changeOf = (id: string): HookChange => {
      let c = hooks.get(id)
      if (!c) hooks.set(id, (c = { lastTriggeredAt: null, lastStatus: null, reset: false, failures: 0 }))
      return c
    }
    const touch = () => dirty.unsafeOpen()

    const write = (rows: ReadonlyArray<DeliveryRow>, ids: ReadonlyArray<string>, changes: ReadonlyArray<readonly [string, HookChange]>) =>
      Effect.gen(function* () {
        for (const part of chunks(rows))
          yield* sql`INSERT INTO webhook_deliveries ${sql.insert(part as Array<DeliveryRow & Record<string, string | number>>)}`
        for (const part of chunks(ids)) yield* sql`DELETE FROM webhook_deliveries WHERE ${sql.in("id", part)}`
        for (const [id, c] of changes) {
          const count = c.reset ? sql`${c.failures}` : sql`failure_count + ${c.failures}`
          yield* sql`UPDATE webhooks SET
            last_triggered_at = COALESCE(${c.lastTriggeredAt}, last_triggered_at),
            last_status = COALESCE(${c.lastStatus}, last_status),
            failure_count = ${count},
            enabled = CASE WHEN ${count} >= ${disableAfter} THEN 0 ELSE enabled END
            WHERE id = ${id}`
        }
      })

    /**
     * What a write the store refused had taken goes back, under what was recorded since: a
     * delivery finished meanwhile is neither inserted nor deleted; the hooks' changes add up.
     */
    const giveBack = (
      rows: ReadonlyArray<DeliveryRow>,
      ids: ReadonlyArray<string>,
      changes: ReadonlyArray<readonly [string, HookChange]>
    ) => {
      const back = new Map<string, DeliveryRow>()
      for (const row of rows) {
        if (deletes.delete(row.id)) health.release(1)
        else back.set(row.id, row)
      }
      for (const [id, row] of inserts) back.set(id, row)
      inserts = back
      for (const id of ids) deletes.add(id)
      for (const [id, older] of changes) {
        const newer = hooks.get(id)
        if (newer === undefined) hooks.set(id, older)
        else {
          newer.lastTriggeredAt ??= older.lastTriggeredAt
          newer.lastStatus ??= older.lastStatus
          if (!newer.reset) {
            newer.reset = older.reset
            newer.failures += older.failures
          }
        }
      }
    }

    /** Writes what is buffered: false when the store was unavailable (all of it is kept for the next try). */
    const writeBuffered: Effect.Effect<boolean> = lock.withPermits(1)(
      Effect.uninterruptible(
        Effect.suspend(() => {
          dirty.unsafeClose()
          if (inserts.size === 0 && deletes.size === 0 && hooks.size === 0) return Effect.succeed(true)
          const rows = [...inserts.values()]
          const ids = [...deletes]
          const changes = [...hooks]
          inserts = new Map()
          deletes = new Set()
          hooks = new Map()
          return transaction(sql, write(rows, ids, changes)).pipe(
            // Another process writing passes; anything else is logged: deliveries go on in memory.
            Effect.retry({ schedule: Schedule.exponential("20 millis").pipe(Schedule.intersect(Schedule.recurs(6))), while: isBusy }),
            Effect.map(() => {
              health.release(rows.length)
              health.succeeded()
              return true
            }),
            Effect.catchAllCause((cause) => {
              // The store is down (said once, by StoreHealth): everything is kept and tried again.
              if (health.failed(Cause.squash(cause)) !== undefined) {
                giveBack(rows, ids, changes)
                return Effect.succeed(false)
              }
              health.release(rows.length)
              return Effect.as(
                Effect.logWarning(
                  `webhooks: writing delivery bookkeeping failed (${rows.length} new, ${ids.length} finished, ${changes.length} webhooks)`,
                  cause
                ),
                true
              )
            })
          )
        })
      )
    )
    const flush: Effect.Effect<void> = Effect.asVoid(writeBuffered)

    // Registered before the writer starts: on shutdown the writer stops first, then what is left is written.
    yield* Effect.addFinalizer(() => flush)
    // While the store is unavailable, what is buffered is tried again on RETRY (100 ms doubling to 2 s), not every LINGER.
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        let retry = yield* Schedule.driver(RETRY)
        for (;;) {
          yield* dirty.await
          yield* Effect.sleep(LINGER)
          if (yield* writeBuffered) retry = yield* Schedule.driver(RETRY)
          else {
            yield* Effect.orDie(retry.next(undefined))
            touch()
          }
        }
      })
    )

    return {
      persist: (row) => {
        // Held in memory until written: within GATEWAY_STORE_BACKLOG_MAX_ROWS (past it the row is
        // dropped and counted; the delivery itself goes on).
        if (!health.hold("webhook_deliveries")) return
        inserts.set(row.id, row)
        touch()
      },
      finished: (id) => {
        // Not written yet: it never will be.
        if (inserts.delete(id)) health.release(1)
        else deletes.add(id)
        touch()
      },
      attempted: (webhookId, at, status) => {
        const c = changeOf(webhookId)
        c.lastTriggeredAt = at
        c.lastStatus = status
        touch()
      },
      counted: (webhookId, ok) => {
        const c = changeOf(webhookId)
        if (ok) {
          c.reset = true
          c.failures = 0
        } else c.failures++
        touch()
      },
      forget: (webhookId) => {
        for (const [id, row] of inserts) {
          if (row.webhook_id !== webhookId) continue
          inserts.delete(id)
          health.release(1)
        }
        hooks.delete(webhookId)
      },
      flush
    } satisfies Bookkeeping
  })

/** What the store could not take is tried again after 100 ms, doubling, at most 2 s apart. */
const RETRY = Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("2 seconds")))
