/**
 * The Responses API's `mcp` tools as the gateway reads them (docs/mcp.md, "MCP tools in model
 * requests"): which registered server each names, which of its tools it offers and which need
 * approval; the function tools the model is offered instead; the items the answer carries
 * (`mcp_list_tools`, `mcp_call`, `mcp_approval_request`); and a conversation's MCP items as the
 * function calls and results a model of any family reads. Plain functions.
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { createHash } from "node:crypto"
import { newId } from "../../domain/canonical.js"
import { exposedNameOf, type McpServerRecord } from "../../domain/mcpServers.js"
import { badRequest } from "../../kernel/errors.js"
import type { InferenceError } from "../../kernel/errors.js"
import { obj, str } from "../../upstream/formats/common.js"

/**
 * Whether a Responses body asks for MCP tools: the one check every Responses request pays (a
 * request without them takes the route as before).
 */
export const hasMcpTool = (body: Record<string, unknown>): boolean => mcpToolIndex(body) >= 0

/** The index of the first `mcp` tool in the request's tools, -1 when there is none. */
export const mcpToolIndex = (body: Record<string, unknown>): number => {
  const tools = body["tools"]
  if (!Array.isArray(tools)) return -1
  for (let i = 0; i < tools.length; i++) {
    const t: unknown = tools[i]
    if (typeof t === "object" && t !== null && (t as { type?: unknown }).type === "mcp") return i
  }
  return -1
}

/** `{tool_names, read_only}`: which tools a filter names. An empty filter names none. */
interface ToolFilter {
  readonly names: ReadonlySet<string> | undefined
  readonly readOnly: boolean | undefined
}

const readOnlyOf = (tool: Tool): boolean => tool.annotations?.readOnlyHint === true

const filterNames = (filter: ToolFilter, tool: Tool): boolean =>
  (filter.names?.has(tool.name) ?? false) || (filter.readOnly !== undefined && readOnlyOf(tool) === filter.readOnly)

/** One `{type: "mcp"}` tool of a request, on the registered server its label names. */
export interface McpToolSpec {
  /** Its place in the request's tools (for error messages). */
  readonly index: number
  /** `server_label`: the registered server's name. */
  readonly label: string
  readonly record: McpServerRecord
  /** `allowed_tools`: the request's own narrowing (undefined: every tool the key may use). */
  readonly allows: (tool: Tool) => boolean
  /** `require_approval`: whether a call of this tool waits for the client's approval. */
  readonly needsApproval: (tool: Tool) => boolean
}

const filterOf = (v: unknown, where: string): ToolFilter | InferenceError => {
  const o = obj(v)
  if (!o) return badRequest(`${where} must be an object {tool_names, read_only}`, where)
  const names = o["tool_names"]
  if (names !== undefined && (!Array.isArray(names) || !names.every((n) => typeof n === "string")))
    return badRequest(`${where}.tool_names must be an array of tool names`, `${where}.tool_names`)
  const readOnly = o["read_only"]
  if (readOnly !== undefined && typeof readOnly !== "boolean")
    return badRequest(`${where}.read_only must be a boolean`, `${where}.read_only`)
  return { names: names === undefined ? undefined : new Set(names as Array<string>), readOnly }
}

const allowsOf = (v: unknown, where: string): ((tool: Tool) => boolean) | InferenceError => {
  if (v === undefined || v === null) return () => true
  if (Array.isArray(v)) {
    if (!v.every((n) => typeof n === "string")) return badRequest(`${where} must be an array of tool names or {tool_names}`, where)
    const names = new Set(v as Array<string>)
    return (t) => names.has(t.name)
  }
  const f = filterOf(v, where)
  if (f instanceof Error) return f
  return (t) => (f.names === undefined || f.names.has(t.name)) && (f.readOnly === undefined || readOnlyOf(t) === f.readOnly)
}

/**
 * `require_approval`, as the Responses API has it: absent, every call waits for approval;
 * `"never"`, `"always"`; or `{always, never}` filters: a tool `always` names waits, one `never`
 * names does not, and any other waits unless only `always` was given.
 */
const approvalOf = (v: unknown, where: string): ((tool: Tool) => boolean) | InferenceError => {
  if (v === undefined || v === null || v === "always") return () => true
  if (v === "never") return () => false
  const o = obj(v)
  if (!o) return badRequest(`${where} must be "always", "never" or {always, never}`, where)
  const always = o["always"] === undefined || o["always"] === null ? undefined : filterOf(o["always"], `${where}.always`)
  const never = o["never"] === undefined || o["never"] === null ? undefined : filterOf(o["never"], `${where}.never`)
  if (always instanceof Error) return always
  if (never instanceof Error) return never
  return (t) => {
    if (always !== undefined && filterNames(always, t)) return true
    if (never !== undefined && filterNames(never, t)) return false
    return !(always !== undefined && never === undefined)
  }
}

const sameUrl = (a: string, b: string): boolean => a.replace(/\/+$/, "") === b.replace(/\/+$/, "")

/**
 * The request's `mcp` tools on the registered servers, or the 400 naming what is wrong: a label
 * no server has, a `server_url` that is not that server's, a label given twice, a bad filter.
 */
export const mcpToolSpecs = (
  tools: ReadonlyArray<unknown>,
  byName: (name: string) => McpServerRecord | undefined
): ReadonlyArray<McpToolSpec> | InferenceError => {
  const specs: Array<McpToolSpec> = []
  for (let index = 0; index < tools.length; index++) {
    const t = obj(tools[index])
    if (t?.["type"] !== "mcp") continue
    const where = `tools[${index}]`
    const label = t["server_label"]
    if (typeof label !== "string" || label === "")
      return badRequest(`${where}.server_label must name an MCP server registered in the gateway`, `${where}.server_label`)
    const record = byName(label)
    if (record === undefined)
      return badRequest(
        `${where}.server_label: no MCP server named ${JSON.stringify(label)} is registered in the gateway (an admin registers it: gateway mcp servers add)`,
        `${where}.server_label`
      )
    const url = t["server_url"]
    if (url !== undefined && url !== null && (typeof url !== "string" || record.url === null || !sameUrl(url, record.url)))
      return badRequest(
        `${where}.server_url: ${JSON.stringify(url)} is not the address of the registered MCP server ${label} (leave server_url out: the gateway connects to its registered servers itself)`,
        `${where}.server_url`
      )
    if (specs.some((s) => s.label === label)) return badRequest(`${where}.server_label: ${label} is given twice`, `${where}.server_label`)
    if (!record.enabled) return badRequest(`${where}.server_label: the MCP server ${label} is disabled`, `${where}.server_label`)
    const allows = allowsOf(t["allowed_tools"], `${where}.allowed_tools`)
    if (allows instanceof Error) return allows
    const needsApproval = approvalOf(t["require_approval"], `${where}.require_approval`)
    if (needsApproval instanceof Error) return needsApproval
    specs.push({ index, label, record, allows, needsApproval })
  }
  return specs
}

/**
 * A function name every family takes: OpenAI's and Anthropic's allow letters, digits, `_` and `-`
 * up to 64; Gemini's must also start with a letter or `_` (a server may be named `9ev`).
 */
const FUNCTION_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/

/**
 * The function name a server's tool is offered to the model under: its `/v1/mcp` name
 * (`<server>__<tool>`, shortened with a hash past 64 characters), with any character function
 * names may not hold replaced, a `_` before a leading digit, and a hash of the real name added.
 */
export const functionNameOf = (server: string, tool: string): string => {
  const exposed = exposedNameOf(server, tool)
  if (FUNCTION_NAME.test(exposed)) return exposed
  const hash = createHash("sha256").update(`${server}__${tool}`).digest("hex").slice(0, 8)
  const cleaned = exposed.replace(/[^A-Za-z0-9_-]/g, "_")
  return `${/^[0-9-]/.test(cleaned) ? `_${cleaned.slice(0, 54)}` : cleaned.slice(0, 55)}_${hash}`
}

/** A server's tool as a Responses function tool. */
export const functionTool = (name: string, tool: Tool): Record<string, unknown> => ({
  type: "function",
  name,
  ...(tool.description ? { description: tool.description } : {}),
  parameters: tool.inputSchema ?? { type: "object", properties: {} },
  strict: false
})

/** A tool result as the text an `mcp_call` item's output (and the model) reads: its text parts, other parts as JSON. */
export const resultText = (result: CallToolResult): string => {
  const content = Array.isArray(result.content) ? result.content : []
  if (content.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent)
  return content.map((c) => (c.type === "text" ? c.text : JSON.stringify(c))).join("\n")
}

// ---------------------------------------------------------------- the answer's items

export const listItem = (label: string, tools: ReadonlyArray<Tool>, error?: string): Record<string, unknown> => ({
  id: newId("mcpl_"),
  type: "mcp_list_tools",
  server_label: label,
  tools: tools.map((t) => ({
    name: t.name,
    description: t.description ?? null,
    input_schema: t.inputSchema,
    annotations: t.annotations ?? null
  })),
  ...(error === undefined ? {} : { error })
})

/** An `mcp_call`'s error (the openai SDK's `McpToolCallError`): the tool's own failure, or the call's. */
export type McpCallError =
  | { readonly type: "mcp_tool_execution_error"; readonly content: unknown }
  | { readonly type: "mcp_protocol_error"; readonly code: number; readonly message: string }

export interface McpCallItem {
  readonly id: string
  readonly type: "mcp_call"
  readonly server_label: string
  readonly name: string
  readonly arguments: string
  readonly output: string | null
  readonly error: McpCallError | null
  readonly status: "in_progress" | "completed" | "failed"
  readonly approval_request_id: string | null
}

export const callItem = (
  label: string,
  name: string,
  args: string,
  approvalRequestId: string | null = null
): McpCallItem & Record<string, unknown> => ({
  id: newId("mcp_"),
  type: "mcp_call",
  server_label: label,
  name,
  arguments: args,
  output: null,
  error: null,
  status: "in_progress",
  approval_request_id: approvalRequestId
})

export const approvalItem = (label: string, name: string, args: string): Record<string, unknown> => ({
  id: newId("mcpr_"),
  type: "mcp_approval_request",
  server_label: label,
  name,
  arguments: args
})

/** What the model reads of an `mcp_call`: its output, else its error as text. */
export const callOutputText = (item: { readonly output?: unknown; readonly error?: unknown }): string => {
  const output = str(item["output"])
  const error = item["error"]
  if (error === undefined || error === null) return output ?? ""
  const e = obj(error)
  const message = typeof error === "string" ? error : (str(e?.["message"]) ?? JSON.stringify(e?.["content"] ?? error))
  return output ? `Error: ${output}` : `Error: ${message}`
}

// ---------------------------------------------------------------- a conversation's MCP items

/** An approval request of the conversation the client answered: where its call goes, and the answer. */
export interface Answered {
  readonly request: Record<string, unknown>
  readonly approve: boolean
  readonly reason: string | undefined
}

/** A conversation's items for a round, with the slots where answered approval requests' calls go. */
export type RoundItem = { readonly kind: "item"; readonly item: unknown } | ({ readonly kind: "answered" } & Answered)

export interface Conversation {
  readonly items: ReadonlyArray<RoundItem>
  /** Server labels whose tools an `mcp_list_tools` item already lists (their listing is not repeated). */
  readonly listed: ReadonlySet<string>
}

/**
 * A conversation (the earlier items and the new input) for a model of any family: an `mcp_call`
 * becomes the function call and its result, an `mcp_list_tools` goes (the tools are offered as
 * functions), an approval request answered by an `mcp_approval_response` becomes a slot for its
 * call, run or refused (one already run, an `mcp_call` naming it, is not run again), an
 * unanswered one goes. An answer to no request of the conversation is a 400.
 */
export const readConversation = (
  input: ReadonlyArray<unknown>,
  nameOf: (label: string, tool: string) => string
): Conversation | InferenceError => {
  const answers = new Map<string, { approve: boolean; reason: string | undefined; at: number }>()
  const requests = new Set<string>()
  const ran = new Set<string>()
  input.forEach((raw, at) => {
    const item = obj(raw)
    const type = str(item?.["type"])
    if (type === "mcp_approval_response") {
      const id = str(item?.["approval_request_id"]) ?? ""
      answers.set(id, { approve: item?.["approve"] === true, reason: str(item?.["reason"]), at })
    } else if (type === "mcp_approval_request") requests.add(str(item?.["id"]) ?? "")
    else if (type === "mcp_call") {
      const id = str(item?.["approval_request_id"])
      if (id) ran.add(id)
    }
  })
  for (const [id, a] of answers)
    if (!requests.has(id))
      return badRequest(
        `input[${a.at}].approval_request_id: no mcp_approval_request with id ${JSON.stringify(id)} in this conversation (send it in input, or the response that asked with previous_response_id)`,
        `input[${a.at}].approval_request_id`
      )
  const items: Array<RoundItem> = []
  const listed = new Set<string>()
  for (const raw of input) {
    const item = obj(raw)
    switch (str(item?.["type"])) {
      case "mcp_list_tools":
        listed.add(str(item?.["server_label"]) ?? "")
        break
      case "mcp_call": {
        const id = str(item?.["id"]) ?? newId("mcp_")
        const name = nameOf(str(item?.["server_label"]) ?? "", str(item?.["name"]) ?? "")
        items.push(
          { kind: "item", item: { type: "function_call", call_id: id, name, arguments: str(item?.["arguments"]) ?? "{}" } },
          { kind: "item", item: { type: "function_call_output", call_id: id, output: callOutputText(item!) } }
        )
        break
      }
      case "mcp_approval_request": {
        const id = str(item?.["id"]) ?? ""
        const answer = answers.get(id)
        if (answer !== undefined && !ran.has(id))
          items.push({ kind: "answered", request: item!, approve: answer.approve, reason: answer.reason })
        break
      }
      case "mcp_approval_response":
        break
      default:
        items.push({ kind: "item", item: raw })
    }
  }
  return { items, listed }
}

/** The text a refused call's result tells the model. */
export const refusedText = (reason: string | undefined): string =>
  `The user did not approve this call of the tool, so it was not run${reason ? `: ${reason}` : "."}`
