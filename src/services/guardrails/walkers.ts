/**
 * Where the text is, per wire format: for each inbound format, walkers listing the text slots of a request, a whole
 * answer and one stream event (docs/guardrails.md#where-they-run). Walkers only read; `setPaths` writes copy-on-write.
 */
import type { FormatId } from "../../domain/canonical.js"

export type Role = "system" | "user" | "assistant" | "tool"
export type Path = ReadonlyArray<string | number>

export interface Slot {
  readonly path: Path
  readonly text: string
  readonly role: Role
  /** Text that is itself JSON (tool-call arguments): what is put in is escaped. */
  readonly json?: boolean
  /** Stream events: the channel this text extends (a delta); undefined for a whole text. */
  readonly channel?: string
}

type Obj = Record<string, unknown>
const obj = (v: unknown): Obj | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : undefined)
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** A string at `o[k]` as a slot. */
const str = (
  out: Array<Slot>,
  o: Obj | undefined,
  k: string,
  path: Path,
  role: Role,
  extra?: { json?: boolean; channel?: string }
): void => {
  if (o !== undefined && typeof o[k] === "string" && o[k] !== "") out.push({ path: [...path, k], text: o[k] as string, role, ...extra })
}

/** Every string leaf of a JSON value (tool arguments and results given as objects). */
const leaves = (out: Array<Slot>, v: unknown, path: Path, role: Role, depth = 0): void => {
  if (depth > 32) return
  if (typeof v === "string") {
    if (v !== "") out.push({ path, text: v, role })
  } else if (Array.isArray(v)) v.forEach((x, i) => leaves(out, x, [...path, i], role, depth + 1))
  else if (typeof v === "object" && v !== null) for (const k in v as Obj) leaves(out, (v as Obj)[k], [...path, k], role, depth + 1)
}

/** A string or an array of text parts (`{type, text}`): OpenAI content, Anthropic system and content. */
const content = (out: Array<Slot>, o: Obj, k: string, path: Path, role: Role): void => {
  const c = o[k]
  if (typeof c === "string") return str(out, o, k, path, role)
  arr(c).forEach((p, i) => {
    const part = obj(p)
    if (!part) return
    str(out, part, "text", [...path, k, i], role)
  })
}

const roleOf = (r: unknown): Role =>
  r === "system" || r === "developer"
    ? "system"
    : r === "assistant" || r === "model"
      ? "assistant"
      : r === "tool" || r === "function"
        ? "tool"
        : "user"

// ---------------------------------------------------------------- OpenAI chat (and legacy completions)

const openAiChatRequest = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  arr(body["messages"]).forEach((m, i) => {
    const msg = obj(m)
    if (!msg) return
    const role = roleOf(msg["role"])
    content(out, msg, "content", ["messages", i], role)
    arr(msg["tool_calls"]).forEach((c, j) =>
      str(out, obj(obj(c)?.["function"]), "arguments", ["messages", i, "tool_calls", j, "function"], role, { json: true })
    )
  })
  // Legacy completions: prompt is a string or an array of strings.
  if (typeof body["prompt"] === "string") str(out, body, "prompt", [], "user")
  else arr(body["prompt"]).forEach((p, i) => typeof p === "string" && p !== "" && out.push({ path: ["prompt", i], text: p, role: "user" }))
  str(out, body, "suffix", [], "user")
  return out
}

const openAiChatAnswer = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  arr(body["choices"]).forEach((c, i) => {
    const choice = obj(c)
    if (!choice) return
    str(out, choice, "text", ["choices", i], "assistant")
    const msg = obj(choice["message"])
    if (!msg) return
    content(out, msg, "content", ["choices", i, "message"], "assistant")
    arr(msg["tool_calls"]).forEach((t, j) =>
      str(out, obj(obj(t)?.["function"]), "arguments", ["choices", i, "message", "tool_calls", j, "function"], "assistant", { json: true })
    )
  })
  return out
}

const openAiChatEvent = (_event: string | undefined, data: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  arr(data["choices"]).forEach((c, i) => {
    const choice = obj(c)
    if (!choice) return
    const index = typeof choice["index"] === "number" ? choice["index"] : i
    str(out, choice, "text", ["choices", i], "assistant", { channel: `c${index}` })
    const delta = obj(choice["delta"])
    if (!delta) return
    str(out, delta, "content", ["choices", i, "delta"], "assistant", { channel: `c${index}` })
    arr(delta["tool_calls"]).forEach((t, j) => {
      const call = obj(t)
      const n = typeof call?.["index"] === "number" ? call["index"] : j
      str(out, obj(call?.["function"]), "arguments", ["choices", i, "delta", "tool_calls", j, "function"], "assistant", {
        json: true,
        channel: `c${index}.t${n}`
      })
    })
  })
  return out
}

// ---------------------------------------------------------------- OpenAI Responses

/** One output or input item of the Responses API. */
const responsesItem = (out: Array<Slot>, item: Obj, path: Path, fallback: Role): void => {
  const type = item["type"]
  if (type === "function_call_output" || type === "custom_tool_call_output") {
    if (typeof item["output"] === "string") str(out, item, "output", path, "tool")
    else arr(item["output"]).forEach((p, i) => str(out, obj(p), "text", [...path, "output", i], "tool"))
    return
  }
  if (type === "function_call") return str(out, item, "arguments", path, "assistant", { json: true })
  if (type === "custom_tool_call") return str(out, item, "input", path, "assistant")
  if (type === "message" || type === undefined)
    content(out, item, "content", path, item["role"] === undefined ? fallback : roleOf(item["role"]))
}

const responsesRequest = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  str(out, body, "instructions", [], "system")
  if (typeof body["input"] === "string") str(out, body, "input", [], "user")
  else
    arr(body["input"]).forEach((it, i) => {
      const item = obj(it)
      if (item) responsesItem(out, item, ["input", i], "user")
    })
  return out
}

const responsesOutput = (out: Array<Slot>, response: Obj, path: Path): void => {
  arr(response["output"]).forEach((it, i) => {
    const item = obj(it)
    if (item) responsesItem(out, item, [...path, "output", i], "assistant")
  })
  str(out, response, "output_text", path, "assistant")
}

const responsesAnswer = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  responsesOutput(out, body, [])
  return out
}

const responsesEvent = (event: string | undefined, data: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  const type = (data["type"] as string | undefined) ?? event
  const at = `${String(data["output_index"] ?? 0)}.${String(data["content_index"] ?? 0)}`
  switch (type) {
    case "response.output_text.delta":
      str(out, data, "delta", [], "assistant", { channel: `o${at}` })
      break
    case "response.function_call_arguments.delta":
      str(out, data, "delta", [], "assistant", { json: true, channel: `f${String(data["output_index"] ?? 0)}` })
      break
    case "response.output_text.done":
      str(out, data, "text", [], "assistant")
      break
    case "response.function_call_arguments.done":
      str(out, data, "arguments", [], "assistant", { json: true })
      break
    case "response.content_part.added":
    case "response.content_part.done":
      str(out, obj(data["part"]), "text", ["part"], "assistant")
      break
    case "response.output_item.added":
    case "response.output_item.done": {
      const item = obj(data["item"])
      if (item) responsesItem(out, item, ["item"], "assistant")
      break
    }
    default: {
      const response = obj(data["response"])
      if (response) responsesOutput(out, response, ["response"])
    }
  }
  return out
}

// ---------------------------------------------------------------- Anthropic messages

const anthropicBlocks = (out: Array<Slot>, blocks: unknown, path: Path, role: Role): void => {
  if (typeof blocks === "string") {
    if (blocks !== "") out.push({ path, text: blocks, role })
    return
  }
  arr(blocks).forEach((b, i) => {
    const block = obj(b)
    if (!block) return
    const type = block["type"]
    if (type === "text") str(out, block, "text", [...path, i], role)
    else if (type === "tool_result") anthropicBlocks(out, block["content"], [...path, i, "content"], "tool")
    else if (type === "tool_use") leaves(out, block["input"], [...path, i, "input"], role)
  })
}

const anthropicRequest = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  anthropicBlocks(out, body["system"], ["system"], "system")
  arr(body["messages"]).forEach((m, i) => {
    const msg = obj(m)
    if (msg) anthropicBlocks(out, msg["content"], ["messages", i, "content"], roleOf(msg["role"]))
  })
  return out
}

const anthropicAnswer = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  anthropicBlocks(out, body["content"], ["content"], "assistant")
  return out
}

const anthropicEvent = (event: string | undefined, data: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  const type = (data["type"] as string | undefined) ?? event
  if (type === "content_block_delta") {
    const delta = obj(data["delta"])
    const channel = `b${String(data["index"] ?? 0)}`
    if (delta?.["type"] === "text_delta") str(out, delta, "text", ["delta"], "assistant", { channel })
    else if (delta?.["type"] === "input_json_delta") str(out, delta, "partial_json", ["delta"], "assistant", { json: true, channel })
  } else if (type === "content_block_start") {
    const block = obj(data["content_block"])
    if (block?.["type"] === "text") str(out, block, "text", ["content_block"], "assistant")
  } else if (type === "message_start") {
    const message = obj(data["message"])
    if (message) anthropicBlocks(out, message["content"], ["message", "content"], "assistant")
  }
  return out
}

// ---------------------------------------------------------------- Gemini generateContent

const geminiParts = (out: Array<Slot>, parts: unknown, path: Path, role: Role, channel?: string): void => {
  arr(parts).forEach((p, i) => {
    const part = obj(p)
    if (!part || part["thought"] === true) return
    str(out, part, "text", [...path, i], role, channel ? { channel } : undefined)
    const call = obj(part["functionCall"])
    if (call) leaves(out, call["args"], [...path, i, "functionCall", "args"], role)
    const response = obj(part["functionResponse"])
    if (response) leaves(out, response["response"], [...path, i, "functionResponse", "response"], "tool")
  })
}

const geminiRequest = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  for (const key of ["systemInstruction", "system_instruction"]) {
    const sys = body[key]
    if (typeof sys === "string") str(out, body, key, [], "system")
    else if (obj(sys)) geminiParts(out, obj(sys)!["parts"], [key, "parts"], "system")
  }
  if (typeof body["contents"] === "string") str(out, body, "contents", [], "user")
  else
    arr(body["contents"]).forEach((c, i) => {
      const turn = obj(c)
      if (turn) geminiParts(out, turn["parts"], ["contents", i, "parts"], roleOf(turn["role"]))
    })
  return out
}

const geminiAnswer = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  arr(body["candidates"]).forEach((c, i) =>
    geminiParts(out, obj(obj(c)?.["content"])?.["parts"], ["candidates", i, "content", "parts"], "assistant")
  )
  return out
}

const geminiEvent = (_event: string | undefined, data: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  arr(data["candidates"]).forEach((c, i) => {
    const index = typeof obj(c)?.["index"] === "number" ? (obj(c)!["index"] as number) : i
    geminiParts(out, obj(obj(c)?.["content"])?.["parts"], ["candidates", i, "content", "parts"], "assistant", `g${index}`)
  })
  return out
}

// ---------------------------------------------------------------- Ollama chat and generate

const ollamaMessage = (out: Array<Slot>, msg: Obj, path: Path, role: Role, channel?: string): void => {
  str(out, msg, "content", path, role, channel ? { channel } : undefined)
  arr(msg["tool_calls"]).forEach((t, j) =>
    leaves(out, obj(obj(t)?.["function"])?.["arguments"], [...path, "tool_calls", j, "function", "arguments"], role)
  )
}

const ollamaRequest = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  str(out, body, "system", [], "system")
  str(out, body, "prompt", [], "user")
  arr(body["messages"]).forEach((m, i) => {
    const msg = obj(m)
    if (msg) ollamaMessage(out, msg, ["messages", i], roleOf(msg["role"]))
  })
  return out
}

const ollamaAnswer = (body: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  str(out, body, "response", [], "assistant")
  const msg = obj(body["message"])
  if (msg) ollamaMessage(out, msg, ["message"], "assistant")
  return out
}

const ollamaEvent = (_event: string | undefined, data: Obj): Array<Slot> => {
  const out: Array<Slot> = []
  str(out, data, "response", [], "assistant", { channel: "m" })
  const msg = obj(data["message"])
  if (msg) ollamaMessage(out, msg, ["message"], "assistant", "m")
  return out
}

// ---------------------------------------------------------------- the table

export interface FormatWalkers {
  readonly request: (body: Obj) => Array<Slot>
  readonly answer: (body: Obj) => Array<Slot>
  readonly event: (event: string | undefined, data: Obj) => Array<Slot>
}

export const WALKERS: Readonly<Record<FormatId, FormatWalkers>> = {
  "openai-chat": { request: openAiChatRequest, answer: openAiChatAnswer, event: openAiChatEvent },
  "openai-responses": { request: responsesRequest, answer: responsesAnswer, event: responsesEvent },
  anthropic: { request: anthropicRequest, answer: anthropicAnswer, event: anthropicEvent },
  gemini: { request: geminiRequest, answer: geminiAnswer, event: geminiEvent },
  ollama: { request: ollamaRequest, answer: ollamaAnswer, event: ollamaEvent }
}

// ---------------------------------------------------------------- writing

/**
 * `root` with the strings at `changes`' paths replaced; containers along the paths are copied
 * (once each), everything else is shared with `root`.
 */
export const setPaths = <T extends Obj>(root: T, changes: ReadonlyArray<readonly [Path, string]>): T => {
  const copies = new Map<unknown, unknown>()
  const copy = (v: unknown): any => {
    const known = copies.get(v)
    if (known !== undefined) return known
    const c = Array.isArray(v) ? v.slice() : { ...(v as Obj) }
    copies.set(v, c)
    copies.set(c, c)
    return c
  }
  const top = copy(root)
  for (const [path, value] of changes) {
    if (path.length === 0) continue
    let node = top
    for (let i = 0; i < path.length - 1; i++) {
      const key = path[i]!
      const child = copy(node[key])
      node[key] = child
      node = child
    }
    node[path[path.length - 1]!] = value
  }
  return top as T
}

/** Writes in place (a stream event's parsed data, owned by the rewriter). */
export const setPath = (root: Obj, path: Path, value: string): void => {
  if (path.length === 0) return
  let node: any = root
  for (let i = 0; i < path.length - 1; i++) node = node[path[i]!]
  node[path[path.length - 1]!] = value
}
