import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
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
 * The shortest wait after a sweep's write before the next look (a write that failed is tried
 * again this often); a request is on disk at most this plus WRITE_AHEAD_AFTER_MS (and a write)
 * after it began.
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

      type Row = Record<string, string | number | null>
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
      const run = Runtime.runPromise(yield* Effect.runtime<never>())
      /** The write of one sweep: what went wrong, or undefined once it is on disk (never a rejected promise, never a throw). */
      const writeNow = (rows: ReadonlyArray<Row>, done: ReadonlyArray<string>): Promise<unknown> => {
        const deletes = done.length > 0 ? [{ table: "usage_inflight", column: "request_id", values: done }] : undefined
        if (thread?.alive()) {
          try {
            return thread
              .write(
                rows.map((row) => ({ table: "usage_inflight", row })),
                deletes
              )
              .then(
                (r) => r.unavailable,
                (e: unknown) => e ?? "the writer thread failed"
              )
          } catch (e) {
            return Promise.resolve(e ?? "the writer thread failed")
          }
        }
        const write = transaction(
          sql,
          Effect.all(
            [
              rows.length > 0 ? sql`INSERT INTO usage_inflight ${sql.insert(rows as Array<Row>)}` : Effect.void,
              done.length > 0 ? sql`DELETE FROM usage_inflight WHERE request_id IN ${sql.in(done)}` : Effect.void
            ],
            { discard: true }
          )
        )
        return run(Effect.match(write, { onFailure: (e) => e, onSuccess: () => undefined })).catch((e: unknown) => e ?? "the write failed")
      }

      /**
       * The sweep runs from a plain timer, not a fiber: it is armed for the moment the next thing is
       * due (the oldest request not written ahead WRITE_AHEAD_AFTER_MS old, the oldest ended row
       * KEEP_AFTER_END_MS old), at least SWEEP_MIN_MS after the last sweep's write, and not at all while
       * nothing is due: a request that begins arms it for when it is due (sooner than it was armed
       * for, if need be), one written ahead that ends arms it for its row's removal, and the last
       * request in flight to end before its time disarms it. A fiber woken per sweep (its loop, the
       * write's effects, the sleep) was most of what the write-ahead cost a long request when
       * requests come a few a second, and the fiber woke every 50 ms while any request was in
       * flight, written or not (docs/performance.md, "The usage batch without a fiber"). One sweep
       * at a time: the next is armed when its write is done.
       */
      let due: ReturnType<typeof setTimeout> | undefined
      /** When `due` fires (epoch ms). */
      let dueAt = 0
      /** The sweep's write in flight, if any: the finalizer waits for it. */
      let writing: Promise<void> | undefined
      let closed = false

      /** When the next thing is due (epoch ms), if anything is. */
      const nextDue = (): number | undefined => {
        let next = ended.length > 0 ? ended[0]!.at + KEEP_AFTER_END_MS : Number.POSITIVE_INFINITY
        for (const e of live.values()) if (!e.written) next = Math.min(next, e.r.startedAt + WRITE_AHEAD_AFTER_MS)
        return next === Number.POSITIVE_INFINITY ? undefined : next
      }
      /** Arms the sweep for what is due next, at least `least` ms from now (not while its write is in flight, nor once closed). */
      const arm = (least: number) => {
        if (writing !== undefined || closed) return
        const next = nextDue()
        if (next === undefined) return
        const now = Date.now()
        const at = Math.max(now + least, next)
        if (due !== undefined) {
          if (dueAt <= at) return
          clearTimeout(due)
        }
        dueAt = at
        due = setTimeout(sweep, at - now).unref()
      }

      const sweep = () => {
        due = undefined
        if (closed) return
        const now = Date.now()
        const rows: Array<Row> = []
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
        // Nothing due yet (a timer fires by the monotonic clock, a little before Date.now() says it
        // is due; or what it was armed for has ended): armed for what is due next, if anything.
        if (rows.length === 0 && done.length === 0) return arm(0)
        writing = writeNow(rows, done).then((failure) => {
          writing = undefined
          try {
            if (failure !== undefined) failed(rows, done, now, failure)
          } catch (e) {
            run(Effect.logError("the write-ahead's sweep failed", e)).catch(() => {})
          }
          arm(SWEEP_MIN_MS)
        })
      }

      /** A busy or unavailable database delays the write-ahead: the next sweep tries the rows again (SWEEP_MIN_MS on). */
      const failed = (rows: ReadonlyArray<Row>, done: ReadonlyArray<string>, at: number, failure: unknown) => {
        // A row whose request ended meanwhile is in `ended` already (`end` put it there, written): its
        // removal deletes nothing, as its insert did not go through.
        for (const row of rows) {
          const entry = live.get(row["request_id"] as string)
          if (entry) entry.written = false
        }
        ended = [...done.map((id) => ({ id, at: at - KEEP_AFTER_END_MS })), ...ended]
        // A store that is unavailable is said once, by StoreHealth.
        if (health.failed(failure) === undefined)
          run(Effect.logWarning("could not write the in-flight requests ahead", failure)).catch(() => {})
      }

      // A clean stop: every request has ended and its usage row is queued; nothing is left to recover.
      yield* Effect.addFinalizer(() =>
        Effect.zipRight(
          Effect.promise(async () => {
            closed = true
            clearTimeout(due)
            due = undefined
            await writing
          }),
          sql`DELETE FROM usage_inflight WHERE instance = ${instance}`.pipe(Effect.ignore)
        )
      )

      return {
        begin: (r) => {
          live.set(r.requestId, { r, written: false })
          // Armed for when this request is due, unless the sweep is armed sooner (or writing: it arms the next when done).
          if (due === undefined || dueAt > r.startedAt + WRITE_AHEAD_AFTER_MS) arm(0)
        },
        end: (requestId) => {
          const e = live.get(requestId)
          if (e === undefined) return
          live.delete(requestId)
          if (e.written) {
            // Its row is removed KEEP_AFTER_END_MS from now.
            const at = Date.now()
            ended.push({ id: requestId, at })
            if (due === undefined || dueAt > at + KEEP_AFTER_END_MS) arm(0)
          } else if (due !== undefined && live.size === 0 && ended.length === 0) {
            // Nothing left to write or remove: the sweep sleeps.
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
