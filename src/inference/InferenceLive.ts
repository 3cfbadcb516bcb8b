import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import type { RequestHooks } from "../kernel/RequestHooks.js"
import { InternalCalls } from "../kernel/internalCall.js"
import type { AppConfig } from "../platform/config/AppConfig.js"
import type { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import type { Settings } from "../platform/settings/Settings.js"
import type { KeyValue } from "../platform/store/KeyValue.js"
import type { Secrets } from "../platform/store/Secrets.js"
import type { StoreHealth } from "../platform/store/StoreHealth.js"
import type { Accounting } from "../services/accounting/Accounting.js"
import type { AccountingConfig } from "../services/accounting/AccountingConfig.js"
import type { Budgets } from "../services/accounting/Budgets.js"
import type { Idempotency } from "../services/accounting/Idempotency.js"
import type { InboundLimits } from "../services/accounting/InboundLimits.js"
import type { Pricing } from "../services/accounting/Pricing.js"
import type { ResponseCache } from "../services/accounting/ResponseCache.js"
import type { TokenLimits } from "../services/accounting/TokenLimits.js"
import type { Levels } from "../services/accounting/Levels.js"
import type { ApiKeys } from "../services/auth/ApiKeys.js"
import { Compression } from "../services/context/Compression.js"
import type { ContextStore } from "../services/context/ContextStore.js"
import type { Guardrails } from "../services/guardrails/Guardrails.js"
import { OAuth } from "../services/oauth/OAuth.js"
import type { GatewayMetrics } from "../services/observability/GatewayMetrics.js"
import type { ConnectionSlots } from "../services/resilience/ConnectionSlots.js"
import type { Cooldowns } from "../services/resilience/Cooldowns.js"
import type { Resilience } from "../services/resilience/Resilience.js"
import type { ResilienceConfig } from "../services/resilience/ResilienceConfig.js"
import type { Combos } from "../services/routing/Combos.js"
import type { Router } from "../services/routing/Router.js"
import type { RoutingMemory } from "../services/routing/RoutingMemory.js"
import type { McpServers } from "../services/mcp/McpServers.js"
import type { McpUpstreams } from "../services/mcp/McpUpstreams.js"
import type { SkillCatalog } from "../services/skills/SkillCatalog.js"
import type { InFlight } from "../services/usage/InFlight.js"
import type { Usage } from "../services/usage/Usage.js"
import type { UpstreamHttp } from "../upstream/client/UpstreamHttp.js"
import type { Egress } from "../upstream/egress/Egress.js"
import type { Connections } from "../upstream/providers/Connections.js"
import { Batches } from "./batches/Batches.js"
import { Bridges } from "./bridge/Bridges.js"
import { NativeBatches } from "./batches/NativeBatches.js"
import { InferenceRoutes } from "./InferenceRoutes.js"
import { Evals } from "./evals/Evals.js"
import { Files } from "./files/Files.js"
import { FileStore } from "./files/FileStore.js"
import { MediaJobs } from "./media/MediaJobs.js"
import { Inference } from "./Inference.js"
import { IssueTracker } from "./quotas/IssueTracker.js"
import { Quotas } from "./quotas/Quotas.js"
import { ResponseStore } from "./ResponseStore.js"
import type { McpGateway } from "./mcp/McpGateway.js"
import { ResponsesMcp } from "./mcp/ResponsesMcp.js"
import { ResponsesCompaction } from "./compaction/ResponsesCompaction.js"
import { RealtimeSecrets } from "./RealtimeSecrets.js"
import { WebSearch } from "./search/WebSearch.js"
import { StreamWatchdog } from "./stream.js"
import type { StreamTimeouts } from "./StreamTimeouts.js"

/**
 * The inference area: the plane clients call, built bottom up (what the pipeline reads, the pipeline,
 * what runs over it, the route table). What it reads from the areas below is its type.
 */
export const InferenceLive: Layer.Layer<
  | OAuth
  | StreamWatchdog
  | InternalCalls
  | ResponseStore
  | ResponsesMcp
  | ResponsesCompaction
  | FileStore
  | Batches
  | Evals
  | IssueTracker
  | Compression
  | Bridges
  | Inference
  | Files
  | Quotas
  | NativeBatches
  | RealtimeSecrets
  | InferenceRoutes,
  ConfigError,
  | AppConfig
  | StreamTimeouts
  | SqlClient
  | StoreHealth
  | KeyValue
  | Secrets
  | FeatureFlags
  | Settings
  | ApiKeys
  | Levels
  | Connections
  | UpstreamHttp
  | Egress
  | Usage
  | ContextStore
  | RequestHooks
  | Resilience
  | ResilienceConfig
  | Cooldowns
  | RoutingMemory
  | ConnectionSlots
  | AccountingConfig
  | Accounting
  | Pricing
  | Budgets
  | TokenLimits
  | InboundLimits
  | ResponseCache
  | Idempotency
  | InFlight
  | Guardrails
  | GatewayMetrics
  | Router
  | Combos
  | SkillCatalog
  | McpServers
  | McpUpstreams
  | McpGateway
> = InferenceRoutes.layer.pipe(
  Layer.provide(Layer.mergeAll(MediaJobs.layer, WebSearch.layer)),
  Layer.provideMerge(Layer.mergeAll(Quotas.layer, NativeBatches.layer)),
  Layer.provideMerge(Layer.mergeAll(Inference.layer, Files.layer)),
  Layer.provideMerge(
    Layer.mergeAll(
      OAuth.layer,
      StreamWatchdog.layer,
      InternalCalls.layer,
      ResponseStore.layer,
      ResponsesMcp.layer,
      ResponsesCompaction.layer,
      FileStore.layer,
      Batches.layer,
      Evals.layer,
      IssueTracker.layer,
      Compression.layer,
      Bridges.layer,
      RealtimeSecrets.layer
    )
  )
)
