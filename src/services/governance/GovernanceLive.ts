import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import type { RequestHooks } from "../../kernel/RequestHooks.js"
import type { EventBus } from "../../platform/events/EventBus.js"
import type { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import type { BatchWriter } from "../../platform/store/BatchWriter.js"
import type { Secrets } from "../../platform/store/Secrets.js"
import type { StoreHealth } from "../../platform/store/StoreHealth.js"
import type { StoreVersion } from "../../platform/store/StoreVersion.js"
import type { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import type { Connections } from "../../upstream/providers/Connections.js"
import type { Accounting } from "../accounting/Accounting.js"
import { Guardrails } from "../guardrails/Guardrails.js"
import type { GatewayMetrics } from "../observability/GatewayMetrics.js"
import { Observability } from "../observability/Observability.js"
import type { CircuitBreakers } from "../resilience/CircuitBreakers.js"
import { Webhooks } from "../webhooks/Webhooks.js"
import { AuditLog } from "./AuditLog.js"
import { Policies } from "./Policies.js"

/**
 * The governance area: what watches requests and what holds them to rules. Observability (metrics,
 * traces; its listener is registered first), then the guardrails, the policies, the audit log and
 * the webhooks. Reads the store, the flags, the connections and the HTTP client (the core), the
 * event bus and the request hooks (EventsLive), the breakers (ResilienceLive: the metrics show
 * them) and Accounting (AccountingLive: policies cap spending).
 */
export const GovernanceLive: Layer.Layer<
  Observability | GatewayMetrics | Guardrails | Policies | AuditLog | Webhooks,
  ConfigError,
  | SqlClient
  | BatchWriter
  | StoreHealth
  | StoreVersion
  | Secrets
  | FeatureFlags
  | Connections
  | UpstreamHttp
  | EventBus
  | RequestHooks
  | CircuitBreakers
  | Accounting
> = Layer.mergeAll(Guardrails.layer, Policies.layer, AuditLog.layer, Webhooks.layer).pipe(Layer.provideMerge(Observability.layer))
