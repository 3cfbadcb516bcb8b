import type * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as crypto from "node:crypto"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import type { UpstreamHttpShape } from "../../upstream/client/UpstreamHttp.js"
import { checkProviderUrl, type UrlPolicyFlags } from "../../upstream/providers/urlPolicy.js"
import type { Bookkeeping } from "./bookkeeping.js"
import { attempt, envelope } from "./delivery.js"
import { type Dispatcher, messageId, recordAttempt } from "./dispatcher.js"
import { maskSecret, parseEvents, type Row, saved, toView } from "./webhookRow.js"
import type { WebhooksShape } from "./Webhooks.js"

/**
 * The registry of webhooks (`/api/webhooks`, docs/webhooks.md): the rows of the `webhooks` table
 * (secrets encrypted, URLs checked against the outbound URL policy), each change handed to the
 * dispatcher, and the test ping. Every read writes the pending bookkeeping first, so it sees what
 * every finished delivery did to the row.
 */
export const makeRegistry = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly http: UpstreamHttpShape
  readonly books: Bookkeeping
  readonly urlPolicy: Effect.Effect<UrlPolicyFlags>
  readonly dispatcher: Pick<Dispatcher, "install" | "drop">
}): Omit<WebhooksShape, "pending"> => {
  const { sql, secrets, http, books, urlPolicy, dispatcher } = deps

  const reveal = (stored: string) => Effect.match(secrets.decrypt(stored), { onFailure: () => "", onSuccess: (r) => Redacted.value(r) })

  const readRow = (id: string) =>
    Effect.flatMap(
      // What every finished delivery did to the row is written first.
      Effect.zipRight(
        books.flush,
        Effect.orDie(
          sql<Row>`SELECT id, url, events, secret, enabled, description, created_at, last_triggered_at, last_status, failure_count FROM webhooks WHERE id = ${id}`
        )
      ),
      (rows) => (rows[0] ? Effect.succeed(rows[0]) : Effect.fail(new NotFound({ message: `no webhook '${id}'` })))
    )

  const checkUrl = (url: string) =>
    Effect.flatMap(urlPolicy, (policy) => {
      const verdict = checkProviderUrl(url, policy)
      return verdict.ok ? Effect.void : Effect.fail(new BadRequest({ message: `url: ${verdict.reason}` }))
    })

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
      yield* dispatcher.install(row, secret, events)
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
      yield* dispatcher.install(row, secret, events)
      return saved(toView(row, secret), events)
    })

  const remove: WebhooksShape["remove"] = (id) =>
    Effect.gen(function* () {
      const row = yield* readRow(id)
      books.forget(id)
      yield* books.flush
      yield* Effect.orDie(sql`DELETE FROM webhooks WHERE id = ${id}`)
      yield* Effect.orDie(sql`DELETE FROM webhook_deliveries WHERE webhook_id = ${id}`)
      yield* dispatcher.drop(id)
      return toView(row, maskSecret(yield* reveal(row.secret)))
    })

  const test: WebhooksShape["test"] = (id) =>
    Effect.gen(function* () {
      const row = yield* readRow(id)
      const secret = yield* reveal(row.secret)
      const now = yield* Clock.currentTimeMillis
      const body = envelope("test.ping", new Date(now).toISOString(), { message: "Test ping from the gateway", webhookId: id })
      const outcome = yield* attempt(http, { url: row.url, secret }, { id: messageId(), event: "test.ping", body })
      yield* recordAttempt(books, id, outcome)
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
    test
  }
}
