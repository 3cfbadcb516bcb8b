import * as SqlClient from "@effect/sql/SqlClient"
import type * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as crypto from "node:crypto"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { type CreateWebhook, unknownEvents, type UpdateWebhook, WEBHOOK_EVENTS, type WebhookSaved, type WebhookTestResult, type WebhookView } from "../../domain/webhooks.js"
import { EventBus, type GatewayEvent } from "../../platform/events/EventBus.js"
import { RequestHooks, type Settlement } from "../../kernel/hooks.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { checkProviderUrl } from "../../upstream/providers/urlPolicy.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { makeBookkeeping } from "./bookkeeping.js"
import { type AttemptOutcome, attempt, deliver, envelope } from "./delivery.js"

/**
 * Webhooks (docs/webhooks.md): the registry (`/api/webhooks`), and delivery of the platform's
 * events. One dispatcher fiber reads the EventBus (subscribed only while at least one webhook is
 * enabled, so a gateway without webhooks pays nothing per request), persists each matching
 * delivery in `webhook_deliveries` and hands it to that webhook's own worker fiber and queue:
 * a slow or dead receiver holds only its own queue, never another webhook nor a request.
 */

export interface WebhooksShape {
  /** Every webhook, secrets masked. */
  readonly list: Effect.Effect<ReadonlyArray<WebhookView>>
  /** One webhook with its full secret. */
  readonly get: (id: string) => Effect.Effect<WebhookView, NotFound>
  readonly create: (input: CreateWebhook) => Effect.Effect<WebhookSaved, BadRequest>
  readonly update: (id: string, input: UpdateWebhook) => Effect.Effect<WebhookSaved, BadRequest | NotFound>
  /** Removes the webhook and its pending deliveries; answers it as it was (secret masked). */
  readonly remove: (id: string) => Effect.Effect<WebhookView, NotFound>
  /** One `test.ping` to the webhook, without retries (also while it is disabled). */
  readonly test: (id: string) => Effect.Effect<WebhookTestResult, NotFound>
  /** Deliveries queued or in flight, all webhooks together (tests, the bench). */
  readonly pending: Effect.Effect<number>
}

/**
 * How long a process's claim on a queued delivery lasts (several processes, Redis): longer than a
 * delivery's retries take, so a live process's deliveries are never resumed by another; those of
 * a process that died are resumed by the next process to start after it lapsed.
 */
export const DELIVERY_CLAIM_MS = 3_600_000

/** Failed deliveries in a row that disable a webhook. */
export const DISABLE_AFTER = 10
export const RETRY_BASE_ENV = "GATEWAY_WEBHOOK_RETRY_BASE_MS"
export const QUEUE_SIZE_ENV = "GATEWAY_WEBHOOK_QUEUE_SIZE"

const EVENT_NAMES: ReadonlySet<string> = new Set(WEBHOOK_EVENTS)

interface Row {
  readonly id: string
  readonly url: string
  readonly events: string
  readonly secret: string
  readonly enabled: number
  readonly description: string | null
  readonly created_at: number
  readonly last_triggered_at: number | null
  readonly last_status: number | null
  readonly failure_count: number
}

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

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString())
const parseEvents = (text: string): ReadonlyArray<string> => {
  try {
    const v: unknown = JSON.parse(text)
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : ["*"]
  } catch {
    return ["*"]
  }
}
export const maskSecret = (secret: string): string => `${secret.slice(0, 10)}…`
/** The data of `request.completed` / `request.failed` (docs/webhooks.md). */
export const requestEventData = (s: Settlement): Record<string, unknown> => {
  const ok = s.status >= 200 && s.status < 300
  return {
    trace_id: s.requestId,
    api_key_id: s.apiKeyId,
    provider: s.provider,
    model: s.model,
    requested_model: s.requestedModel,
    status: s.status,
    tokens_in: s.usage?.inputTokens ?? 0,
    tokens_out: s.usage?.outputTokens ?? 0,
    cost_usd: s.costUsd,
    ...(ok ? {} : { error: s.error })
  }
}

const messageId = () => `msg_${crypto.randomUUID().replaceAll("-", "")}`

export class Webhooks extends Context.Tag("gateway/Webhooks")<Webhooks, WebhooksShape>() {
  static readonly layer = Layer.scoped(
    Webhooks,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const http = yield* UpstreamHttp
      const bus = yield* EventBus
      const connections = yield* Connections
      // Requests' events come from the lifecycle seam (a listener like observability); the rest
      // (a breaker opening, a combo switching, a budget exceeded) from the services that see them,
      // through the event bus, which is also where the dispatcher below reads both.
      const lifecycle = yield* RequestHooks
      const unlisten = lifecycle.listen({
        name: "webhooks",
        settled: (s) => bus.publish(s.status >= 200 && s.status < 300 ? "request.completed" : "request.failed", requestEventData(s))
      })
      yield* Effect.addFinalizer(() => Effect.sync(unlisten))
      const retryBase = Duration.millis(yield* positiveInteger(RETRY_BASE_ENV, "milliseconds", 1000))
      const capacity = yield* positiveInteger(QUEUE_SIZE_ENV, "deliveries", 1000)
      // Made before the workers' FiberMap: at shutdown the workers stop first, then the bookkeeping is written.
      const books = yield* makeBookkeeping(DISABLE_AFTER)
      const workers = yield* FiberMap.make<string>()
      const hooks = new Map<string, Hook>()
      let seq = 0
      // Several processes on one database (Redis): each delivery is claimed by the process that
      // queued it, so another one starting meanwhile does not resume (and send) it too.
      const claims = (yield* SharedState.orLocal).keys
      const owner = `webhooks:${crypto.randomUUID()}`
      const claimKey = (deliveryId: string) => `webhook:${deliveryId}`
      /** Deliveries this process claimed and has not finished: given back at shutdown, so the next start resumes them. */
      const claimed = new Set<string>()
      const claim = (deliveryId: string) =>
        Effect.map(claims.claim(claimKey(deliveryId), owner, DELIVERY_CLAIM_MS), (got) => {
          if (got === true) claimed.add(deliveryId)
          return got
        })
      if (claims.exact) yield* Effect.addFinalizer(() => Effect.forEach([...claimed], (id) => claims.release(claimKey(id), owner), { discard: true }))

      const reveal = (stored: string) => Effect.match(secrets.decrypt(stored), { onFailure: () => "", onSuccess: (r) => Redacted.value(r) })

      const toView = (row: Row, secret: string): WebhookView => ({
        id: row.id,
        url: row.url,
        events: parseEvents(row.events),
        secret,
        enabled: row.enabled ? 1 : 0,
        description: row.description,
        created_at: iso(row.created_at)!,
        last_triggered_at: iso(row.last_triggered_at),
        last_status: row.last_status,
        failure_count: row.failure_count
      })

      const readRow = (id: string) =>
        Effect.flatMap(
          // What every finished delivery did to the row is written first.
          Effect.zipRight(
            books.flush,
            Effect.orDie(sql<Row>`SELECT id, url, events, secret, enabled, description, created_at, last_triggered_at, last_status, failure_count FROM webhooks WHERE id = ${id}`)
          ),
          (rows) => (rows[0] ? Effect.succeed(rows[0]) : Effect.fail(new NotFound({ message: `no webhook '${id}'` })))
        )

      const checkUrl = (url: string) =>
        Effect.flatMap(connections.urlPolicy, (policy) => {
          const verdict = checkProviderUrl(url, policy)
          return verdict.ok ? Effect.void : Effect.fail(new BadRequest({ message: `url: ${verdict.reason}` }))
        })

      const recordAttempt = (id: string, o: AttemptOutcome) => Effect.map(Clock.currentTimeMillis, (now) => books.attempted(id, now, o.status))

      /** After a delivery's last attempt: the failure count, maybe disabling, and the pending row. */
      const finish = (hook: Hook, job: Job, outcome: AttemptOutcome) =>
        Effect.suspend(() => {
          books.counted(hook.id, outcome.ok)
          books.finished(job.id)
          hook.failures = outcome.ok ? 0 : hook.failures + 1
          if (outcome.ok || hook.failures < DISABLE_AFTER || !hook.enabled) return Effect.void
          hook.enabled = false
          return Effect.logWarning(`webhook ${hook.id} disabled after ${hook.failures} failed deliveries in a row (${outcome.error ?? "failed"})`)
        })

      /** A webhook's worker: its deliveries one after another, in the order the events came. */
      const work = (hook: Hook) =>
        Effect.forever(
          Effect.gen(function* () {
            const job = yield* Queue.take(hook.queue)
            if (!hook.enabled) {
              hook.pending--
              return books.finished(job.id)
            }
            const outcome = yield* deliver(http, () => hook, job, { retryBase, onAttempt: (o) => recordAttempt(hook.id, o) })
            // Interrupted before this point (shutdown), the row stays and is delivered again at the next start.
            yield* Effect.uninterruptible(
              Effect.ensuring(
                finish(hook, job, outcome),
                Effect.sync(() => {
                  hook.pending--
                  claimed.delete(job.id)
                })
              )
            )
          })
        )

      // The dispatcher's gates: `wake` is open while some webhook is enabled, `ready` while it is subscribed.
      const wake = yield* Effect.makeLatch(false)
      const ready = yield* Effect.makeLatch(false)
      const anyEnabled = () => {
        for (const h of hooks.values()) if (h.enabled) return true
        return false
      }
      /** Makes sure the dispatcher listens before an enabled webhook is answered (its first event is not missed). */
      const listen = Effect.zipRight(wake.open, ready.await)

      const fanOut = (events: Chunk.Chunk<GatewayEvent>) =>
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
                  yield* Effect.logWarning(`webhook ${hook.id}: ${capacity} deliveries pending, dropping new '${e.event}' deliveries (${QUEUE_SIZE_ENV})`)
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
              if (claims.exact) yield* claim(job.id)
              Queue.unsafeOffer(hook.queue, job)
            }
          }
        })

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

      // Start: every webhook and its pending deliveries, in the order they were queued.
      const start = Effect.gen(function* () {
        const rows = yield* sql<Row>`SELECT id, url, events, secret, enabled, description, created_at, last_triggered_at, last_status, failure_count FROM webhooks`
        for (const row of rows) {
          const decrypted = yield* Effect.either(secrets.decrypt(row.secret))
          if (decrypted._tag === "Left") {
            yield* Effect.logError(`webhook ${row.id}: its secret cannot be decrypted with this storage key; not delivering to it`)
            continue
          }
          yield* addHook(row, Redacted.value(decrypted.right))
        }
        const pending = yield* sql<Job & { webhook_id: string }>`SELECT id, webhook_id, event, body FROM webhook_deliveries ORDER BY created_at, seq`
        const dropped: Array<string> = []
        let others = 0
        for (const p of pending) {
          // Held by another live process (it queued it): not ours to send. Redis unreachable: ours, as with one process.
          if (claims.exact && (yield* claim(p.id)) === false) {
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
        if (pending.length > dropped.length + others) yield* Effect.logInfo(`webhooks: ${pending.length - dropped.length - others} pending deliveries resumed`)
        if (others > 0) yield* Effect.logInfo(`webhooks: ${others} pending deliveries left to the processes that queued them`)
        for (const id of dropped) books.finished(id)
      })
      yield* Effect.orDie(start)
      yield* Effect.forkScoped(dispatcher)
      if (anyEnabled()) yield* listen

      const saved = (view: WebhookView, events: ReadonlyArray<string>): WebhookSaved => {
        const unknown = unknownEvents(events)
        return unknown.length === 0 ? view : { ...view, warnings: unknown.map((e) => `events: '${e}' is not an event name; it is stored but never matches`) }
      }

      const create: WebhooksShape["create"] = (input) =>
        Effect.gen(function* () {
          yield* checkUrl(input.url)
          const id = crypto.randomUUID()
          const secret = input.secret ?? `whsec_${crypto.randomBytes(24).toString("hex")}`
          const events = input.events ?? ["*"]
          const now = yield* Clock.currentTimeMillis
          const row: Row = {
            id,
            url: input.url,
            events: JSON.stringify(events),
            secret: secrets.encrypt(secret),
            enabled: 1,
            description: input.description ?? null,
            created_at: now,
            last_triggered_at: null,
            last_status: null,
            failure_count: 0
          }
          yield* Effect.orDie(sql`INSERT INTO webhooks ${sql.insert({ ...row })}`)
          yield* addHook(row, secret)
          yield* listen
          return saved(toView(row, secret), events)
        })

      const update: WebhooksShape["update"] = (id, input) =>
        Effect.gen(function* () {
          const before = yield* readRow(id)
          if (input.url !== undefined) yield* checkUrl(input.url)
          const secret = input.secret ?? (yield* reveal(before.secret))
          const events = input.events ?? parseEvents(before.events)
          const enabling = input.enabled === true || input.enabled === 1
          const enabled = input.enabled === undefined ? before.enabled : enabling ? 1 : 0
          const row: Row = {
            ...before,
            url: input.url ?? before.url,
            events: JSON.stringify(events),
            secret: input.secret !== undefined ? secrets.encrypt(input.secret) : before.secret,
            enabled,
            description: input.description === undefined ? before.description : input.description,
            failure_count: enabling ? 0 : before.failure_count
          }
          yield* Effect.orDie(
            sql`UPDATE webhooks SET url = ${row.url}, events = ${row.events}, secret = ${row.secret}, enabled = ${row.enabled}, description = ${row.description}, failure_count = ${row.failure_count} WHERE id = ${id}`
          )
          const hook = hooks.get(id) ?? (yield* addHook(row, secret))
          hook.url = row.url
          hook.secret = secret
          hook.all = events.includes("*")
          hook.names = new Set(events)
          hook.enabled = row.enabled === 1
          hook.failures = row.failure_count
          if (hook.enabled) yield* listen
          return saved(toView(row, secret), events)
        })

      const remove: WebhooksShape["remove"] = (id) =>
        Effect.gen(function* () {
          const row = yield* readRow(id)
          books.forget(id)
          yield* books.flush
          yield* Effect.orDie(sql`DELETE FROM webhooks WHERE id = ${id}`)
          yield* Effect.orDie(sql`DELETE FROM webhook_deliveries WHERE webhook_id = ${id}`)
          hooks.delete(id)
          yield* FiberMap.remove(workers, id)
          return toView(row, maskSecret(yield* reveal(row.secret)))
        })

      const test: WebhooksShape["test"] = (id) =>
        Effect.gen(function* () {
          const row = yield* readRow(id)
          const secret = yield* reveal(row.secret)
          const now = yield* Clock.currentTimeMillis
          const body = envelope("test.ping", new Date(now).toISOString(), { message: "Test ping from the gateway", webhookId: id })
          const outcome = yield* attempt(http, { url: row.url, secret }, { id: messageId(), event: "test.ping", body })
          yield* recordAttempt(id, outcome)
          return { delivered: outcome.ok, status: outcome.status, error: outcome.error }
        })

      return {
        list: Effect.flatMap(
          Effect.zipRight(
            books.flush,
            Effect.orDie(
              sql<Row>`SELECT id, url, events, secret, enabled, description, created_at, last_triggered_at, last_status, failure_count FROM webhooks ORDER BY created_at, id`
            )
          ),
          (rows) => Effect.forEach(rows, (row) => Effect.map(reveal(row.secret), (s) => toView(row, maskSecret(s))))
        ),
        get: (id) => Effect.flatMap(readRow(id), (row) => Effect.map(reveal(row.secret), (s) => toView(row, s))),
        create,
        update,
        remove,
        test,
        pending: Effect.sync(() => {
          let n = 0
          for (const h of hooks.values()) n += h.pending
          return n
        })
      } satisfies WebhooksShape
    })
  )
}
