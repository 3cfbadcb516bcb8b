import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { McpHttp } from "../../mcp/McpHttp.js"
import { ManagementApi } from "../Api.js"

export const layer = HttpApiBuilder.group(ManagementApi, "mcp", (handlers) =>
  Effect.map(McpHttp, (mcp) => handlers.handle("status", () => mcp.status).handle("restart", () => mcp.restart))
)
