import type * as Layer from "effect/Layer"
import * as L from "effect/Layer"
import type { AppConfig } from "../../platform/config/AppConfig.js"
import type { EventBus } from "../../platform/events/EventBus.js"
import type { HostPolicy } from "../../platform/http/HostPolicy.js"
import type { Secrets } from "../../platform/store/Secrets.js"
import type { Levels } from "../../services/accounting/Levels.js"
import type { ApiKeys } from "../../services/auth/ApiKeys.js"
import type { McpCallHooks } from "../../services/mcp/McpCallHooks.js"
import type { McpServers } from "../../services/mcp/McpServers.js"
import { McpUpstreams } from "../../services/mcp/McpUpstreams.js"
import { McpGateway } from "./McpGateway.js"
import { McpCallRecorder } from "./record.js"

/**
 * The MCP gateway's area (docs/mcp.md): the connections to the registered servers and the `/v1/mcp` endpoint over them. It reads the tool policy, the traffic inspector
 * and the metrics when the layers under it have them.
 */
export const McpGatewayLive: Layer.Layer<
  McpGateway | McpUpstreams,
  never,
  McpServers | McpCallHooks | AppConfig | ApiKeys | Levels | HostPolicy | EventBus | Secrets
> = McpGateway.layer.pipe(L.provide(McpCallRecorder.layer), L.provideMerge(McpUpstreams.layer))
