import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadGateway, BadRequest, Conflict, NotFound, ServiceUnavailable } from "../../../domain/errors.js"
import { McpRestartResult, McpStatus } from "../../../domain/mcp.js"
import {
  AllowMcpTools,
  CallMcpTool,
  CreateMcpServer,
  McpCallResult,
  McpOAuthCallbackQuery,
  McpOAuthSignedIn,
  McpOAuthStarted,
  McpOffering,
  McpServerView,
  UpdateMcpServer
} from "../../../domain/mcpServers.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** The MCP server's state (docs/mcp.md): `GET /api/mcp/status`, `POST /api/mcp/restart`. */
export class McpGroup extends HttpApiGroup.make("mcp")
  .add(HttpApiEndpoint.get("status", "/api/mcp/status").addSuccess(McpStatus))
  .add(HttpApiEndpoint.post("restart", "/api/mcp/restart").addSuccess(McpRestartResult))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}

/** A registered server's name in the path (an unknown one is a 404). */
const ServerPath = Schema.Struct({ name: Schema.String })

/**
 * `/api/mcp/servers`: the registry of upstream MCP servers served through the gateway (docs/mcp.md,
 * "MCP servers behind the gateway"). Listings mask every env and header value, and the credentials of a url and of the arguments.
 */
export class McpServersGroup extends HttpApiGroup.make("mcpServers")
  .add(HttpApiEndpoint.get("list", "/api/mcp/servers").addSuccess(Schema.Struct({ servers: Schema.Array(McpServerView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/mcp/servers")
      .setPayload(CreateMcpServer)
      .addSuccess(McpServerView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("get", "/api/mcp/servers/:name").setPath(ServerPath).addSuccess(McpServerView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/api/mcp/servers/:name")
      .setPath(ServerPath)
      .setPayload(UpdateMcpServer)
      .addSuccess(McpServerView)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/mcp/servers/:name")
      .setPath(ServerPath)
      .addSuccess(Schema.Struct({ removed: McpServerView }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("allow", "/api/mcp/servers/:name/allow")
      .setPath(ServerPath)
      .setPayload(AllowMcpTools)
      .addSuccess(McpServerView)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("tools", "/api/mcp/servers/:name/tools")
      .setPath(ServerPath)
      .addSuccess(Schema.Struct({ offerings: Schema.Array(McpOffering) }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("call", "/api/mcp/servers/:name/call")
      .setPath(ServerPath)
      .setPayload(CallMcpTool)
      .addSuccess(McpCallResult)
      .addError(NotFound)
      .addError(BadGateway)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.post("oauthStart", "/api/mcp/servers/:name/oauth/start")
      .setPath(ServerPath)
      .addSuccess(McpOAuthStarted)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.post("oauthLogout", "/api/mcp/servers/:name/oauth/logout")
      .setPath(ServerPath)
      .addSuccess(McpServerView)
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}

/**
 * The authorization server's redirect of the user's browser after an MCP server's sign-in
 * (`GET /api/mcp/oauth/callback`, docs/mcp.md, "Signing in to a remote server (OAuth)"): it carries
 * no management credentials, so the one-time `state` of a sign-in an administrator began (and its
 * PKCE verifier, kept in the gateway) is what authorizes it.
 */
export class McpOAuthCallbackGroup extends HttpApiGroup.make("mcpOAuthCallback").add(
  HttpApiEndpoint.get("callback", "/api/mcp/oauth/callback")
    .setUrlParams(McpOAuthCallbackQuery)
    .addSuccess(McpOAuthSignedIn)
    .addError(BadRequest)
    .addError(NotFound)
    .addError(BadGateway)
) {}
