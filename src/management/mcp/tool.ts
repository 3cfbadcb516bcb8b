import type * as Effect from "effect/Effect"
import * as JSONSchema from "effect/JSONSchema"
import type * as Schema from "effect/Schema"
import type { McpScope } from "../../domain/mcp.js"
import type { McpCaller } from "./caller.js"

/** What a tool's run gets besides its arguments. */
export interface ToolContext {
  readonly caller: McpCaller
  /** GATEWAY_MCP_ENFORCE_SCOPES as it is for this call. */
  readonly enforce: boolean
}

/**
 * One MCP tool: its name, the scope it needs, a description (its first sentence is what
 * GATEWAY_MCP_COMPRESS_DESCRIPTIONS keeps), its arguments as a Schema (decoded before `run`,
 * and listed as JSON Schema), and `run`. A failure's message becomes the tool error the client
 * sees; `render` turns the answer into the text contents (default: the answer as JSON).
 */
export interface McpTool {
  readonly name: string
  readonly title: string
  readonly scope: McpScope
  readonly description: string
  readonly args: Schema.Schema<any, any>
  /** Changes nothing (listings, summaries). */
  readonly readOnly: boolean
  /** May remove something (revoking a key). */
  readonly destructive?: boolean
  /** Reaches outside the gateway (a provider test calls the upstream). */
  readonly openWorld?: boolean
  readonly run: (args: any, ctx: ToolContext) => Effect.Effect<Record<string, unknown>, { readonly message: string }>
  readonly render?: (answer: Record<string, unknown>) => ReadonlyArray<string>
}

/** Typed construction: `run` gets what `args` decodes to. */
export const tool = <A, I>(
  def: Omit<McpTool, "args" | "run"> & {
    readonly args: Schema.Schema<A, I>
    readonly run: (args: A, ctx: ToolContext) => Effect.Effect<Record<string, unknown>, { readonly message: string }>
  }
): McpTool => def as McpTool

/** The first sentence of a description: what GATEWAY_MCP_COMPRESS_DESCRIPTIONS lists. */
export const firstSentence = (text: string): string => {
  const m = /^([\s\S]+?[.!?])(?=\s|$)/.exec(text.trim())
  return m ? m[1]! : text.trim()
}

const stripDocs = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(stripDocs)
  if (node === null || typeof node !== "object") return node
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(node)) {
    if (k === "description" || k === "title") continue
    // A property named description or title is kept: only the annotations go.
    out[k] =
      k === "properties" && v !== null && typeof v === "object"
        ? Object.fromEntries(Object.entries(v).map(([p, s]) => [p, stripDocs(s)]))
        : stripDocs(v)
  }
  return out
}

/**
 * A tool's arguments as the JSON Schema object MCP lists: always `type: object` (an empty
 * struct included), without the `$schema` line; compressed, without descriptions and titles.
 */
export const inputSchemaOf = (args: Schema.Schema<any, any>, compress: boolean): { type: "object"; [k: string]: unknown } => {
  const { $schema: _, $id: _id, anyOf: _any, ...rest } = JSONSchema.make(args) as unknown as Record<string, unknown>
  const schema = { ...rest, type: "object" as const, properties: (rest.properties as object | undefined) ?? {} }
  return compress ? (stripDocs(schema) as { type: "object" }) : schema
}
