import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { describeParseError } from "../../domain/parse.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { ProviderChecks } from "../../upstream/providers/ProviderChecks.js"
import { Cooldowns } from "../../services/resilience/Cooldowns.js"
import { Resilience } from "../../services/resilience/Resilience.js"
import { Combos } from "../../services/routing/Combos.js"
import { RoutingMemory } from "../../services/routing/RoutingMemory.js"
import { SkillCatalog } from "../../services/skills/SkillCatalog.js"
import { SkillRunner } from "../../services/skills/SkillRunner.js"
import { UsageQueries } from "../../services/usage/UsageQueries.js"
import { describeCaller, type McpCaller } from "./caller.js"
import { firstSentence, inputSchemaOf, type McpTool } from "./tool.js"
import { catalogTools, skillRunTool } from "./tools/catalog.js"
import { keyTools } from "./tools/keys.js"
import { managementTools } from "./tools/management.js"

/** A tools/call naming no tool: a protocol error (-32602), not a tool error. */
export class UnknownTool extends Schema.TaggedError<UnknownTool>()("UnknownTool", { message: Schema.String }) {}

export interface McpToolsShape {
  /** The tool definitions, in listing order. */
  readonly tools: ReadonlyArray<McpTool>
  /** The tools this caller may call (all of them for an authenticated caller while scopes are not enforced). */
  readonly list: (caller: McpCaller) => Effect.Effect<Array<Tool>>
  /** Runs a tool. Refusals, bad arguments and failures are tool errors (`isError`) with a message; never a defect. */
  readonly call: (caller: McpCaller, name: string, args: Record<string, unknown> | undefined) => Effect.Effect<CallToolResult, UnknownTool>
  /** Builds the listing again (descriptions, schemas) from the definitions and the flags as they are now. */
  readonly rebuild: Effect.Effect<void>
  readonly settings: Effect.Effect<{ readonly enforceScopes: boolean; readonly compressDescriptions: boolean }>
}

const toolError = (message: string): CallToolResult => ({ isError: true, content: [{ type: "text", text: message }] })

/**
 * The MCP tools on the gateway's services, one set for both transports (streamable HTTP in the
 * server, stdio in `gateway --mcp`). Scopes are checked here, per call, against
 * GATEWAY_MCP_ENFORCE_SCOPES; descriptions follow GATEWAY_MCP_COMPRESS_DESCRIPTIONS.
 */
export class McpTools extends Context.Tag("gateway/McpTools")<McpTools, McpToolsShape>() {
  static readonly layer = Layer.effect(
    McpTools,
    Effect.gen(function* () {
      const flags = yield* FeatureFlags
      const cooldowns = yield* Cooldowns
      const tools: ReadonlyArray<McpTool> = [
        ...catalogTools(yield* SkillCatalog),
        ...managementTools({
          checks: yield* ProviderChecks,
          combos: yield* Combos,
          connections: yield* Connections,
          cooldowns,
          resilience: yield* Resilience,
          memory: yield* RoutingMemory,
          queries: yield* UsageQueries
        }),
        ...keyTools(yield* ApiKeys),
        skillRunTool(yield* SkillRunner)
      ]
      const byName = new Map(tools.map((t) => [t.name, t]))

      const listing = (t: McpTool, compress: boolean): Tool => ({
        name: t.name,
        title: t.title,
        description: compress ? firstSentence(t.description) : t.description,
        inputSchema: inputSchemaOf(t.args, compress),
        annotations: {
          title: t.title,
          readOnlyHint: t.readOnly,
          destructiveHint: t.destructive ?? false,
          idempotentHint: t.readOnly,
          openWorldHint: t.openWorld ?? false
        },
        _meta: { "gateway/scope": t.scope }
      })
      // The listing for each value of the compress flag, built when first asked for.
      let built = new Map<boolean, ReadonlyArray<Tool>>()
      const listingFor = (compress: boolean) => {
        let list = built.get(compress)
        if (list === undefined) built.set(compress, (list = tools.map((t) => listing(t, compress))))
        return list
      }

      const settings = Effect.all({
        enforceScopes: flags.enabled("GATEWAY_MCP_ENFORCE_SCOPES"),
        compressDescriptions: flags.enabled("GATEWAY_MCP_COMPRESS_DESCRIPTIONS")
      })
      /** Scopes are a matter of authorisation; an anonymous caller stays anonymous when they are not enforced. */
      const allowed = (caller: McpCaller, t: McpTool, enforce: boolean) =>
        caller.scopes.has(t.scope) || (!enforce && caller.kind !== "anonymous")

      const list = (caller: McpCaller) =>
        Effect.map(settings, (s) => listingFor(s.compressDescriptions).filter((_, i) => allowed(caller, tools[i]!, s.enforceScopes)))

      const call = (caller: McpCaller, name: string, args: Record<string, unknown> | undefined) =>
        Effect.gen(function* () {
          const t = byName.get(name)
          if (!t) return yield* new UnknownTool({ message: `unknown tool '${name}'; tools/list names the tools this caller may call` })
          const enforce = yield* flags.enabled("GATEWAY_MCP_ENFORCE_SCOPES")
          if (!allowed(caller, t, enforce)) {
            const held = [...caller.scopes].join(", ") || "none"
            return toolError(
              caller.kind === "anonymous"
                ? `${t.name} needs scope ${t.scope}, and this caller sent no credentials: send an admin key, or a key created with scope ${t.scope}, as 'Authorization: Bearer <key>'`
                : `${t.name} needs scope ${t.scope}; ${describeCaller(caller)} has ${held}. Use an admin key, or a key created with scope ${t.scope}.`
            )
          }
          const decoded = yield* Effect.either(Schema.decodeUnknown(t.args)(args ?? {}))
          if (decoded._tag === "Left") return toolError(`invalid arguments for ${t.name}: ${describeParseError(decoded.left)}`)
          const answer = yield* t.run(decoded.right, { caller, enforce }).pipe(
            Effect.map(
              (value): CallToolResult => ({
                content: (t.render ?? ((v) => [JSON.stringify(v, null, 2)]))(value).map((text) => ({ type: "text" as const, text })),
                structuredContent: value
              })
            ),
            Effect.catchAll((e) => Effect.succeed(toolError(`${t.name} failed: ${e.message}`))),
            Effect.catchAllCause((cause) =>
              Effect.logError(`MCP tool ${t.name} failed unexpectedly`, Cause.pretty(cause)).pipe(
                Effect.as(toolError(`${t.name} failed: internal error (logged by the gateway)`))
              )
            )
          )
          return answer
        }).pipe(Effect.withSpan("McpTools.call", { attributes: { tool: name } }))

      return {
        tools,
        list,
        call,
        settings,
        rebuild: Effect.sync(() => {
          built = new Map()
        })
      }
    })
  )
}
