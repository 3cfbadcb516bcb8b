/**
 * The registry of upstream MCP servers (docs/mcp.md, "MCP servers behind the gateway"): rows of
 * `mcp_servers`, env and header values sealed with the storage key, held in memory for the
 * request path and reloaded when the store says they changed.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import type { CreateMcpServer, McpServerRecord, UpdateMcpServer } from "../../domain/mcpServers.js"

/** A write the registry refuses: `status` is the HTTP status the API answers with. */
export class McpServerRefused extends Data.TaggedError("McpServerRefused")<{
  readonly status: 400 | 404 | 409
  readonly message: string
}> {}

export interface McpServersShape {
  /** Every registered server, secrets in the clear (from memory; never sent out as is). */
  readonly all: () => ReadonlyArray<McpServerRecord>
  /** One server by name, from memory. */
  readonly byName: (name: string) => McpServerRecord | undefined
  /** Read the store again if it changed (another gateway's write); the listeners hear of a change. */
  readonly refresh: Effect.Effect<void>
  readonly create: (input: CreateMcpServer) => Effect.Effect<McpServerRecord, McpServerRefused>
  readonly update: (name: string, patch: UpdateMcpServer) => Effect.Effect<McpServerRecord, McpServerRefused>
  readonly remove: (name: string) => Effect.Effect<void, McpServerRefused>
  /** Called after every change of the registry (this gateway's writes and reloads); returns the unsubscribe. */
  readonly onChange: (listener: () => void) => () => void
}

export class McpServers extends Context.Tag("gateway/McpServers")<McpServers, McpServersShape>() {}
