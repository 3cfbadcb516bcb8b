/**
 * Where the text is, per wire format: for each inbound format, walks over the text slots of a request, a whole answer
 * and one stream event (docs/guardrails.md#where-they-run). Walkers only read; `setPaths` writes copy-on-write.
 *
 * Each walk hands every text to a visitor with the path to it kept on one stack (pushed and popped as the walk goes
 * down and up), so a visitor that only tests texts (the common path's screen, `scanRequest`) allocates nothing;
 * the slot lists (`request`, `answer`, `event`) copy the path only for the slots they keep.
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

/**
 * Receives one text slot: its text, role, whether it is JSON, its channel (stream events) and the path to it. `at` is
 * the walk's own stack, valid only during the call: copy it to keep it. Returning true stops the walk.
 */
export type Visitor = (text: string, role: Role, json: boolean, channel: string | undefined, at: Array<string | number>) => boolean

type Obj = Record<string, unknown>
type At = Array<string | number>
const obj = (v: unknown): Obj | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : undefined)

/** A string at `o[k]` as a slot (empty strings are not slots). */
const str = (v: Visitor, at: At, o: Obj | undefined, k: string, role: Role, json = false, channel?: string): boolean => {
  if (o === undefined) return false
  const text = o[k]
  if (typeof text !== "string" || text === "") return false
  at.push(k)
  if (v(text, role, json, channel, at)) return true
  at.pop()
  return false
}

/** Every string leaf of a JSON value (tool arguments and results given as objects). */
const leaves = (v: Visitor, at: At, x: unknown, role: Role, depth = 0): boolean => {
  if (depth > 32) return false
  if (typeof x === "string") return x !== "" && v(x, role, false, undefined, at)
  if (Array.isArray(x)) {
    for (let i = 0; i < x.length; i++) {
      at.push(i)
      if (leaves(v, at, x[i], role, depth + 1)) return true
      at.pop()
    }
  } else if (typeof x === "object" && x !== null)
    for (const k in x as Obj) {
      at.push(k)
      if (leaves(v, at, (x as Obj)[k], role, depth + 1)) return true
      at.pop()
    }
  return false
}

/** A string or an array of text parts (`{type, text}`): OpenAI content, Anthropic system and content. */
const content = (v: Visitor, at: At, o: Obj, k: string, role: Role): boolean => {
  const c = o[k]
  if (typeof c === "string") return str(v, at, o, k, role)
  if (!Array.isArray(c)) return false
  at.push(k)
  for (let i = 0; i < c.length; i++) {
    at.push(i)
    if (str(v, at, obj(c[i]), "text", role)) return true
    at.pop()
  }
  at.pop()
  return false
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

/** `function.arguments` of each tool call in `calls` (under `key`), with the channel `channelOf` gives it. */
const toolCallArguments = (
  v: Visitor,
  at: At,
  calls: unknown,
  role: Role,
  channelOf?: (call: Obj | undefined, j: number) => string
): boolean => {
  if (!Array.isArray(calls)) return false
  at.push("tool_calls")
  for (let j = 0; j < calls.length; j++) {
    const call = obj(calls[j])
    at.push(j, "function")
    if (str(v, at, obj(call?.["function"]), "arguments", role, true, channelOf?.(call, j))) return true
    at.pop()
    at.pop()
  }
  at.pop()
  return false
}

const openAiChatRequest = (body: Obj, v: Visitor, at: At): boolean => {
  const messages = body["messages"]
  if (Array.isArray(messages)) {
    at.push("messages")
    for (let i = 0; i < messages.length; i++) {
      const msg = obj(messages[i])
      if (!msg) continue
      const role = roleOf(msg["role"])
      at.push(i)
      if (content(v, at, msg, "content", role) || toolCallArguments(v, at, msg["tool_calls"], role)) return true
      at.pop()
    }
    at.pop()
  }
  // Legacy completions: prompt is a string or an array of strings.
  const prompt = body["prompt"]
  if (typeof prompt === "string") {
    if (str(v, at, body, "prompt", "user")) return true
  } else if (Array.isArray(prompt)) {
    at.push("prompt")
    for (let i = 0; i < prompt.length; i++) {
      const p = prompt[i]
      if (typeof p !== "string" || p === "") continue
      at.push(i)
      if (v(p, "user", false, undefined, at)) return true
      at.pop()
    }
    at.pop()
  }
  return str(v, at, body, "suffix", "user")
}

const openAiChatAnswer = (body: Obj, v: Visitor, at: At): boolean => {
  const choices = body["choices"]
  if (!Array.isArray(choices)) return false
  at.push("choices")
  for (let i = 0; i < choices.length; i++) {
    const choice = obj(choices[i])
    if (!choice) continue
    at.push(i)
    if (str(v, at, choice, "text", "assistant")) return true
    const msg = obj(choice["message"])
    if (msg) {
      at.push("message")
      if (content(v, at, msg, "content", "assistant") || toolCallArguments(v, at, msg["tool_calls"], "assistant")) return true
      at.pop()
    }
    at.pop()
  }
  at.pop()
  return false
}

const openAiChatEvent = (_event: string | undefined, data: Obj, v: Visitor, at: At): boolean => {
  const choices = data["choices"]
  if (!Array.isArray(choices)) return false
  at.push("choices")
  for (let i = 0; i < choices.length; i++) {
    const choice = obj(choices[i])
    if (!choice) continue
    const index = typeof choice["index"] === "number" ? choice["index"] : i
    at.push(i)
    if (str(v, at, choice, "text", "assistant", false, `c${index}`)) return true
    const delta = obj(choice["delta"])
    if (delta) {
      at.push("delta")
      if (
        str(v, at, delta, "content", "assistant", false, `c${index}`) ||
        toolCallArguments(v, at, delta["tool_calls"], "assistant", (call, j) => {
          const n = typeof call?.["index"] === "number" ? call["index"] : j
          return `c${index}.t${n}`
        })
      )
        return true
      at.pop()
    }
    at.pop()
  }
  at.pop()
  return false
}

// ---------------------------------------------------------------- OpenAI Responses

/** One output or input item of the Responses API. */
const responsesItem = (v: Visitor, at: At, item: Obj, fallback: Role): boolean => {
  const type = item["type"]
  if (type === "function_call_output" || type === "custom_tool_call_output") {
    const output = item["output"]
    if (typeof output === "string") return str(v, at, item, "output", "tool")
    if (!Array.isArray(output)) return false
    at.push("output")
    for (let i = 0; i < output.length; i++) {
      at.push(i)
      if (str(v, at, obj(output[i]), "text", "tool")) return true
      at.pop()
    }
    at.pop()
    return false
  }
  if (type === "function_call") return str(v, at, item, "arguments", "assistant", true)
  if (type === "custom_tool_call") return str(v, at, item, "input", "assistant")
  if (type === "message" || type === undefined)
    return content(v, at, item, "content", item["role"] === undefined ? fallback : roleOf(item["role"]))
  return false
}

/** Each item of the list at `o[k]`. */
const responsesItems = (v: Visitor, at: At, o: Obj, k: string, fallback: Role): boolean => {
  const items = o[k]
  if (!Array.isArray(items)) return false
  at.push(k)
  for (let i = 0; i < items.length; i++) {
    const item = obj(items[i])
    if (!item) continue
    at.push(i)
    if (responsesItem(v, at, item, fallback)) return true
    at.pop()
  }
  at.pop()
  return false
}

const responsesRequest = (body: Obj, v: Visitor, at: At): boolean => {
  if (str(v, at, body, "instructions", "system")) return true
  if (typeof body["input"] === "string") return str(v, at, body, "input", "user")
  return responsesItems(v, at, body, "input", "user")
}

const responsesOutput = (v: Visitor, at: At, response: Obj): boolean =>
  responsesItems(v, at, response, "output", "assistant") || str(v, at, response, "output_text", "assistant")

const responsesAnswer = (body: Obj, v: Visitor, at: At): boolean => responsesOutput(v, at, body)

/** `o[k]` (an object) with `walk` under it. */
const under = (v: Visitor, at: At, o: Obj, k: string, walk: (v: Visitor, at: At, inner: Obj) => boolean): boolean => {
  const inner = obj(o[k])
  if (!inner) return false
  at.push(k)
  if (walk(v, at, inner)) return true
  at.pop()
  return false
}

const responsesEvent = (event: string | undefined, data: Obj, v: Visitor, at: At): boolean => {
  const type = (data["type"] as string | undefined) ?? event
  switch (type) {
    case "response.output_text.delta":
      return str(v, at, data, "delta", "assistant", false, `o${String(data["output_index"] ?? 0)}.${String(data["content_index"] ?? 0)}`)
    case "response.function_call_arguments.delta":
      return str(v, at, data, "delta", "assistant", true, `f${String(data["output_index"] ?? 0)}`)
    case "response.output_text.done":
      return str(v, at, data, "text", "assistant")
    case "response.function_call_arguments.done":
      return str(v, at, data, "arguments", "assistant", true)
    case "response.content_part.added":
    case "response.content_part.done":
      return under(v, at, data, "part", (v, at, part) => str(v, at, part, "text", "assistant"))
    case "response.output_item.added":
    case "response.output_item.done":
      return under(v, at, data, "item", (v, at, item) => responsesItem(v, at, item, "assistant"))
    default:
      return under(v, at, data, "response", responsesOutput)
  }
}

// ---------------------------------------------------------------- Anthropic messages

/** Blocks at `o[k]`: a string, or text, tool_result and tool_use blocks. */
const anthropicBlocks = (v: Visitor, at: At, o: Obj, k: string, role: Role): boolean => {
  const blocks = o[k]
  if (typeof blocks === "string") return str(v, at, o, k, role)
  if (!Array.isArray(blocks)) return false
  at.push(k)
  for (let i = 0; i < blocks.length; i++) {
    const block = obj(blocks[i])
    if (!block) continue
    const type = block["type"]
    at.push(i)
    if (type === "text") {
      if (str(v, at, block, "text", role)) return true
    } else if (type === "tool_result") {
      if (anthropicBlocks(v, at, block, "content", "tool")) return true
    } else if (type === "tool_use") {
      at.push("input")
      if (leaves(v, at, block["input"], role)) return true
      at.pop()
    }
    at.pop()
  }
  at.pop()
  return false
}

const anthropicRequest = (body: Obj, v: Visitor, at: At): boolean => {
  if (anthropicBlocks(v, at, body, "system", "system")) return true
  const messages = body["messages"]
  if (!Array.isArray(messages)) return false
  at.push("messages")
  for (let i = 0; i < messages.length; i++) {
    const msg = obj(messages[i])
    if (!msg) continue
    at.push(i)
    if (anthropicBlocks(v, at, msg, "content", roleOf(msg["role"]))) return true
    at.pop()
  }
  at.pop()
  return false
}

const anthropicAnswer = (body: Obj, v: Visitor, at: At): boolean => anthropicBlocks(v, at, body, "content", "assistant")

const anthropicEvent = (event: string | undefined, data: Obj, v: Visitor, at: At): boolean => {
  const type = (data["type"] as string | undefined) ?? event
  if (type === "content_block_delta") {
    const delta = obj(data["delta"])
    const channel = `b${String(data["index"] ?? 0)}`
    const kind = delta?.["type"]
    if (kind !== "text_delta" && kind !== "input_json_delta") return false
    at.push("delta")
    if (
      kind === "text_delta"
        ? str(v, at, delta, "text", "assistant", false, channel)
        : str(v, at, delta, "partial_json", "assistant", true, channel)
    )
      return true
    at.pop()
  } else if (type === "content_block_start") {
    const block = obj(data["content_block"])
    if (block?.["type"] === "text") return under(v, at, data, "content_block", (v, at, b) => str(v, at, b, "text", "assistant"))
  } else if (type === "message_start")
    return under(v, at, data, "message", (v, at, message) => anthropicBlocks(v, at, message, "content", "assistant"))
  return false
}

// ---------------------------------------------------------------- Gemini generateContent

const geminiParts = (v: Visitor, at: At, parts: unknown, role: Role, channel?: string): boolean => {
  if (!Array.isArray(parts)) return false
  for (let i = 0; i < parts.length; i++) {
    const part = obj(parts[i])
    if (!part || part["thought"] === true) continue
    at.push(i)
    if (str(v, at, part, "text", role, false, channel)) return true
    const call = obj(part["functionCall"])
    if (call) {
      at.push("functionCall", "args")
      if (leaves(v, at, call["args"], role)) return true
      at.pop()
      at.pop()
    }
    const response = obj(part["functionResponse"])
    if (response) {
      at.push("functionResponse", "response")
      if (leaves(v, at, response["response"], "tool")) return true
      at.pop()
      at.pop()
    }
    at.pop()
  }
  return false
}

const SYSTEM_KEYS = ["systemInstruction", "system_instruction"] as const

const geminiRequest = (body: Obj, v: Visitor, at: At): boolean => {
  for (const key of SYSTEM_KEYS) {
    const sys = body[key]
    if (typeof sys === "string") {
      if (str(v, at, body, key, "system")) return true
    } else {
      const o = obj(sys)
      if (!o) continue
      at.push(key, "parts")
      if (geminiParts(v, at, o["parts"], "system")) return true
      at.pop()
      at.pop()
    }
  }
  const contents = body["contents"]
  if (typeof contents === "string") return str(v, at, body, "contents", "user")
  if (!Array.isArray(contents)) return false
  at.push("contents")
  for (let i = 0; i < contents.length; i++) {
    const turn = obj(contents[i])
    if (!turn) continue
    at.push(i, "parts")
    if (geminiParts(v, at, turn["parts"], roleOf(turn["role"]))) return true
    at.pop()
    at.pop()
  }
  at.pop()
  return false
}

/** The parts of each candidate's content (`channelOf`: a stream's channel per candidate). */
const geminiCandidates = (v: Visitor, at: At, data: Obj, channelOf?: (c: Obj | undefined, i: number) => string): boolean => {
  const candidates = data["candidates"]
  if (!Array.isArray(candidates)) return false
  at.push("candidates")
  for (let i = 0; i < candidates.length; i++) {
    const c = obj(candidates[i])
    at.push(i, "content", "parts")
    if (geminiParts(v, at, obj(c?.["content"])?.["parts"], "assistant", channelOf?.(c, i))) return true
    at.length -= 3
  }
  at.pop()
  return false
}

const geminiAnswer = (body: Obj, v: Visitor, at: At): boolean => geminiCandidates(v, at, body)

const geminiEvent = (_event: string | undefined, data: Obj, v: Visitor, at: At): boolean =>
  geminiCandidates(v, at, data, (c, i) => `g${typeof c?.["index"] === "number" ? c["index"] : i}`)

// ---------------------------------------------------------------- Ollama chat and generate

const ollamaMessage = (v: Visitor, at: At, msg: Obj, role: Role, channel?: string): boolean => {
  if (str(v, at, msg, "content", role, false, channel)) return true
  const calls = msg["tool_calls"]
  if (!Array.isArray(calls)) return false
  at.push("tool_calls")
  for (let j = 0; j < calls.length; j++) {
    at.push(j, "function", "arguments")
    if (leaves(v, at, obj(obj(calls[j])?.["function"])?.["arguments"], role)) return true
    at.length -= 3
  }
  at.pop()
  return false
}

const ollamaRequest = (body: Obj, v: Visitor, at: At): boolean => {
  if (str(v, at, body, "system", "system") || str(v, at, body, "prompt", "user")) return true
  const messages = body["messages"]
  if (!Array.isArray(messages)) return false
  at.push("messages")
  for (let i = 0; i < messages.length; i++) {
    const msg = obj(messages[i])
    if (!msg) continue
    at.push(i)
    if (ollamaMessage(v, at, msg, roleOf(msg["role"]))) return true
    at.pop()
  }
  at.pop()
  return false
}

const ollamaAnswer = (body: Obj, v: Visitor, at: At): boolean =>
  str(v, at, body, "response", "assistant") || under(v, at, body, "message", (v, at, msg) => ollamaMessage(v, at, msg, "assistant"))

const ollamaEvent = (_event: string | undefined, data: Obj, v: Visitor, at: At): boolean =>
  str(v, at, data, "response", "assistant", false, "m") ||
  under(v, at, data, "message", (v, at, msg) => ollamaMessage(v, at, msg, "assistant", "m"))

// ---------------------------------------------------------------- the table

type Walk = (body: Obj, v: Visitor, at: At) => boolean
type EventWalk = (event: string | undefined, data: Obj, v: Visitor, at: At) => boolean

/** A slot of its own for what a visitor was handed (the path copied off the walk's stack). */
const slotOf = (text: string, role: Role, json: boolean, channel: string | undefined, at: At): Slot => {
  const path = at.slice()
  if (json) return channel === undefined ? { path, text, role, json } : { path, text, role, json, channel }
  return channel === undefined ? { path, text, role } : { path, text, role, channel }
}

/** Every slot of one walk, in walk order. */
const collect = (walk: (v: Visitor, at: At) => boolean): Array<Slot> => {
  const out: Array<Slot> = []
  walk((text, role, json, channel, at) => {
    out.push(slotOf(text, role, json, channel, at))
    return false
  }, [])
  return out
}

export interface FormatWalkers {
  readonly request: (body: Obj) => Array<Slot>
  readonly answer: (body: Obj) => Array<Slot>
  readonly event: (event: string | undefined, data: Obj) => Array<Slot>
  /** Whether `visit` stops at some text slot of a request: true at the first one it does, without listing slots. */
  readonly scanRequest: (body: Obj, visit: Visitor) => boolean
}

const SCAN_AT: At = []

const walkers = (request: Walk, answer: Walk, event: EventWalk): FormatWalkers => ({
  request: (body) => collect((v, at) => request(body, v, at)),
  answer: (body) => collect((v, at) => answer(body, v, at)),
  event: (e, data) => collect((v, at) => event(e, data, v, at)),
  scanRequest: (body, visit) => {
    // One stack for every scan, so a scan allocates nothing: scans do not nest (a visitor never walks), and a walk
    // that stopped or threw leaves what it pushed, cleared here.
    if (SCAN_AT.length !== 0) SCAN_AT.length = 0
    return request(body, visit, SCAN_AT)
  }
})

export const WALKERS: Readonly<Record<FormatId, FormatWalkers>> = {
  "openai-chat": walkers(openAiChatRequest, openAiChatAnswer, openAiChatEvent),
  "openai-responses": walkers(responsesRequest, responsesAnswer, responsesEvent),
  anthropic: walkers(anthropicRequest, anthropicAnswer, anthropicEvent),
  gemini: walkers(geminiRequest, geminiAnswer, geminiEvent),
  ollama: walkers(ollamaRequest, ollamaAnswer, ollamaEvent)
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
