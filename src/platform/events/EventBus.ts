import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import type * as Queue from "effect/Queue"

/**
 * Platform event names (spec document 2, "Events"). Webhooks deliver them; other services may
 * subscribe too.
 */
export type EventName =
  | "request.completed"
  | "request.failed"
  | "provider.error"
  | "provider.recovered"
  | "quota.exceeded"
  | "combo.switched"
  | "test.ping"
  /**
   * A guardrail or policy acted on a request or answer: `{ rule, mode, action, endpoint, apiKeyId,
   * requestId }` plus the engine's own fields (`detail`, or the guardrails' `guardrail`, `count`,
   * `ruleVersion`, `format`); never the matched text (docs/guardrails.md, "Audit log").
   */
  | "guardrail.action"
  /**
   * A call through `/v1/mcp` ended (docs/mcp.md, "What is recorded"): `{ server, kind, name,
   * exposedName, apiKeyId, outcome, durationMs, resultBytes, error, arguments }`, the arguments as
   * masked JSON text; `failed` for a call refused, rate-limited or failed, `completed` otherwise (a
   * tool's own error result included, with outcome `tool_error`).
   */
  | "mcp.call.completed"
  | "mcp.call.failed"
  /**
   * A realtime session (`/v1/realtime`, docs/realtime.md) opened on its target: `{ sessionId, model,
   * provider, connection, upstreamModel, apiKeyId }`; `ended` adds `durationMs, closeCode, reason,
   * responses, costUsd, inputTokens, outputTokens`.
   */
  | "realtime.session.started"
  | "realtime.session.ended"

export interface GatewayEvent {
  readonly event: EventName
  /** ISO 8601. */
  readonly timestamp: string
  readonly data: Readonly<Record<string, unknown>>
}

export interface EventBusShape {
  /** Publishes without waiting (a sliding buffer: a slow subscriber loses the oldest events, never blocks a request). */
  readonly publish: (event: EventName, data: Readonly<Record<string, unknown>>) => void
  /** A subscription for the life of the scope. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<GatewayEvent>, never, Scope.Scope>
  /**
   * A listener called synchronously by `publish`, for the life of the scope: for in-process
   * consumers whose work is a few synchronous steps (the audit log's filter, the live feed's
   * buffer). A subscription's fiber costs every event a take, a wake-up and some twenty Effect
   * instructions on the request that published it; a listener costs a call. It must not block; what
   * it throws is dropped (the publisher and the other listeners go on).
   */
  readonly listen: (listener: (event: GatewayEvent) => void) => Effect.Effect<void, never, Scope.Scope>
}

/** The current time as ISO 8601, formatted at most once per millisecond (every request publishes). */
let lastMs = 0
let lastIso = ""
const isoNow = (): string => {
  const ms = Date.now()
  if (ms !== lastMs) {
    lastMs = ms
    lastIso = new Date(ms).toISOString()
  }
  return lastIso
}

/** The internal event bus: one PubSub, fire-and-forget for publishers. */
export class EventBus extends Context.Tag("gateway/EventBus")<EventBus, EventBusShape>() {
  static readonly layer = Layer.scoped(
    EventBus,
    Effect.gen(function* () {
      const hub = yield* Effect.acquireRelease(PubSub.sliding<GatewayEvent>(4096), PubSub.shutdown)
      // Replaced, never mutated, so a listener added or removed while publish iterates is safe.
      let listeners: ReadonlyArray<(event: GatewayEvent) => void> = []
      return {
        publish: (event, data) => {
          const e: GatewayEvent = { event, timestamp: isoNow(), data }
          hub.unsafeOffer(e)
          for (const listener of listeners) {
            try {
              listener(e)
            } catch {
              // A listener's failure is its own (documented on EventBusShape.listen).
            }
          }
        },
        subscribe: PubSub.subscribe(hub),
        listen: (listener) =>
          Effect.acquireRelease(
            Effect.sync(() => {
              listeners = [...listeners, listener]
            }),
            () =>
              Effect.sync(() => {
                listeners = listeners.filter((l) => l !== listener)
              })
          )
      }
    })
  )
}
