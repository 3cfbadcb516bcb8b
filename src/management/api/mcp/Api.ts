import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { McpRestartResult, McpStatus } from "../../../domain/mcp.js"
import { ManagementAuth } from "../Principal.js"

/** The MCP server's state (docs/mcp.md): `GET /api/mcp/status`, `POST /api/mcp/restart`. */
export class McpGroup extends HttpApiGroup.make("mcp")
  .add(HttpApiEndpoint.get("status", "/api/mcp/status").addSuccess(McpStatus))
  .add(HttpApiEndpoint.post("restart", "/api/mcp/restart").addSuccess(McpRestartResult))
  .middleware(ManagementAuth) {}
