import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import { WEBHOOK_EVENTS } from "../../domain/webhooks.js"
import type { EventBusShape, GatewayEvent } from "../../platform/events/EventBus.js"
import type { SharedKeys } from "../../platform/state/SharedState.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import type { UpstreamHttpShape } from "../../upstream/client/UpstreamHttp.js"
import type { Bookkeeping } from "./bookkeeping.js"
import { type AttemptOutcome, deliver, envelope } from "./delivery.js"
import { parseEvents, type Row } from "./webhookRow.js"

/**
 * Delivery of the platform's events to the webhooks (docs/webhooks.md): one dispatcher fiber reads
 * the EventBus (subscribed only while at least one webhook is enabled, so a gateway without
 * webhooks pays nothing per request), persists each matching delivery and hands it to that
 * webhook's own worker fiber and queue: a slow or dead receiver holds only its own queue, never
 * another webhook nor a request.
 */

/**
 * How long a process's claim on a queued delivery lasts (several processes, Redis): longer than a
 * delivery's retries take, so a live process's deliveries are never resumed by another; those of
 * a process that died are resumed by the next process to start after it lapsed.
 */
export const DELIVERY_CLAIM_MS = 3_600_000

/** Failed deliveries in a row that disable a webhook. */
export const DISABLE_AFTER = 10
export const QUEUE_SIZE_ENV = "GATEWAY_WEBHOOK_QUEUE_SIZE"

const EVENT_NAMES: ReadonlySet<string> = new Set(WEBHOOK_EVENTS)

interface Job {
  readonly id: string
  readonly event: string
  readonly body: string
}

/** A webhook as its worker and the dispatcher see it; a PUT changes the fields in place. */
interface Hook {
  readonly id: string
  url: string
  secret: string
  all: boolean
  names: ReadonlySet<string>
  enabled: boolean
  /** Failed deliveries in a row, as this process counts them (the column is written in batches). */
  failures: number
  /** Deliveries queued or in flight (what the queue bound counts). */
  pending: number
  readonly queue: Queue.Queue<Job>
  lastDropLog: number
}

/** A new message id (`webhook-id`: the same on every attempt of a delivery). */
export const messageId = () => `msg_${crypto.randomUUID().replaceAll("-", "")}`

/** An attempt's time and status, for the webhook's `last_triggered_at` and `last_status`. */
export const recordAttempt = (books: Bookkeeping, id: string, o: AttemptOutcome): Effect.Effect<void> =>
  Effect.map(Clock.currentTimeMillis, (now) => books.attempted(id, now, o.status))

interface Claims {
  /** Whether claims are shared by several processes (otherwise none is made). */
  readonly exact: boolean
  /** Claims a delivery for this process: false when another holds it, `undefined` when the store is unreachable. */
  readonly claim: (deliveryId: string) => Effect.Effect<boolean | undefined>
  /** A delivery finished: its claim is not given back at shutdown. */
  readonly finished: (deliveryId: string) => void
}

/**
 * Claims on queued deliveries, with several processes on one database (Redis): each delivery is
 * claimed by the process that queued it, so another one starting meanwhile does not resume (and
 * send) it too. The claims of deliveries not finished are given back at shutdown, so the next
 * start resumes them.
 */
const makeClaims = (keys: SharedKeys): Effect.Effect<Claims, never, Scope.Scope> =>
  Effect.gen(function* () {
    const owner = `webhooks:${crypto.randomUUID()}`
    const claimKey = (deliveryId: string) => `webhook:${deliveryId}`
    /** Deliveries this process claimed and has not finished. */
    const claimed = new Set<string>()
    const claim = (deliveryId: string) =>
      Effect.map(keys.claim(claimKey(deliveryId), owner, DELIVERY_CLAIM_MS), (got) => {
        if (got === true) claimed.add(deliveryId)
        return got
      })
    if (keys.exact)
      yield* Effect.addFinalizer(() => Effect.forEach([...claimed], (id) => keys.release(claimKey(id), owner), { discard: true }))
    return {
      exact: keys.exact,
      claim,
      finished: (deliveryId) => {
        claimed.delete(deliveryId)
      }
    }
  })

interface WorkerDeps {
  readonly http: UpstreamHttpShape
  readonly books: Bookkeeping
  readonly retryBase: Duration.Duration
  readonly claims: Claims
}

/**
 * A webhook's worker: its deliveries one after another, in the order the events came; after a
 * delivery's last attempt, the failure count (disabling the webhook after DISABLE_AFTER in a row)
 * and the pending row.
 */
const makeWorker = (deps: WorkerDeps) => {
  const { http, books, retryBase, claims } = deps

  const finish = (hook: Hook, job: Job, outcome: AttemptOutcome) =>
    Effect.suspend(() => {
      books.counted(hook.id, outcome.ok)
      books.finished(job.id)
      hook.failures = outcome.ok ? 0 : hook.failures + 1
      if (outcome.ok || hook.failures < DISABLE_AFTER || !hook.enabled) return Effect.void
      hook.enabled = false
      return Effect.logWarning(
        `webhook ${hook.id} disabled after ${hook.failures} failed deliveries in a row (${outcome.error ?? "failed"})`
      )
    })

  return (hook: Hook) =>
    Effect.forever(
      Effect.gen(function* () {
        const job = yield* Queue.take(hook.queue)
        if (!hook.enabled) {
          hook.pending--
          return books.finished(job.id)
        }
        const outcome = yield* deliver(http, () => hook, job, { retryBase, onAttempt: (o) => recordAttempt(books, hook.id, o) })
        // Interrupted before this point (shutdown), the row stays and is delivered again at the next start.
        yield* Effect.uninterruptible(
          Effect.ensuring(
            finish(hook, job, outcome),
            Effect.sync(() => {
              hook.pending--
              claims.finished(job.id)
            })
          )
        )
      })
    )
}

/**
 * A batch of events fanned out: a delivery for each enabled webhook that wants the event, persisted
 * (and claimed) before it is queued; one whose queue is full drops it.
 */
const makeFanOut = (deps: {
  readonly hooks: ReadonlyMap<string, Hook>
  readonly books: Bookkeeping
  readonly claims: Claims
  readonly capacity: number
}) => {
  const { hooks, books, claims, capacity } = deps
  let seq = 0
  return (events: Chunk.Chunk<GatewayEvent>) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      for (const e of events) {
        if (!EVENT_NAMES.has(e.event)) continue
        let body: string | undefined
        for (const hook of hooks.values()) {
          if (!hook.enabled || !(hook.all || hook.names.has(e.event))) continue
          if (hook.pending >= capacity) {
            // Overflow: the new delivery is dropped (the queued ones keep their order), logged at most once a minute per webhook.
            if (now - hook.lastDropLog >= 60_000) {
              hook.lastDropLog = now
              yield* Effect.logWarning(
                `webhook ${hook.id}: ${capacity} deliveries pending, dropping new '${e.event}' deliveries (${QUEUE_SIZE_ENV})`
              )
            }
            continue
          }
          if (body === undefined) {
            try {
              body = envelope(e.event, e.timestamp, e.data)
            } catch {
              break
            }
          }
          const job: Job = { id: messageId(), event: e.event, body }
          hook.pending++
          books.persist({ id: job.id, webhook_id: hook.id, event: e.event, body, created_at: now, seq: seq++ })
          if (claims.exact) yield* claims.claim(job.id)
          Queue.unsafeOffer(hook.queue, job)
        }
      }
    })
}

/**
 * At start: every webhook (one whose secret this storage key cannot decrypt is left out), then its
 * pending deliveries in the order they were queued; those another live process claimed are left to
 * it, those of a removed, disabled or full webhook are dropped.
 */
const loadAll = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly books: Bookkeeping
  readonly claims: Claims
  readonly capacity: number
  readonly hooks: ReadonlyMap<string, Hook>
  readonly addHook: (row: Row, secret: string) => Effect.Effect<Hook>
}) =>
  Effect.gen(function* () {
    const { sql, secrets, books, claims, capacity, hooks, addHook } = deps
    const rows =
      yield* sql<Row>`SELECT id, url, events, secret, enabled, description, created_at, last_triggered_at, last_status, failure_count FROM webhooks`
    for (const row of rows) {
      const decrypted = yield* Effect.either(secrets.decrypt(row.secret))
      if (decrypted._tag === "Left") {
        yield* Effect.logError(`webhook ${row.id}: its secret cannot be decrypted with this storage key; not delivering to it`)
        continue
      }
      yield* addHook(row, Redacted.value(decrypted.right))
    }
    const pending = yield* sql<
      Job & { webhook_id: string }
    >`SELECT id, webhook_id, event, body FROM webhook_deliveries ORDER BY created_at, seq`
    const dropped: Array<string> = []
    let others = 0
    for (const p of pending) {
      // Held by another live process (it queued it): not ours to send. Redis unreachable: ours, as with one process.
      if (claims.exact && (yield* claims.claim(p.id)) === false) {
        others++
        continue
      }
      const hook = hooks.get(p.webhook_id)
      if (!hook || !hook.enabled || hook.pending >= capacity) {
        dropped.push(p.id)
        continue
      }
      hook.pending++
      Queue.unsafeOffer(hook.queue, { id: p.id, event: p.event, body: p.body })
    }
    if (pending.length > dropped.length + others)
      yield* Effect.logInfo(`webhooks: ${pending.length - dropped.length - others} pending deliveries resumed`)
    if (others > 0) yield* Effect.logInfo(`webhooks: ${others} pending deliveries left to the processes that queued them`)
    for (const id of dropped) books.finished(id)
  })

export interface DispatcherDeps {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly http: UpstreamHttpShape
  readonly bus: EventBusShape
  readonly books: Bookkeeping
  /** Where deliveries are claimed (`SharedState.keys`). */
  readonly claims: SharedKeys
  /** The first retry's wait (GATEWAY_WEBHOOK_RETRY_BASE_MS). */
  readonly retryBase: Duration.Duration
  /** Deliveries pending per webhook at most (QUEUE_SIZE_ENV). */
  readonly capacity: number
}

export interface Dispatcher {
  /** Every webhook and its pending deliveries (in the order they were queued), then the dispatcher, listening while a webhook is enabled.
   * */
  readonly start: Effect.Effect<void, never, Scope.Scope>
  /** A webhook created or edited: delivered to as `row` says from now on (its worker started if it had none). */
  readonly install: (row: Row, secret: string, events: ReadonlyArray<string>) => Effect.Effect<void>
  /** A webhook removed: its worker stops, its queue goes. */
  readonly drop: (id: string) => Effect.Effect<void>
  /** Deliveries queued or in flight, all webhooks together. */
  readonly pending: Effect.Effect<number>
}

/**
 * The webhooks in memory, each with its queue and worker, and the dispatcher that fans the
 * EventBus out to them. The workers' FiberMap is made here: at shutdown the workers stop before
 * the bookkeeping (made before this) is written.
 */
export const makeDispatcher = ({ sql, secrets, http, bus, books, retryBase, capacity, ...deps }: DispatcherDeps) =>
  Effect.gen(function* () {
    const workers = yield* FiberMap.make<string>()
    const hooks = new Map<string, Hook>()
    const claims = yield* makeClaims(deps.claims)
    const work = makeWorker({ http, books, retryBase, claims })
    const fanOut = makeFanOut({ hooks, books, claims, capacity })

    // The dispatcher's gates: `wake` is open while some webhook is enabled, `ready` while it is subscribed.
    const wake = yield* Effect.makeLatch(false)
    const ready = yield* Effect.makeLatch(false)
    const anyEnabled = () => {
      for (const h of hooks.values()) if (h.enabled) return true
      return false
    }
    /** Makes sure the dispatcher listens before an enabled webhook is answered (its first event is not missed). */
    const listen = Effect.zipRight(wake.open, ready.await)

    const dispatcher = Effect.forever(
      Effect.zipRight(
        wake.await,
        Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* bus.subscribe
            yield* ready.open
            while (true) {
              const batch = yield* Queue.takeBetween(subscription, 1, 512)
              yield* fanOut(batch)
              if (anyEnabled()) continue
              // No webhook left to serve: unsubscribe, unless one was enabled meanwhile.
              yield* ready.close
              yield* wake.close
              if (!anyEnabled()) return
              yield* wake.open
              yield* ready.open
            }
          })
        )
      )
    )

    const addHook = (row: Row, secret: string) =>
      Effect.gen(function* () {
        const events = parseEvents(row.events)
        const hook: Hook = {
          id: row.id,
          url: row.url,
          secret,
          all: events.includes("*"),
          names: new Set(events),
          enabled: row.enabled === 1,
          failures: row.failure_count,
          pending: 0,
          queue: yield* Queue.unbounded<Job>(),
          lastDropLog: 0
        }
        hooks.set(row.id, hook)
        yield* FiberMap.run(workers, row.id, work(hook))
        return hook
      })

    return {
      start: Effect.gen(function* () {
        yield* Effect.orDie(loadAll({ sql, secrets, books, claims, capacity, hooks, addHook }))
        yield* Effect.forkScoped(dispatcher)
        if (anyEnabled()) yield* listen
      }),
      install: (row, secret, events) =>
        Effect.gen(function* () {
          const hook = hooks.get(row.id) ?? (yield* addHook(row, secret))
          hook.url = row.url
          hook.secret = secret
          hook.all = events.includes("*")
          hook.names = new Set(events)
          hook.enabled = row.enabled === 1
          hook.failures = row.failure_count
          if (hook.enabled) yield* listen
        }),
      drop: (id) =>
        Effect.suspend(() => {
          hooks.delete(id)
          return FiberMap.remove(workers, id)
        }),
      pending: Effect.sync(() => {
        let n = 0
        for (const h of hooks.values()) n += h.pending
        return n
      })
    } satisfies Dispatcher
  })
