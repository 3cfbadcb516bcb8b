import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as crypto from "node:crypto"
import * as os from "node:os"
import { IdMap } from "../../kernel/churn.js"
import { StoreHealth } from "../../platform/store/StoreHealth.js"
import { transaction } from "../../platform/store/dialect.js"
import { SqliteWriterThread } from "../../platform/store/SqliteWriterThread.js"

/** A request the server is serving, as the write-ahead sees it. */
export interface InFlightRequest {
  readonly requestId: string
  /** Epoch ms. */
  readonly startedAt: number
  /** The usage row's endpoint (`chat.completions`, `embeddings`, ...). */
  readonly endpoint: string
  /** Known once the request is authenticated; read when the row is written. */
  readonly apiKeyId: string | null
}

export interface InFlightShape {
  /** A request began: from WRITE_AHEAD_AFTER_MS on, it is on disk until it ends. Synchronous. */
  readonly begin: (r: InFlightRequest) => void
  /** The request ended (answered, failed or its client left); its usage row is on its way. Synchronous. */
  readonly end: (requestId: string) => void
  /**
   * Waits until no request is in flight: every request that began has ended and queued its usage
   * row (a flush of the usage writer then puts them on disk). A request's client can have its
   * answer a moment before the request ends: this is the wait that covers that moment.
   */
  readonly idle: Effect.Effect<void>
  /** The ids of the requests in flight now. */
  readonly running: () => ReadonlyArray<string>
}

/** A request in flight this long is written ahead. */
export const WRITE_AHEAD_AFTER_MS = 50
/**
 * The shortest wait between two looks of the write-ahead while something is in flight (a write
 * that failed is tried again this often); a request is on disk at most this plus
 * WRITE_AHEAD_AFTER_MS (and a write) after it began.
 */
const SWEEP_MIN_MS = 25
/**
 * How long an ended request's write-ahead row stays: past the usage writer's linger and write,
 * so that at every moment one of the two is on disk.
 */
const KEEP_AFTER_END_MS = 1_000

/** The status of a usage row made from a request a crash interrupted: no answer was given. */
export const INTERRUPTED_STATUS = 0
export const INTERRUPTED_ERROR = "interrupted: the gateway process stopped before this request ended (recorded at the next start)"

/** This process, as its write-ahead rows name it: host, pid, and a random part (pids are reused). */
const instanceId = (): string => `${os.hostname()}|${process.pid}|${crypto.randomBytes(4).toString("hex")}`

/** Whether the process that wrote rows as `instance` may still run: only a process on this host can be asked. */
const mayBeAlive = (instance: string): boolean => {
  const [host, pid] = instance.split("|")
  if (host !== os.hostname()) return true
  const n = Number(pid)
  if (!Number.isInteger(n) || n <= 0) return false
  try {
    process.kill(n, 0)
    return true
  } catch {
    // ESRCH: gone. EPERM: a process of another user has that pid now, not a gateway of ours.
    return false
  }
}

/**
 * The usage write-ahead: a small `usage_inflight` row for each request running longer than WRITE_AHEAD_AFTER_MS, turned
 * into an interrupted usage row at the next start if the process died, so a kill -9 loses only the last ~100 ms of
 * requests (docs/accounting.md#usage-rows-and-retention).
 */
export class InFlight extends Context.Tag("gateway/InFlight")<InFlight, InFlightShape>() {
  static readonly layer = Layer.scoped(
    InFlight,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const health = yield* StoreHealth
      const instance = instanceId()

      // What earlier processes left: theirs if they are gone.
      const left = yield* sql<{ instance: string }>`SELECT DISTINCT instance FROM usage_inflight`.pipe(Effect.orDie)
      for (const { instance: other } of left) {
        if (mayBeAlive(other)) continue
        yield* sql
          .withTransaction(
            Effect.zipRight(
              sql`INSERT INTO usage (ts, request_id, api_key_id, endpoint, stream, status, error)
                SELECT f.ts, f.request_id, f.api_key_id, f.endpoint, 0, ${INTERRUPTED_STATUS}, ${INTERRUPTED_ERROR} FROM usage_inflight f
                WHERE f.instance = ${other} AND NOT EXISTS (SELECT 1 FROM usage u WHERE u.ts >= f.ts AND u.request_id = f.request_id)`,
              sql`DELETE FROM usage_inflight WHERE instance = ${other}`
            )
          )
          .pipe(Effect.orDie)
        yield* Effect.logWarning(
          `recorded the requests a previous gateway process (${other.split("|").slice(0, 2).join(" pid ")}) left unfinished as interrupted usage rows`
        )
      }

      interface Entry {
        readonly r: InFlightRequest
        written: boolean
      }
      // Requests come and go at their own pace: an `IdMap`, not a `Map` (src/kernel/churn.ts).
      const live = new IdMap<Entry>()
      let ended: Array<{ readonly id: string; readonly at: number }> = []
      /** Waiters for `idle`, woken when the last request in flight ends. */
      let waiters: Array<() => void> = []

      // SQLite: on the writer thread (src/platform/store/SqliteWriterThread.ts), so a request never waits
      // for the write-ahead's statements; PostgreSQL's are asynchronous already.
      const thread = Option.getOrUndefined(yield* Effect.serviceOption(SqliteWriterThread))?.writer
      const write = (
        rows: ReadonlyArray<Record<string, string | number | null>>,
        done: ReadonlyArray<string>
      ): Effect.Effect<void, unknown> =>
        thread !== undefined && thread.alive()
          ? Effect.tryPromise(() =>
              thread.write(
                rows.map((row) => ({ table: "usage_inflight", row })),
                done.length > 0 ? [{ table: "usage_inflight", column: "request_id", values: done }] : undefined
              )
            ).pipe(Effect.flatMap((r) => (r.unavailable !== undefined ? Effect.fail(r.unavailable) : Effect.void)))
          : transaction(
              sql,
              Effect.all(
                [
                  rows.length > 0 ? sql`INSERT INTO usage_inflight ${sql.insert(rows)}` : Effect.void,
                  done.length > 0 ? sql`DELETE FROM usage_inflight WHERE request_id IN ${sql.in(done)}` : Effect.void
                ],
                { discard: true }
              )
            )

      /**
       * With nothing in flight and nothing to remove, the sweep sleeps until a request could be
       * due: a request that begins then arms a plain timer, and the last request in flight to end
       * before it fires disarms it. A gateway serving a request now and then (most end within
       * WRITE_AHEAD_AFTER_MS) wakes no fiber for them: woken at `begin`, the sweep ran in the
       * request's own turn, before its upstream request was written (docs/performance.md, "A
       * request after a pause"). Woken, the sweep's loop first waits `nextSweepIn` (at least
       * SWEEP_MIN_MS), so the timer fires that much before the request is due: the request is
       * written ahead when it is WRITE_AHEAD_AFTER_MS old, as when the sweep was woken at `begin`.
       */
      let wake: (() => void) | undefined
      let due: ReturnType<typeof setTimeout> | undefined
      const asleep = Effect.async<void>((resume) => {
        if (live.size > 0) return resume(Effect.void)
        wake = () => resume(Effect.void)
        return Effect.sync(() => {
          wake = undefined
        })
      })
      const wakeSweep = () => {
        due = undefined
        const w = wake
        if (w === undefined) return
        wake = undefined
        w()
      }

      const sweep = Effect.suspend(() => {
        const now = Date.now()
        const rows: Array<Record<string, string | number | null>> = []
        for (const e of live.values()) {
          if (e.written || now - e.r.startedAt < WRITE_AHEAD_AFTER_MS) continue
          e.written = true
          rows.push({ request_id: e.r.requestId, ts: e.r.startedAt, instance, api_key_id: e.r.apiKeyId, endpoint: e.r.endpoint })
        }
        let done: Array<string> = []
        if (ended.length > 0 && now - ended[0]!.at >= KEEP_AFTER_END_MS) {
          const keep = ended.findIndex((x) => now - x.at < KEEP_AFTER_END_MS)
          done = (keep === -1 ? ended : ended.slice(0, keep)).map((x) => x.id)
          ended = keep === -1 ? [] : ended.slice(keep)
        }
        if (rows.length === 0 && done.length === 0) return live.size === 0 && ended.length === 0 ? asleep : Effect.void
        return write(rows, done).pipe(
          // A busy database delays the write-ahead; the next sweep tries the rows again.
          Effect.catchAll((e) =>
            Effect.sync(() => {
              for (const row of rows) {
                const entry = live.get(row["request_id"] as string)
                if (entry) entry.written = false
                else ended.push({ id: row["request_id"] as string, at: now })
              }
              ended = [...done.map((id) => ({ id, at: now - KEEP_AFTER_END_MS })), ...ended]
            }).pipe(
              // A store that is unavailable is said once, by StoreHealth; the sweep tries again every 25 ms meanwhile.
              Effect.zipRight(
                health.failed(e) === undefined ? Effect.logWarning("could not write the in-flight requests ahead", e) : Effect.void
              )
            )
          )
        )
      })
      // A clean stop: every request has ended and its usage row is queued; nothing is left to recover.
      // (Added before the sweep is forked, so it runs after the sweep has stopped.)
      yield* Effect.addFinalizer(() =>
        Effect.zipRight(
          Effect.sync(() => clearTimeout(due)),
          sql`DELETE FROM usage_inflight WHERE instance = ${instance}`.pipe(Effect.ignore)
        )
      )
      /**
       * How long the sweep waits before it looks again: until the oldest request not yet written
       * ahead is WRITE_AHEAD_AFTER_MS old or the oldest ended row is due for removal, rather than
       * every SWEEP_MIN_MS whatever is in flight (requests that end within WRITE_AHEAD_AFTER_MS,
       * the common case, were looked at twice for nothing). At most WRITE_AHEAD_AFTER_MS: a
       * request that begins meanwhile is due no sooner than that.
       */
      const nextSweepIn = () => {
        const now = Date.now()
        let due = now + WRITE_AHEAD_AFTER_MS
        for (const e of live.values()) if (!e.written) due = Math.min(due, e.r.startedAt + WRITE_AHEAD_AFTER_MS)
        if (ended.length > 0) due = Math.min(due, ended[0]!.at + KEEP_AFTER_END_MS)
        return Duration.millis(Math.max(SWEEP_MIN_MS, due - now))
      }
      yield* Effect.forkScoped(
        Effect.forever(
          Effect.zipRight(
            sweep,
            Effect.suspend(() => Effect.sleep(nextSweepIn()))
          )
        )
      )

      return {
        begin: (r) => {
          live.set(r.requestId, { r, written: false })
          if (wake !== undefined && due === undefined)
            due = setTimeout(wakeSweep, Math.max(0, r.startedAt + WRITE_AHEAD_AFTER_MS - SWEEP_MIN_MS - Date.now())).unref()
        },
        end: (requestId) => {
          const e = live.get(requestId)
          if (e === undefined) return
          live.delete(requestId)
          if (e.written) ended.push({ id: requestId, at: Date.now() })
          else if (due !== undefined && live.size === 0 && ended.length === 0) {
            clearTimeout(due)
            due = undefined
          }
          if (live.size === 0 && waiters.length > 0) {
            const wake = waiters
            waiters = []
            for (const w of wake) w()
          }
        },
        idle: Effect.async<void>((resume) => {
          if (live.size === 0) return resume(Effect.void)
          const wake = () => resume(Effect.void)
          waiters.push(wake)
          return Effect.sync(() => {
            waiters = waiters.filter((w) => w !== wake)
          })
        }),
        running: () => live.keys()
      }
    })
  )
}
