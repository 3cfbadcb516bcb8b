import type { SqlClient } from "@effect/sql/SqlClient"
import * as Layer from "effect/Layer"
import type { EventBus } from "../../platform/events/EventBus.js"
import type { KeyValue } from "../../platform/store/KeyValue.js"
import { RoutingMemory } from "../routing/RoutingMemory.js"
import { CircuitBreakers } from "./CircuitBreakers.js"
import { ConnectionSlots } from "./ConnectionSlots.js"
import { Cooldowns } from "./Cooldowns.js"
import { Lockouts } from "./Lockouts.js"
import { QuotaQueue } from "./QuotaQueue.js"
import { Resilience } from "./Resilience.js"
import { ResilienceConfig } from "./ResilienceConfig.js"

/**
 * The resilience area: what the gateway learnt about each target and how it holds back. Its
 * settings, the routing memory (latency and error windows, quotas, sticky sessions: Resilience
 * writes the quotas it reads from answers there), the circuit breakers, cooldowns and lockouts,
 * Resilience over them, the connection slots, and the requests parked until a quota resets. Reads the store and the event bus (EventsLive);
 * the shared state when there is one.
 */
export const ResilienceLive: Layer.Layer<
  ResilienceConfig | RoutingMemory | CircuitBreakers | Cooldowns | Lockouts | Resilience | ConnectionSlots | QuotaQueue,
  never,
  SqlClient | KeyValue | EventBus
> = Layer.mergeAll(Resilience.layer, ConnectionSlots.layer, QuotaQueue.layer).pipe(
  Layer.provideMerge(Layer.mergeAll(CircuitBreakers.layer, Cooldowns.layer, Lockouts.layer)),
  Layer.provideMerge(Layer.mergeAll(ResilienceConfig.layer, RoutingMemory.layer))
)
