/**
 * One call to an upstream MCP server as the gateway makes it for any caller (docs/mcp.md): the
 * access rules (the server's allowedTools, the key's mcp.allow, a session's narrowing), the tool
 * policy, the per-key rate limit, the plugins' hooks, then the call, and the record it leaves.
 * `/v1/mcp` answers a refusal as an MCP error; a model request's MCP tools (ResponsesMcp) as an
 * `mcp_call` item's error.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { exposedNameOf } from "../../domain/mcpServers.js"
import type { PoliciesShape } from "../../services/governance/Policies.js"
import type { McpServersShape } from "../../services/mcp/McpServers.js"
import type { McpUpstreamError } from "../../services/mcp/McpUpstreams.js"
import { type McpAccess, refusal } from "./access.js"
import type { makeRateLimiter } from "./rateLimit.js"
import type { CallOutcome, McpCallRecorderShape } from "./record.js"

/** JSON-RPC error codes of the gateway's own refusals (the implementation-defined range), documented in docs/mcp.md. */
export const MCP_REFUSED = -32003
export const MCP_RATE_LIMITED = -32029
export const REQUEST_TIMEOUT = -32001
export const INTERNAL_ERROR = -32603
export const INVALID_PARAMS = -32602

/** A call that did not reach the server, or failed there: the JSON-RPC error `/v1/mcp` answers with. */
export class McpCallFailed extends Data.TaggedError("McpCallFailed")<{
  readonly outcome: Exclude<CallOutcome, "ok" | "tool_error">
  readonly code: number
  readonly message: string
  readonly data: Record<string, unknown>
}> {}

/**
 * One call, checked, forwarded and recorded. `name` is the server's own name (a resource's URI);
 * the tool policy matches it and its `<server>__<name>`. A plugin that answers the call itself
 * succeeds with its answer.
 */
export type CheckedCall = <A extends object>(
  access: McpAccess,
  kind: "tool" | "resource" | "prompt",
  server: string,
  name: string,
  args: unknown,
  forward: () => Effect.Effect<A, McpUpstreamError>
) => Effect.Effect<A, McpCallFailed>

export interface CheckedCallDeps {
  readonly servers: McpServersShape
  readonly policies: Option.Option<PoliciesShape>
  readonly recorder: McpCallRecorderShape
  readonly limiter: ReturnType<typeof makeRateLimiter>
}

export const makeCheckedCall =
  ({ servers, policies, recorder, limiter }: CheckedCallDeps): CheckedCall =>
  <A extends object>(
    access: McpAccess,
    kind: "tool" | "resource" | "prompt",
    server: string,
    name: string,
    args: unknown,
    forward: () => Effect.Effect<A, McpUpstreamError>
  ) =>
    Effect.suspend(() => {
      const started = Date.now()
      const exposedName = kind === "resource" ? name : exposedNameOf(server, name)
      const done = (outcome: CallOutcome, result: unknown, error: string | null) =>
        recorder.record({ access, kind, server, name, exposedName, args, started, outcome, result, error })
      const fail = (outcome: McpCallFailed["outcome"], code: number, message: string, data: Record<string, unknown>, logged = message) => {
        done(outcome, undefined, logged)
        return Effect.fail(new McpCallFailed({ outcome, code, message, data }))
      }
      const record = servers.byName(server)
      const refused = record && refusal(access, server, name, record.allowedTools)
      if (record === undefined || refused !== undefined) {
        const message = refused ?? `no MCP server named ${server}`
        return fail("refused", MCP_REFUSED, message, { rule: message })
      }
      const policy =
        kind === "tool" && Option.isSome(policies) ? policies.value.toolRefusal([exposedName, name]) : Effect.succeed(undefined)
      return Effect.flatMap(policy, (verdict): Effect.Effect<A, McpCallFailed> => {
        if (verdict?.mode === "block")
          return fail("refused", MCP_REFUSED, `${exposedName} refused by ${verdict.finding}`, { rule: verdict.finding }, verdict.finding)
        if (verdict) recorder.warn(access, exposedName, verdict.finding)
        const limited = limiter.take(access.keyId, record)
        if (limited !== undefined)
          return fail(
            "rate_limited",
            MCP_RATE_LIMITED,
            `rate limit: key ${access.keyName} may call server ${server} ${record.rpm} times a minute; try again in ${limited} s`,
            { retryAfterSeconds: limited }
          )
        return Effect.flatMap(recorder.beforeCall({ access, kind, server, name, exposedName, args }), (blocked) => {
          if (blocked !== undefined) {
            done("refused", blocked.result, `blocked by plugin ${blocked.by}`)
            if (blocked.result !== undefined) return Effect.succeed(blocked.result as A)
            return Effect.fail(
              new McpCallFailed({
                outcome: "refused",
                code: MCP_REFUSED,
                message: `${exposedName} blocked by plugin ${blocked.by}: ${blocked.message}`,
                data: { rule: `plugin ${blocked.by}` }
              })
            )
          }
          return Effect.matchEffect(forward(), {
            onFailure: (e) =>
              fail(
                "failed",
                e.code ?? (e.reason === "timeout" ? REQUEST_TIMEOUT : e.reason === "unknown_server" ? INVALID_PARAMS : INTERNAL_ERROR),
                e.message,
                { server }
              ),
            onSuccess: (result) => {
              done(kind === "tool" && (result as CallToolResult).isError === true ? "tool_error" : "ok", result, null)
              return Effect.succeed(result)
            }
          })
        })
      })
    })
