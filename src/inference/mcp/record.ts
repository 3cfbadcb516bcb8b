/**
 * What every call through `/v1/mcp` leaves behind (docs/mcp.md, "What is recorded"): an event on
 * the bus (`mcp.call.completed` / `mcp.call.failed`: webhooks deliver it, the audit log keeps
 * it), the metrics, and an entry in the traffic inspector (source `mcp`: server, name, masked
 * arguments, duration, the result's size, the outcome). And the hooks that see a call before it
 * goes (McpCallHooks: plugins' `onMcpCall`), which may block it or answer it themselves.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { EventBus } from "../../platform/events/EventBus.js"
import { Inspector } from "../../services/inspector/Inspector.js"
import { McpCallHooks } from "../../services/mcp/McpCallHooks.js"
import { McpServers } from "../../services/mcp/McpServers.js"
import { scrubberOf } from "../../services/mcp/mcpServerSecrets.js"
import { GatewayMetrics } from "../../services/observability/GatewayMetrics.js"
import type { McpAccess } from "./access.js"

export type CallOutcome = "ok" | "tool_error" | "refused" | "rate_limited" | "failed"

export interface McpCallStart {
  readonly access: McpAccess
  readonly kind: "tool" | "resource" | "prompt"
  readonly server: string
  /** The server's own name (a resource's URI). */
  readonly name: string
  /** The name on `/v1/mcp`. */
  readonly exposedName: string
  readonly args: unknown
}

export interface McpCallEnd extends McpCallStart {
  /** Epoch ms the call started. */
  readonly started: number
  readonly outcome: CallOutcome
  readonly result: unknown
  readonly error: string | null
}

/** A hook's answer that blocks a call: its own result (a tool result the client gets), or a refusal with its message. */
export interface McpCallBlock {
  readonly by: string
  readonly message: string
  readonly result?: unknown
}

export interface McpCallRecorderShape {
  readonly record: (call: McpCallEnd) => void
  /** A tool policy in `warn` mode found the call: an audit entry, as for model requests. */
  readonly warn: (access: McpAccess, exposedName: string, finding: string) => void
  /** The hooks' verdict on a call about to go; a hook that fails lets the call go (and is logged). */
  readonly beforeCall: (call: McpCallStart) => Effect.Effect<McpCallBlock | undefined>
}

/**
 * Arguments as masked JSON text: the server's own secrets scrubbed by value (`scrub`), and
 * secret-looking fields and key-shaped strings (redactText, which `scrub` ends with).
 */
const maskedText = (value: unknown, scrub: (text: string) => string): string => scrub(JSON.stringify(value ?? null) ?? "null")

export class McpCallRecorder extends Context.Tag("gateway/McpCallRecorder")<McpCallRecorder, McpCallRecorderShape>() {
  static readonly layer = Layer.effect(
    McpCallRecorder,
    Effect.gen(function* () {
      const bus = yield* EventBus
      const metrics = yield* Effect.serviceOption(GatewayMetrics)
      const inspector = yield* Effect.serviceOption(Inspector)
      const hooks = yield* McpCallHooks
      const servers = yield* McpServers

      const record = (c: McpCallEnd): void => {
        const ms = Date.now() - c.started
        const resultText = c.result === undefined ? "" : JSON.stringify(c.result)
        const resultBytes = Buffer.byteLength(resultText)
        // A server may echo its own environment or credentials (a tool that prints its env): what
        // is recorded about the call is scrubbed of them; the client's result is the tool's own.
        const scrub = scrubberOf(servers.byName(c.server))
        const args = maskedText(c.args, scrub)
        const error = c.error === null ? null : scrub(c.error)
        const failed = c.outcome === "refused" || c.outcome === "rate_limited" || c.outcome === "failed"
        bus.publish(failed ? "mcp.call.failed" : "mcp.call.completed", {
          server: c.server,
          kind: c.kind,
          name: c.name,
          exposedName: c.exposedName,
          apiKeyId: c.access.keyId,
          outcome: c.outcome,
          durationMs: ms,
          resultBytes,
          error,
          arguments: args
        })
        if (Option.isSome(metrics)) metrics.value.mcpCallEnded({ server: c.server, kind: c.kind, outcome: c.outcome, seconds: ms / 1000 })
        if (Option.isSome(inspector)) {
          const sink = inspector.value.core.sink
          const path = `/${c.kind}s/${encodeURIComponent(c.name)}`
          const id = sink.begin({
            source: "mcp",
            method: "POST",
            url: `http://mcp.${c.server}${path}`,
            headers: { "content-type": "application/json", "x-gateway-mcp-key": c.access.keyName, "x-gateway-mcp-outcome": c.outcome },
            body: Buffer.from(args)
          })
          const status =
            c.outcome === "ok"
              ? 200
              : c.outcome === "tool_error"
                ? 200
                : c.outcome === "rate_limited"
                  ? 429
                  : c.outcome === "refused"
                    ? 403
                    : 502
          if (c.outcome === "failed") sink.fail(id, error ?? "failed")
          else
            sink.end(id, {
              status,
              headers: { "content-type": "application/json", "x-gateway-mcp-duration-ms": String(ms) },
              body: Buffer.from(c.result === undefined ? JSON.stringify({ error }) : scrub(resultText)),
              ttfbMs: ms
            })
        }
      }

      const warn = (access: McpAccess, exposedName: string, finding: string) =>
        bus.publish("guardrail.action", {
          rule: finding,
          mode: "warn",
          action: "warn",
          endpoint: "/v1/mcp",
          apiKeyId: access.keyId,
          requestId: null,
          detail: `MCP call of ${exposedName}`
        })

      const beforeCall = (c: McpCallStart): Effect.Effect<McpCallBlock | undefined> =>
        hooks.current().length === 0
          ? Effect.succeed(undefined)
          : Effect.promise(async () => {
              for (const h of hooks.current()) {
                try {
                  const verdict = await h.onMcpCall({
                    server: c.server,
                    kind: c.kind,
                    name: c.name,
                    exposedName: c.exposedName,
                    arguments: c.args,
                    apiKeyId: c.access.keyId
                  })
                  if (verdict?.block === true || verdict?.result !== undefined)
                    return {
                      by: h.name,
                      message: verdict.message ?? "blocked",
                      ...(verdict.result === undefined ? {} : { result: verdict.result })
                    }
                } catch {
                  // A hook that fails lets the call go: the plugin's own log says why.
                }
              }
              return undefined
            })

      return { record, warn, beforeCall }
    })
  )
}
