import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import type { RequestHooks } from "../kernel/RequestHooks.js"
import type { AppConfig } from "../platform/config/AppConfig.js"
import type { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { HostPolicy } from "../platform/http/HostPolicy.js"
import type { Settings } from "../platform/settings/Settings.js"
import type { BatchWriter } from "../platform/store/BatchWriter.js"
import type { KeyValue } from "../platform/store/KeyValue.js"
import type { Secrets } from "../platform/store/Secrets.js"
import type { StoreVersion } from "../platform/store/StoreVersion.js"
import type { AdminAuth } from "../services/auth/AdminAuth.js"
import type { ApiKeys } from "../services/auth/ApiKeys.js"
import { McpCallHooks } from "../services/mcp/McpCallHooks.js"
import { McpOAuth } from "../services/mcp/McpOAuth.js"
import { McpServers } from "../services/mcp/McpServers.js"
import { Playground } from "../services/playground/Playground.js"
import { Plugins } from "../services/plugins/Plugins.js"
import type { Cooldowns } from "../services/resilience/Cooldowns.js"
import type { Resilience } from "../services/resilience/Resilience.js"
import type { Combos } from "../services/routing/Combos.js"
import type { Router } from "../services/routing/Router.js"
import type { RoutingMemory } from "../services/routing/RoutingMemory.js"
import { SkillCatalog } from "../services/skills/SkillCatalog.js"
import { SkillRunner } from "../services/skills/SkillRunner.js"
import { TokenTunnelConnector } from "../services/tunnels/TokenTunnelConnector.js"
import { Tunnels } from "../services/tunnels/Tunnels.js"
import type { UsageQueries } from "../services/usage/UsageQueries.js"
import type { Connections } from "../upstream/providers/Connections.js"
import type { ProviderChecks } from "../upstream/providers/ProviderChecks.js"
import { AcpAgents } from "./clitools/AcpAgents.js"
import { CliTools } from "./clitools/CliTools.js"
import { CliToolsConfig } from "./clitools/CliToolsConfig.js"
import { McpHttp } from "./mcp/McpHttp.js"
import { McpTools } from "./mcp/McpTools.js"

/**
 * The extensions area: coding tools, ACP agents, skills, MCP (the gateway's own server and the registry of upstream ones), host
 * policy, plugins, playground, tunnels.
 * Under management/ because MCP and the coding tools are management's; its type says what it reads.
 */
export const ExtensionsLive: Layer.Layer<
  | CliToolsConfig
  | CliTools
  | AcpAgents
  | SkillCatalog
  | McpTools
  | HostPolicy
  | McpHttp
  | McpServers
  | McpOAuth
  | McpCallHooks
  | Plugins
  | Playground
  | Tunnels,
  ConfigError,
  | AppConfig
  | SqlClient
  | BatchWriter
  | KeyValue
  | Secrets
  | StoreVersion
  | FeatureFlags
  | Settings
  | ApiKeys
  | AdminAuth
  | Connections
  | ProviderChecks
  | Combos
  | RequestHooks
  | Resilience
  | Cooldowns
  | RoutingMemory
  | UsageQueries
  | Router
> = Layer.mergeAll(McpHttp.layer, Plugins.layer, Playground.layer, Tunnels.layer.pipe(Layer.provide(TokenTunnelConnector.layer))).pipe(
  Layer.provideMerge(Layer.mergeAll(McpTools.layer.pipe(Layer.provide(SkillRunner.layer)), HostPolicy.layer)),
  Layer.provideMerge(
    Layer.mergeAll(SkillCatalog.layer, Layer.mergeAll(CliTools.layer, AcpAgents.layer).pipe(Layer.provideMerge(CliToolsConfig.layer)))
  ),
  // The registry of upstream MCP servers and the sign-ins to them, under everything of the area (the connections to them read both).
  Layer.provideMerge(Layer.merge(McpOAuth.layer, McpCallHooks.layer)),
  Layer.provideMerge(McpServers.layer)
)
