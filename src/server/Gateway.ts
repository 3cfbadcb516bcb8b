import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AppConfig, type AppConfigShape } from "../platform/config/AppConfig.js"
import { Dashboard } from "../management/dashboard/Static.js"
import { LiveFeed } from "../management/dashboard/LiveFeed.js"
import { GatewayServerLive } from "./Server.js"
import { InternalCalls, OwnRoutes } from "../kernel/internalCall.js"
import { InferenceRoutes } from "../inference/dispatch.js"
import { RequestHooks } from "../kernel/hooks.js"
import { Guardrails } from "../services/guardrails/Guardrails.js"
import { Inference } from "../inference/pipeline.js"
import { MediaJobs } from "../inference/media/MediaJobs.js"
import { WebSearch } from "../inference/search/WebSearch.js"
import { IssueTracker } from "../inference/quotas/IssueTracker.js"
import { Quotas } from "../inference/quotas/Quotas.js"
import { Files } from "../inference/files/Files.js"
import { FileStore } from "../inference/files/FileStore.js"
import { BatchRunner, Batches } from "../inference/batches/Batches.js"
import { NativeBatches } from "../inference/batches/native.js"
import { ResponseStore } from "../inference/responseStore.js"
import { ResponsesWebSocket } from "../inference/responsesWs.js"
import { StreamWatchdog } from "../inference/stream.js"
import { StreamTimeouts } from "../inference/timeouts.js"
import { ManagementHandler } from "../management/api/App.js"
import * as Logging from "../services/observability/Logging.js"
import { ProcessGuard } from "../services/observability/ProcessGuard.js"
import { OAuth } from "../services/oauth/OAuth.js"
import { BackgroundTasks } from "./BackgroundTasks.js"
import { IdleMemory } from "../platform/system/IdleMemory.js"
import { SharedStorageKeyCheck } from "../platform/store/keyCheck.js"
import { ScheduledBackups } from "../platform/store/Backups.js"
import { CloudStore } from "../management/sync/CloudStore.js"
import { CloudSync } from "../management/sync/CloudSync.js"
import { SettingsHooks } from "../platform/settings/SettingsHooks.js"
import { Compression } from "../services/context/Compression.js"
import { ContextHooks } from "../services/context/ContextHooks.js"
import { SummarizerLive } from "../services/context/Summarizer.js"
import { AuditLog } from "../services/governance/AuditLog.js"
import { EvalRunner, Evals } from "../inference/evals/Evals.js"
import { Shadow } from "../services/shadow/Shadow.js"
import { Compat } from "../services/compat/Compat.js"
import { Replay } from "../services/shadow/Replay.js"
import { ShadowRunner } from "../services/shadow/runner.js"
import { Policies } from "../services/governance/Policies.js"
import { EventBus } from "../platform/events/EventBus.js"
import { Webhooks } from "../services/webhooks/Webhooks.js"
import { SkillCatalog } from "../services/skills/SkillCatalog.js"
import { SkillRunner } from "../services/skills/SkillRunner.js"
import { AcpAgents } from "../management/clitools/AcpAgents.js"
import { CliTools } from "../management/clitools/CliTools.js"
import { CliToolsConfig } from "../management/clitools/CliToolsConfig.js"
import { McpHttp } from "../management/mcp/McpHttp.js"
import { HostPolicy } from "../platform/http/hostPolicy.js"
import { McpTools } from "../management/mcp/McpTools.js"
import { ConnectionSlots } from "../services/resilience/ConnectionSlots.js"
import { Resilience } from "../services/resilience/Resilience.js"
import { ResilienceConfig } from "../services/resilience/ResilienceConfig.js"
import { RoutingMemory } from "../services/routing/RoutingMemory.js"
import { Router } from "../services/routing/Router.js"
import { UsageQueries, UsageRetention } from "../services/usage/UsageQueries.js"
import { Accounting } from "../services/accounting/Accounting.js"
import { AccountingConfig } from "../services/accounting/AccountingConfig.js"
import { Budgets } from "../services/accounting/Budgets.js"
import { Idempotency } from "../services/accounting/Idempotency.js"
import { Pricing } from "../services/accounting/Pricing.js"
import { ResponseCache } from "../services/accounting/ResponseCache.js"
import { TokenLimits } from "../services/accounting/TokenLimits.js"
import { InboundLimits } from "../services/accounting/InboundLimits.js"
import { InFlight } from "../services/usage/InFlight.js"
import { SharedState } from "../platform/state/SharedState.js"
import { layerForProcess } from "../platform/state/clusterIpc.js"
import { Lifecycle } from "../platform/system/Lifecycle.js"
import { Observability } from "../services/observability/Observability.js"
import { Capture } from "../services/inspector/Capture.js"
import { Inspector } from "../services/inspector/Inspector.js"
import { InspectorConfig } from "../services/inspector/InspectorConfig.js"
import { Tproxy, TproxySystem } from "../services/inspector/Tproxy.js"
import { Plugins } from "../services/plugins/Plugins.js"
import { Playground, PlaygroundCallerLive } from "../services/playground/Playground.js"
import { Tunnels, TunnelsTargetLive } from "../services/tunnels/Tunnels.js"
import { TokenTunnelConnectorLive } from "../services/tunnels/token.js"
import { InspectorFeed } from "../management/dashboard/InspectorFeed.js"

// The core (every service but the HTTP server) is its own module so that the CLI's local commands
// load only it, not the server's graph (src/server/CoreLayer.ts).
import { CoreLayer, StoreLayer } from "./CoreLayer.js"
export { CoreLayer, StoreLayer }

/**
 * The whole gateway: core services plus the HTTP server for both planes. Needs AppConfig and
 * StreamTimeouts; reads SharedState when it is provided (else each service is this process's own).
 */
export const ServerLayer = Layer.mergeAll(
  BatchRunner.layer,
  ScheduledBackups,
  SettingsHooks,
  ContextHooks,
  SummarizerLive,
  PlaygroundCallerLive,
  TunnelsTargetLive,
  Inspector.replayLayer,
  EvalRunner,
  ShadowRunner,
  Replay.ownRoutesLayer,
  Compat.ownRoutesLayer,
  BackgroundTasks,
  SharedStorageKeyCheck,
  IdleMemory
).pipe(
  Layer.provideMerge(OwnRoutes.layer.pipe(Layer.provideMerge(GatewayServerLive))),
  Layer.provideMerge(Layer.mergeAll(ResponsesWebSocket.layer, Dashboard.layer, LiveFeed.layer, InspectorFeed.layer)),
  // Replay reads the inspector's sessions (below) and is read by the management API.
  Layer.provideMerge(Layer.mergeAll(InferenceRoutes.layer, ManagementHandler.layer.pipe(Layer.provideMerge(Layer.mergeAll(Replay.layer, Compat.layer))))),
  // The traffic inspector (src/services/inspector/): the buffer and its agent-bridge listener, then the capture modes.
  Layer.provideMerge(
    Layer.mergeAll(Capture.layer, Tproxy.layer).pipe(Layer.provideMerge(Inspector.layer), Layer.provideMerge(InspectorConfig.layer), Layer.provideMerge(TproxySystem.layer))
  ),
  // Plugins (src/services/plugins/): one sandboxed process each, attached to the request lifecycle.
  Layer.provideMerge(Layer.mergeAll(McpHttp.layer, Plugins.layer, Playground.layer, Tunnels.layer.pipe(Layer.provide(TokenTunnelConnectorLive)))),
  Layer.provideMerge(Layer.mergeAll(McpTools.layer.pipe(Layer.provide(SkillRunner.layer)), HostPolicy.layer)),
  Layer.provide(Layer.mergeAll(MediaJobs.layer, WebSearch.layer)),
  Layer.provideMerge(
    Layer.mergeAll(
      Quotas.layer,
      IssueTracker.layer,
      NativeBatches.layer,
      CloudStore.layer,
      CloudSync.layer,
      Policies.layer,
      AuditLog.layer,
      Evals.layer,
      Shadow.layer,
      Webhooks.layer,
      SkillCatalog.layer,
      Compression.layer
    )
  ),
  // Coding tools and ACP agents on the server's machine (src/management/clitools/, docs/coding-tools.md).
  Layer.provideMerge(Layer.mergeAll(CliTools.layer, AcpAgents.layer).pipe(Layer.provideMerge(CliToolsConfig.layer))),
  Layer.provideMerge(Layer.mergeAll(Batches.layer, InternalCalls.layer, Files.layer).pipe(Layer.provideMerge(FileStore.layer))),
  Layer.provide(Inference.layer),
  Layer.provide(StreamWatchdog.layer),
  Layer.provide(Router.layer),
  Layer.provideMerge(Observability.layer),
  Layer.provideMerge(OAuth.layer),
  Layer.provideMerge(Layer.mergeAll(Resilience.live, ConnectionSlots.layer, Accounting.layer)),
  Layer.provideMerge(
    Layer.mergeAll(
      Pricing.layer,
      Budgets.layer,
      TokenLimits.layer,
      InboundLimits.layer,
      ResponseCache.layer,
      Idempotency.layer,
      ResponseStore.layer,
      RequestHooks.layer,
      Guardrails.layer
    )
  ),
  Layer.provideMerge(Layer.mergeAll(RoutingMemory.layer, ResilienceConfig.layer, EventBus.layer, UsageQueries.layer, UsageRetention, InFlight.layer, Lifecycle.layer)),
  Layer.provideMerge(AccountingConfig.layer),
  Layer.provideMerge(CoreLayer)
)

/** Shared state of this process: Redis when `REDIS_URL` is set (docs/scale-out.md, "Redis"), else this process's own. */
const SharedStateLive = Layer.unwrapEffect(
  Effect.flatMap(AppConfig, (c) =>
    c.redisUrl === undefined
      ? Effect.succeed(SharedState.layer)
      : Effect.promise(() => import("../platform/state/redis.js")).pipe(Effect.map((r) => r.layerRedis(c.redisUrl!, { prefix: c.redisPrefix })))
  )
)

/** The server with configuration from the environment (plus overrides) and the process logger. */
export const live = (overrides: Partial<AppConfigShape> = {}) => {
  const config = AppConfig.layer(overrides)
  return Layer.merge(ServerLayer, ProcessGuard).pipe(
    // Redis when REDIS_URL is set (loaded only then); else a worker of `gateway --workers N`
    // talks to its siblings through the primary (src/platform/state/clusterIpc.ts); else one process.
    Layer.provide(layerForProcess(SharedStateLive)),
    Layer.provide(StreamTimeouts.layer),
    Layer.provide(Logging.layerWithFile),
    Layer.provide(config),
    Layer.provideMerge(config)
  )
}
