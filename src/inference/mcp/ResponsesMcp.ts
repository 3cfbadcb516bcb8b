/**
 * MCP tools in model requests (docs/mcp.md, "MCP tools in model requests"): a Responses request
 * whose tools hold `{type: "mcp", server_label}` entries, served for a model of any family by the
 * tool loop (toolLoop.ts), each model round through the gateway's own Responses route. The
 * service wires the loop to the registry, the connections, the checked call and the own routes.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InferenceError } from "../../kernel/errors.js"
import { bindOwnRoutes, type OwnRoutesShape, type TakesOwnRoutes } from "../../kernel/internalCall.js"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { Levels } from "../../services/accounting/Levels.js"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { McpServers } from "../../services/mcp/McpServers.js"
import { McpUpstreams } from "../../services/mcp/McpUpstreams.js"
import type { HttpRequestContext } from "../io.js"
import type { ResponseStoreShape } from "../ResponseStore.js"
import { McpGateway } from "./McpGateway.js"
import { makeToolLoop } from "./toolLoop.js"

/** Model rounds one request may take (`GATEWAY_MCP_MAX_TOOL_ROUNDS`). */
const DEFAULT_MAX_TOOL_ROUNDS = 8

export interface ResponsesMcpShape extends TakesOwnRoutes {
  /** Serves a Responses request whose tools hold `mcp` tools (`hasMcpTool`); `store` keeps the answer for previous_response_id. */
  readonly serve: (ctx: HttpRequestContext, body: Record<string, unknown>, store: ResponseStoreShape) => Effect.Effect<void, InferenceError>
}

export class ResponsesMcp extends Context.Tag("gateway/ResponsesMcp")<ResponsesMcp, ResponsesMcpShape>() {
  static readonly layer = Layer.effect(
    ResponsesMcp,
    Effect.gen(function* () {
      const loop = makeToolLoop({
        servers: yield* McpServers,
        upstreams: yield* McpUpstreams,
        checkedCall: (yield* McpGateway).checkedCall,
        keys: yield* ApiKeys,
        levels: yield* Levels,
        maxRounds: yield* positiveInteger("GATEWAY_MCP_MAX_TOOL_ROUNDS", "rounds", DEFAULT_MAX_TOOL_ROUNDS)
      })
      let own: OwnRoutesShape | undefined
      return {
        serve: (ctx, body, store) =>
          own === undefined
            ? Effect.fail(
                new InferenceError({
                  status: 503,
                  kind: "server",
                  code: "unavailable",
                  message: "MCP tools in requests are served once the gateway listens"
                })
              )
            : loop(ctx, body, store, own),
        setOwnRoutes: (routes) => {
          own = routes
        }
      } satisfies ResponsesMcpShape
    })
  )

  /** Binds the rounds to the gateway's own routes once the server listens (and takes them back when it stops). */
  static readonly ownRoutesLayer = bindOwnRoutes(ResponsesMcp)
}
