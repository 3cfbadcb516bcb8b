import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AdminAuth } from "./auth/AdminAuth.js"
import { ApiKeys } from "./auth/ApiKeys.js"
import { AppConfig, type AppConfigShape } from "./config/AppConfig.js"
import { FeatureFlags } from "./flags/FeatureFlags.js"
import { Dashboard } from "./dashboard/Static.js"
import { LiveFeed } from "./dashboard/LiveFeed.js"
import { GatewayServer } from "./http/Server.js"
import { InferenceRoutes } from "./inference/dispatch.js"
import { RequestHooks } from "./inference/hooks.js"
import { Guardrails } from "./guardrails/Guardrails.js"
import { Inference } from "./inference/pipeline.js"
import { MediaJobs } from "./media/MediaJobs.js"
import { WebSearch } from "./search/WebSearch.js"
import { IssueTracker } from "./quotas/IssueTracker.js"
import { Quotas } from "./quotas/Quotas.js"
import { Files } from "./files/Files.js"
import { FileStore } from "./files/FileStore.js"
import { BatchRunner, Batches, InternalCalls } from "./batches/Batches.js"
import { NativeBatches } from "./batches/native.js"
import { ResponseStore } from "./inference/responseStore.js"
import { ResponsesWebSocket } from "./inference/responsesWs.js"
import { StreamWatchdog } from "./inference/stream.js"
import { StreamTimeouts } from "./inference/timeouts.js"
import { ManagementHandler } from "./management/App.js"
import * as Logging from "./observability/Logging.js"
import { ProcessGuard } from "./observability/ProcessGuard.js"
import { Connections } from "./providers/Connections.js"
import { OAuth } from "./providers/OAuth.js"
import { ProviderChecks } from "./providers/ProviderChecks.js"
import { BackgroundTasks } from "./system/BackgroundTasks.js"
import { BatchWriter } from "./store/BatchWriter.js"
import * as Db from "./store/Db.js"
import { SharedStorageKeyCheck } from "./store/keyCheck.js"
import { KeyValue } from "./store/KeyValue.js"
import { Secrets } from "./store/Secrets.js"
import { StoreVersion } from "./store/StoreVersion.js"
import { Backups, ScheduledBackups } from "./store/Backups.js"
import { ConfigBundle } from "./sync/Bundle.js"
import { CloudStore } from "./sync/CloudStore.js"
import { CloudSync } from "./sync/CloudSync.js"
import { Settings } from "./settings/Settings.js"
import { Egress } from "./egress/Egress.js"
import { ProxyRegistry } from "./egress/ProxyRegistry.js"
import { SettingsHooks } from "./settings/SettingsHooks.js"
import { Compression } from "./context/Compression.js"
import { ContextHooks } from "./context/ContextHooks.js"
import { ContextStore } from "./context/ContextStore.js"
import { SummarizerLive } from "./context/Summarizer.js"
import { UpstreamHttp } from "./upstream/UpstreamHttp.js"
import { AuditLog } from "./governance/AuditLog.js"
import { EvalRunner, Evals } from "./governance/Evals.js"
import { Policies } from "./governance/Policies.js"
import { EventBus } from "./events/EventBus.js"
import { Webhooks } from "./webhooks/Webhooks.js"
import { SkillCatalog } from "./skills/SkillCatalog.js"
import { AcpAgents } from "./clitools/AcpAgents.js"
import { CliTools } from "./clitools/CliTools.js"
import { CliToolsConfig } from "./clitools/CliToolsConfig.js"
import { McpHttp } from "./mcp/McpHttp.js"
import { HostPolicy } from "./http/hostPolicy.js"
import { McpTools } from "./mcp/McpTools.js"
import { ConnectionSlots } from "./resilience/ConnectionSlots.js"
import { Resilience } from "./resilience/Resilience.js"
import { ResilienceConfig } from "./resilience/ResilienceConfig.js"
import { RoutingMemory } from "./routing/RoutingMemory.js"
import { AutoEngine } from "./routing/AutoEngine.js"
import { Combos } from "./routing/Combos.js"
import { Router } from "./routing/Router.js"
import { Aliases } from "./routing/Aliases.js"
import { ProviderNodes } from "./providers/ProviderNodes.js"
import { ProviderModels } from "./providers/ProviderModels.js"
import { Usage } from "./usage/Usage.js"
import { UsageQueries, UsageRetention } from "./usage/UsageQueries.js"
import { Accounting } from "./accounting/Accounting.js"
import { AccountingConfig } from "./accounting/AccountingConfig.js"
import { Budgets } from "./accounting/Budgets.js"
import { Idempotency } from "./accounting/Idempotency.js"
import { Pricing } from "./accounting/Pricing.js"
import { ResponseCache } from "./accounting/ResponseCache.js"
import { TokenLimits } from "./accounting/TokenLimits.js"
import { InboundLimits } from "./accounting/InboundLimits.js"
import { InFlight } from "./usage/InFlight.js"
import { SharedState } from "./state/SharedState.js"
import { layerForProcess } from "./state/clusterIpc.js"
import { Lifecycle } from "./system/Lifecycle.js"
import { Observability } from "./observability/Observability.js"

/** The database and what sits directly on it. Needs AppConfig. */
export const StoreLayer = Layer.mergeAll(BatchWriter.layer, KeyValue.layer, StoreVersion.layer(), Secrets.layer).pipe(
  Layer.provideMerge(Db.layer)
)

/** Every service of the gateway except the HTTP server; the CLI uses this on the local database. */
export const CoreLayer = Layer.mergeAll(ProviderChecks.layer, ConfigBundle.layer, Aliases.layer, ProviderModels.layer, ProviderNodes.layer).pipe(
  // Upstream proxies (src/egress/): the registry, the global default of the settings, one dispatcher per proxy.
  Layer.provideMerge(Egress.layer),
  Layer.provideMerge(Layer.mergeAll(Settings.layer, ProxyRegistry.layer, ContextStore.layer)),
  Layer.provideMerge(Backups.layer),
  Layer.provideMerge(Layer.mergeAll(ApiKeys.layer, AdminAuth.layer, Usage.layer, Connections.layer, Combos.layer)),
  Layer.provideMerge(AutoEngine.layer),
  Layer.provideMerge(UpstreamHttp.layer),
  Layer.provideMerge(FeatureFlags.layer),
  Layer.provideMerge(StoreLayer)
)

/**
 * The whole gateway: core services plus the HTTP server for both planes. Needs AppConfig and
 * StreamTimeouts; reads SharedState when it is provided (else each service is this process's own).
 */
export const ServerLayer = Layer.mergeAll(BatchRunner.layer, ScheduledBackups, SettingsHooks, ContextHooks, SummarizerLive, EvalRunner, BackgroundTasks, SharedStorageKeyCheck).pipe(
  Layer.provideMerge(GatewayServer.layer),
  Layer.provideMerge(Layer.mergeAll(ResponsesWebSocket.layer, Dashboard.layer, LiveFeed.layer)),
  Layer.provideMerge(Layer.mergeAll(InferenceRoutes.layer, ManagementHandler.layer)),
  Layer.provideMerge(McpHttp.layer),
  Layer.provideMerge(Layer.mergeAll(McpTools.layer, HostPolicy.layer)),
  Layer.provide(MediaJobs.layer),
  Layer.provide(WebSearch.layer),
  Layer.provideMerge(Layer.mergeAll(Quotas.layer, IssueTracker.layer, NativeBatches.layer, CloudStore.layer, CloudSync.layer, Policies.layer, AuditLog.layer, Evals.layer, Webhooks.layer, SkillCatalog.layer, Compression.layer)),
  // Coding tools and ACP agents on the server's machine (src/clitools/, docs/coding-tools.md).
  Layer.provideMerge(Layer.mergeAll(CliTools.layer, AcpAgents.layer).pipe(Layer.provideMerge(CliToolsConfig.layer))),
  Layer.provideMerge(Layer.mergeAll(Batches.layer, InternalCalls.layer, Files.layer).pipe(Layer.provideMerge(FileStore.layer))),
  Layer.provide(Inference.layer),
  Layer.provide(StreamWatchdog.layer),
  Layer.provide(Router.layer),
  Layer.provideMerge(Observability.layer),
  Layer.provideMerge(OAuth.layer),
  Layer.provideMerge(Layer.mergeAll(Resilience.live, ConnectionSlots.layer, Accounting.layer)),
  Layer.provideMerge(Layer.mergeAll(Pricing.layer, Budgets.layer, TokenLimits.layer, InboundLimits.layer, ResponseCache.layer, Idempotency.layer, ResponseStore.layer, RequestHooks.layer, Guardrails.layer)),
  Layer.provideMerge(Layer.mergeAll(RoutingMemory.layer, ResilienceConfig.layer, EventBus.layer, UsageQueries.layer, UsageRetention, InFlight.layer, Lifecycle.layer)),
  Layer.provideMerge(AccountingConfig.layer),
  Layer.provideMerge(CoreLayer)
)

/** Shared state of this process: Redis when `REDIS_URL` is set (docs/scale-out.md, "Redis"), else this process's own. */
const SharedStateLive = Layer.unwrapEffect(
  Effect.flatMap(AppConfig, (c) =>
    c.redisUrl === undefined ? Effect.succeed(SharedState.layer) : Effect.promise(() => import("./state/redis.js")).pipe(Effect.map((r) => r.layerRedis(c.redisUrl!, { prefix: c.redisPrefix })))
  )
)

/** The server with configuration from the environment (plus overrides) and the process logger. */
export const live = (overrides: Partial<AppConfigShape> = {}) => {
  const config = AppConfig.layer(overrides)
  return Layer.merge(ServerLayer, ProcessGuard).pipe(
    // Redis when REDIS_URL is set (loaded only then); else a worker of `gateway --workers N`
    // talks to its siblings through the primary (src/state/clusterIpc.ts); else one process.
    Layer.provide(layerForProcess(SharedStateLive)),
    Layer.provide(StreamTimeouts.layer),
    Layer.provide(Logging.layerWithFile),
    Layer.provide(config),
    Layer.provideMerge(config)
  )
}
