import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import {
  CallToolRequestSchema,
  ErrorCode,
  LATEST_PROTOCOL_VERSION,
  ListToolsRequestSchema,
  McpError,
  SUPPORTED_PROTOCOL_VERSIONS
} from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import { VERSION } from "../../kernel/version.js"
import type { McpCaller } from "./caller.js"
import type { McpToolsShape } from "./McpTools.js"

/** The revisions the SDK negotiates: the newest, the one before it, and older ones it still speaks. */
export const PROTOCOL_VERSIONS: ReadonlyArray<string> = SUPPORTED_PROTOCOL_VERSIONS
export const LATEST_PROTOCOL = LATEST_PROTOCOL_VERSION

const INSTRUCTIONS =
  "Tools of a self-hosted AI gateway. gateway_agent_skills_* read its agent-skill catalog (how to use its REST API and command line); " +
  "skills_run runs a skill's scripts in a sandbox; the other tools manage it (providers, API keys, combos, usage, health), each under a scope."

/** How a transport hands the caller of a request to the tools (HTTP: per request, in `authInfo.extra.caller`). */
export type CallerOf = (extra: RequestHandlerExtra<any, any>) => McpCaller

/**
 * One MCP server (the SDK's `Server`, which lets tools/list answer per caller) over the tools.
 * A session over HTTP, or the stdio process, each gets its own; `run` runs the tools' effects on
 * the gateway's runtime (its logger: stderr under stdio).
 */
export const makeMcpServer = (tools: McpToolsShape, run: <A>(effect: Effect.Effect<A>) => Promise<A>, callerOf: CallerOf): Server => {
  const server = new Server(
    { name: "gateway", title: "AI gateway", version: VERSION },
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS }
  )
  server.setRequestHandler(ListToolsRequestSchema, (_request, extra) =>
    run(Effect.map(tools.list(callerOf(extra)), (list) => ({ tools: list })))
  )
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const result = await run(Effect.either(tools.call(callerOf(extra), request.params.name, request.params.arguments)))
    if (result._tag === "Left") throw new McpError(ErrorCode.InvalidParams, result.left.message)
    return result.right
  })
  return server
}
