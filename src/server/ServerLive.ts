import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import { BatchRunner, type Batches } from "../inference/batches/Batches.js"
import type { NativeBatches } from "../inference/batches/NativeBatches.js"
import type { InferenceRoutes } from "../inference/InferenceRoutes.js"
import { Bridges } from "../inference/bridge/Bridges.js"
import { ResponsesMcp } from "../inference/mcp/ResponsesMcp.js"
import { ResponsesCompaction } from "../inference/compaction/ResponsesCompaction.js"
import { EvalRunner, type Evals } from "../inference/evals/Evals.js"
import type { Files } from "../inference/files/Files.js"
import type { Quotas } from "../inference/quotas/Quotas.js"
import type { StreamWatchdog } from "../inference/StreamWatchdog.js"
import type { StreamTimeouts } from "../inference/StreamTimeouts.js"
import type { RequestHooks } from "../kernel/RequestHooks.js"
import { type GatewayServer, type InternalCalls, OwnRoutes } from "../kernel/internalCall.js"
import type { ManagementHandler } from "../management/api/ManagementHandler.js"
import type { InspectorFeed } from "../management/dashboard/InspectorFeed.js"
import type { LiveFeed } from "../management/dashboard/LiveFeed.js"
import type { Dashboard } from "../management/dashboard/Dashboard.js"
import type { McpHttp } from "../management/mcp/McpHttp.js"
import type { McpGateway } from "../inference/mcp/McpGateway.js"
import type { CloudSync } from "../management/sync/CloudSync.js"
import type { AppConfig } from "../platform/config/AppConfig.js"
import type { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import type { Settings } from "../platform/settings/Settings.js"
import { SettingsHooks } from "../platform/settings/SettingsHooks.js"
import { type Backups, ScheduledBackups } from "../platform/store/Backups.js"
import { SharedStorageKeyCheck, type StorageKeyMismatch } from "../platform/store/keyCheck.js"
import type { Secrets } from "../platform/store/Secrets.js"
import type { StoreHealth } from "../platform/store/StoreHealth.js"
import { IdleMemory, type ServerActivity } from "../platform/system/IdleMemory.js"
import { MallocTrim } from "../platform/system/MallocTrim.js"
import type { InboundLimits } from "../services/accounting/InboundLimits.js"
import type { Pricing } from "../services/accounting/Pricing.js"
import type { AdminAuth } from "../services/auth/AdminAuth.js"
import type { ApiKeys } from "../services/auth/ApiKeys.js"
import { Compat } from "../services/compat/Compat.js"
import { Compression } from "../services/context/Compression.js"
import { ContextHooks } from "../services/context/ContextHooks.js"
import type { ContextStore } from "../services/context/ContextStore.js"
import type { Guardrails } from "../services/guardrails/Guardrails.js"
import { Inspector } from "../services/inspector/Inspector.js"
import type { OAuth } from "../services/oauth/OAuth.js"
import { Playground } from "../services/playground/Playground.js"
import type { Cooldowns } from "../services/resilience/Cooldowns.js"
import type { AutoEngine } from "../services/routing/AutoEngine.js"
import type { Combos } from "../services/routing/Combos.js"
import { Replay } from "../services/shadow/Replay.js"
import { ShadowRunner } from "../services/shadow/runner.js"
import type { Shadow } from "../services/shadow/Shadow.js"
import { Tunnels } from "../services/tunnels/Tunnels.js"
import type { UpstreamHttp } from "../upstream/client/UpstreamHttp.js"
import type { Connections } from "../upstream/providers/Connections.js"
import type { ProviderChecks } from "../upstream/providers/ProviderChecks.js"
import { BackgroundTasks } from "./BackgroundTasks.js"
import type { EventBus } from "../platform/events/EventBus.js"
import type { RealtimeSecrets } from "../inference/RealtimeSecrets.js"
import { RealtimeWebSocket } from "./RealtimeWebSocket.js"
import { ResponsesWebSocket } from "./ResponsesWebSocket.js"
import * as Server from "./Server.js"

/**
 * The server area: the transports (HTTP, the Responses WebSocket), the own routes and what starts once the
 * server listens. Built last, so it stops first; its type says what it reads.
 */
export const ServerLive: Layer.Layer<
  GatewayServer | ServerActivity | OwnRoutes,
  Server.ServerStartError | StorageKeyMismatch | ConfigError,
  | AppConfig
  | SqlClient
  | StoreHealth
  | Secrets
  | Backups
  | FeatureFlags
  | Settings
  | ApiKeys
  | AdminAuth
  | Connections
  | ProviderChecks
  | UpstreamHttp
  | Combos
  | AutoEngine
  | ContextStore
  | RequestHooks
  | Cooldowns
  | Pricing
  | McpHttp
  | McpGateway
  | ResponsesMcp
  | ResponsesCompaction
  | Bridges
  | Playground
  | Tunnels
  | Inspector
  | Shadow
  | Replay
  | Compat
  | InternalCalls
  | OAuth
  | Batches
  | NativeBatches
  | Files
  | Quotas
  | Evals
  | Compression
  | InferenceRoutes
  | StreamWatchdog
  | StreamTimeouts
  | Guardrails
  | InboundLimits
  | ManagementHandler
  | Dashboard
  | LiveFeed
  | InspectorFeed
  | CloudSync
  | EventBus
  | RealtimeSecrets
> = Layer.mergeAll(
  BatchRunner.layer,
  ScheduledBackups,
  SettingsHooks,
  ContextHooks,
  Compression.ownRoutesLayer,
  Playground.ownRoutesLayer,
  ResponsesMcp.ownRoutesLayer,
  ResponsesCompaction.ownRoutesLayer,
  Bridges.ownRoutesLayer,
  Tunnels.targetLayer,
  Inspector.replayLayer,
  EvalRunner,
  ShadowRunner,
  Replay.ownRoutesLayer,
  Compat.ownRoutesLayer,
  BackgroundTasks,
  SharedStorageKeyCheck,
  IdleMemory,
  MallocTrim
).pipe(
  Layer.provideMerge(
    OwnRoutes.layer.pipe(
      Layer.provideMerge(Server.layer.pipe(Layer.provide(Layer.merge(ResponsesWebSocket.layer, RealtimeWebSocket.layer))))
    )
  )
)
