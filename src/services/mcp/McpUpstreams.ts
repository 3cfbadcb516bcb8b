/**
 * The gateway's connections to the registered MCP servers (docs/mcp.md): one SDK client per
 * enabled server over stdio (a supervised child process), streamable HTTP or HTTP+SSE,
 * reconnected on a backoff Schedule, with its health and what it offers (tools, resources,
 * prompts, listed at connect and again on `list_changed`).
 */
import type {
  CallToolResult,
  GetPromptResult,
  Prompt,
  ReadResourceResult,
  Resource,
  ResourceTemplate,
  Tool
} from "@modelcontextprotocol/sdk/types.js"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import type { McpServerHealth } from "../../domain/mcpServers.js"

/** A call that failed upstream or could not be made: the message names the server. */
export class McpUpstreamError extends Data.TaggedError("McpUpstreamError")<{
  readonly server: string
  /** `unknown_server`, `unavailable` (not connected), `timeout`, `cancelled`, `upstream` (the server's own JSON-RPC error). */
  readonly reason: "unknown_server" | "unavailable" | "timeout" | "cancelled" | "upstream"
  readonly message: string
  /** The server's JSON-RPC error code, when it answered with one. */
  readonly code?: number
}> {}

/** What a server offers, as it listed it last. */
export interface McpOfferings {
  readonly tools: ReadonlyArray<Tool>
  readonly resources: ReadonlyArray<Resource>
  readonly resourceTemplates: ReadonlyArray<ResourceTemplate>
  readonly prompts: ReadonlyArray<Prompt>
}

/** How one forwarded request goes: its cancellation, its progress notifications, its time limit (else the server's timeoutMs). */
export interface McpCallOptions {
  readonly signal?: AbortSignal
  readonly onProgress?: (progress: { progress: number; total?: number; message?: string }) => void
  readonly timeoutMs?: number
}

export interface McpUpstreamsShape {
  /** The server's health now (a server not registered: undefined). */
  readonly health: (server: string) => McpServerHealth | undefined
  /** What it offers (empty until listed). */
  readonly offerings: (server: string) => McpOfferings
  readonly callTool: (
    server: string,
    tool: string,
    args: Record<string, unknown> | undefined,
    options?: McpCallOptions
  ) => Effect.Effect<CallToolResult, McpUpstreamError>
  readonly readResource: (server: string, uri: string, options?: McpCallOptions) => Effect.Effect<ReadResourceResult, McpUpstreamError>
  readonly getPrompt: (
    server: string,
    prompt: string,
    args: Record<string, string> | undefined,
    options?: McpCallOptions
  ) => Effect.Effect<GetPromptResult, McpUpstreamError>
  /** Close and connect again now (a stdio server: a new process). */
  readonly restart: (server: string) => Effect.Effect<void, McpUpstreamError>
  /** Called with the server's name when what it offers changed (listed again) or its health changed; returns the unsubscribe. */
  readonly onChange: (listener: (server: string) => void) => () => void
}

export class McpUpstreams extends Context.Tag("gateway/McpUpstreams")<McpUpstreams, McpUpstreamsShape>() {}
