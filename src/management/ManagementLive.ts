import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import type { Evals } from "../inference/evals/Evals.js"
import type { AppConfig } from "../platform/config/AppConfig.js"
import type { EventBus } from "../platform/events/EventBus.js"
import type { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import type { Settings } from "../platform/settings/Settings.js"
import type { Backups } from "../platform/store/Backups.js"
import type { KeyValue } from "../platform/store/KeyValue.js"
import type { Secrets } from "../platform/store/Secrets.js"
import { Lifecycle } from "../platform/system/Lifecycle.js"
import type { AccountingConfig } from "../services/accounting/AccountingConfig.js"
import type { Budgets } from "../services/accounting/Budgets.js"
import type { Idempotency } from "../services/accounting/Idempotency.js"
import type { InboundLimits } from "../services/accounting/InboundLimits.js"
import type { Levels } from "../services/accounting/Levels.js"
import type { Pricing } from "../services/accounting/Pricing.js"
import type { ResponseCache } from "../services/accounting/ResponseCache.js"
import type { TokenLimits } from "../services/accounting/TokenLimits.js"
import type { AdminAuth } from "../services/auth/AdminAuth.js"
import type { ApiKeys } from "../services/auth/ApiKeys.js"
import type { Compat } from "../services/compat/Compat.js"
import type { Compression } from "../services/context/Compression.js"
import type { ContextStore } from "../services/context/ContextStore.js"
import type { AuditLog } from "../services/governance/AuditLog.js"
import type { Policies } from "../services/governance/Policies.js"
import type { Capture } from "../services/inspector/Capture.js"
import type { Inspector } from "../services/inspector/Inspector.js"
import type { Tproxy } from "../services/inspector/Tproxy.js"
import type { McpOAuth } from "../services/mcp/McpOAuth.js"
import type { McpServers } from "../services/mcp/McpServers.js"
import type { OAuth } from "../services/oauth/OAuth.js"
import type { GatewayMetrics } from "../services/observability/GatewayMetrics.js"
import type { Playground } from "../services/playground/Playground.js"
import type { Plugins } from "../services/plugins/Plugins.js"
import type { CircuitBreakers } from "../services/resilience/CircuitBreakers.js"
import type { Cooldowns } from "../services/resilience/Cooldowns.js"
import type { Lockouts } from "../services/resilience/Lockouts.js"
import type { Resilience } from "../services/resilience/Resilience.js"
import type { QuotaQueue } from "../services/resilience/QuotaQueue.js"
import type { ResilienceConfig } from "../services/resilience/ResilienceConfig.js"
import type { Aliases } from "../services/routing/Aliases.js"
import type { AutoEngine } from "../services/routing/AutoEngine.js"
import type { Combos } from "../services/routing/Combos.js"
import type { Router } from "../services/routing/Router.js"
import type { RoutingMemory } from "../services/routing/RoutingMemory.js"
import type { Replay } from "../services/shadow/Replay.js"
import type { Shadow } from "../services/shadow/Shadow.js"
import type { SkillCatalog } from "../services/skills/SkillCatalog.js"
import type { Directory } from "../services/teams/Directory.js"
import type { Tunnels } from "../services/tunnels/Tunnels.js"
import type { UsageQueries } from "../services/usage/UsageQueries.js"
import type { Webhooks } from "../services/webhooks/Webhooks.js"
import type { UpstreamHttp } from "../upstream/client/UpstreamHttp.js"
import type { Egress } from "../upstream/egress/Egress.js"
import type { ProxyRegistry } from "../upstream/egress/ProxyRegistry.js"
import type { Connections } from "../upstream/providers/Connections.js"
import type { ProviderChecks } from "../upstream/providers/ProviderChecks.js"
import type { ProviderModels } from "../upstream/providers/ProviderModels.js"
import type { ProviderNodes } from "../upstream/providers/ProviderNodes.js"
import { ManagementHandler } from "./api/ManagementHandler.js"
import { SingleSignOn } from "../services/auth/SingleSignOn.js"
import type { AcpAgents } from "./clitools/AcpAgents.js"
import type { CliTools } from "./clitools/CliTools.js"
import { InspectorFeed } from "./dashboard/InspectorFeed.js"
import { LiveFeed } from "./dashboard/LiveFeed.js"
import { Dashboard } from "./dashboard/Dashboard.js"
import type { McpHttp } from "./mcp/McpHttp.js"
import type { ConfigBundle } from "./sync/ConfigBundle.js"
import { CloudStore } from "./sync/CloudStore.js"
import { CloudSync } from "./sync/CloudSync.js"

/**
 * The management area: lifecycle, cloud store and sync, the management API over every area, the
 * dashboard and its feeds. Its type says what it reads.
 */
export const ManagementLive: Layer.Layer<
  Lifecycle | CloudStore | CloudSync | ManagementHandler | Dashboard | LiveFeed | InspectorFeed,
  ConfigError,
  | AppConfig
  | SqlClient
  | KeyValue
  | Secrets
  | Backups
  | FeatureFlags
  | Settings
  | ApiKeys
  | AdminAuth
  | Directory
  | Connections
  | ProviderChecks
  | ProviderModels
  | ProviderNodes
  | ProxyRegistry
  | UpstreamHttp
  | Egress
  | Combos
  | Aliases
  | AutoEngine
  | ContextStore
  | ConfigBundle
  | EventBus
  | ResilienceConfig
  | RoutingMemory
  | CircuitBreakers
  | Cooldowns
  | Lockouts
  | Resilience
  | QuotaQueue
  | AccountingConfig
  | Pricing
  | Budgets
  | TokenLimits
  | Levels
  | InboundLimits
  | ResponseCache
  | Idempotency
  | UsageQueries
  | GatewayMetrics
  | Policies
  | AuditLog
  | Webhooks
  | Router
  | CliTools
  | AcpAgents
  | SkillCatalog
  | McpHttp
  | McpServers
  | McpOAuth
  | Plugins
  | Playground
  | Tunnels
  | Inspector
  | Capture
  | Tproxy
  | Shadow
  | Replay
  | Compat
  | OAuth
  | Evals
  | Compression
> = Layer.mergeAll(Dashboard.layer, LiveFeed.layer, InspectorFeed.layer).pipe(
  // Single sign-on's service is the management plane's alone, built at start (its configuration read and checked then).
  Layer.provideMerge(ManagementHandler.layer.pipe(Layer.provide(SingleSignOn.layer))),
  Layer.provideMerge(Layer.mergeAll(Lifecycle.layer, CloudStore.layer, CloudSync.layer))
)
