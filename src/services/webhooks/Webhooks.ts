import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import type { BadRequest, NotFound } from "../../domain/errors.js"
import type { CreateWebhook, UpdateWebhook, WebhookSaved, WebhookTestResult, WebhookView } from "../../domain/webhooks.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { type Settlement } from "../../kernel/hooks.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { makeBookkeeping } from "./bookkeeping.js"
import { DISABLE_AFTER, makeDispatcher, QUEUE_SIZE_ENV } from "./dispatcher.js"
import { makeRegistry } from "./registry.js"

export { DELIVERY_CLAIM_MS, DISABLE_AFTER, QUEUE_SIZE_ENV } from "./dispatcher.js"
export { maskSecret } from "./webhookRow.js"

/**
 * Webhooks (docs/webhooks.md): the registry (`/api/webhooks`, registry.ts), and delivery of the
 * platform's events (dispatcher.ts): one dispatcher fiber reads the EventBus while a webhook is
 * enabled and hands each matching delivery to that webhook's own worker and queue.
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

export const RETRY_BASE_ENV = "GATEWAY_WEBHOOK_RETRY_BASE_MS"

/** The data of `request.completed` / `request.failed` (docs/webhooks.md). */
export const requestEventData = (s: Settlement): Record<string, unknown> => {
  const data: Record<string, unknown> = {
    trace_id: s.requestId,
    api_key_id: s.apiKeyId,
    provider: s.provider,
    model: s.model,
    requested_model: s.requestedModel,
    status: s.status,
    tokens_in: s.usage?.inputTokens ?? 0,
    tokens_out: s.usage?.outputTokens ?? 0,
    cost_usd: s.costUsd
  }
  // A failure's error, last; added only then, rather than an empty object spread into every success's.
  if (s.status < 200 || s.status >= 300) data["error"] = s.error
  return data
}

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
      // through the event bus, which is also where the dispatcher reads both.
      const lifecycle = yield* RequestHooks
      const unlisten = lifecycle.listen({
        name: "webhooks",
        settled: (s) => bus.publish(s.status >= 200 && s.status < 300 ? "request.completed" : "request.failed", requestEventData(s))
      })
      yield* Effect.addFinalizer(() => Effect.sync(unlisten))
      const retryBase = Duration.millis(yield* positiveInteger(RETRY_BASE_ENV, "milliseconds", 1000))
      const capacity = yield* positiveInteger(QUEUE_SIZE_ENV, "deliveries", 1000)

      // Made before the dispatcher's workers: at shutdown the workers stop first, then the bookkeeping is written.
      const books = yield* makeBookkeeping(DISABLE_AFTER)
      const claims = (yield* SharedState.orLocal).keys
      const dispatcher = yield* makeDispatcher({ sql, secrets, http, bus, books, claims, retryBase, capacity })
      yield* dispatcher.start
      const registry = makeRegistry({ sql, secrets, http, books, urlPolicy: connections.urlPolicy, dispatcher })

      return { ...registry, pending: dispatcher.pending } satisfies WebhooksShape
    })
  )
}
