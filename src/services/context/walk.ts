/**
 * The wire-format walker: finds every text a client sends in any wire format, hands each to `fn` with its `Segment`,
 * and puts the answers back without mutating the input or touching any other field
 * (docs/compression.md#where-the-text-is-the-wire-format-walker).
 */
import type { FormatId } from "../../domain/canonical.js"
import type { Segment } from "./types.js"

type Body = Readonly<Record<string, unknown>>
type Fn = (text: string, segment: Segment) => string
type Role = Segment["role"]

/** What a tool result needs from the call it answers. */
interface CallInfo {
  readonly toolName?: string
  readonly command?: string
}

const obj = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)

// ---------------------------------------------------------------- structural sharing

/** `xs` mapped; `xs` itself when no element changed. */
const mapArray = <T>(xs: ReadonlyArray<T>, f: (x: T, i: number) => T): ReadonlyArray<T> => {
  let out: Array<T> | undefined
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i]!
    const y = f(x, i)
    if (y !== x && out === undefined) out = xs.slice(0, i)
    if (out !== undefined) out.push(y)
  }
  return out ?? xs
}

/** `o` with `key` set to `value`; `o` itself when it already holds it. */
const withKey = <T extends Readonly<Record<string, unknown>>>(o: T, key: string, value: unknown): T =>
  o[key] === value ? o : ({ ...o, [key]: value } as T)

/** One segment's text through `fn`, guarded: empty texts are not offered, an empty answer keeps the text. */
const visit = (fn: Fn, text: string, segment: Segment): string => {
  if (text === "") return text
  const out = fn(text, segment)
  return typeof out === "string" && out !== "" ? out : text
}

const segment = (role: Role, kind: Segment["kind"], turn: number, turns: number, call?: CallInfo): Segment => ({
  role,
  kind,
  ...(call?.toolName !== undefined ? { toolName: call.toolName } : {}),
  ...(call?.command !== undefined ? { command: call.command } : {}),
  turn,
  turns
})

// ---------------------------------------------------------------- commands

const SHELLS = new Set([
  "sh",
  "bash",
  "zsh",
  "dash",
  "ksh",
  "fish",
  "/bin/sh",
  "/bin/bash",
  "/bin/zsh",
  "/usr/bin/bash",
  "/usr/bin/zsh",
  "/usr/bin/sh"
])

/**
 * A command given as an argv array: `["bash", "-lc", "git status"]` is the script `git status`
 * (the shell wrapper says nothing about the output); anything else is joined by spaces.
 */
const argvCommand = (argv: ReadonlyArray<unknown>): string | undefined => {
  if (!argv.every((a) => typeof a === "string") || argv.length === 0) return undefined
  const words = argv as ReadonlyArray<string>
  if (words.length === 3 && SHELLS.has(words[0]!) && /^-[a-z]*c$/.test(words[1]!)) return words[2]!
  return words.join(" ")
}

const commandValue = (v: unknown): string | undefined => {
  if (typeof v === "string") return v.trim() === "" ? undefined : v
  if (Array.isArray(v)) return argvCommand(v)
  return undefined
}

/** The command line in a call's arguments (`command`, `cmd`, `args`), given as an object or its JSON text. */
export const commandOf = (args: unknown): string | undefined => {
  let a = obj(args)
  if (a === undefined && typeof args === "string") {
    try {
      a = obj(JSON.parse(args))
    } catch {
      return undefined
    }
  }
  if (a === undefined) return undefined
  return commandValue(a["command"]) ?? commandValue(a["cmd"]) ?? commandValue(a["args"])
}

const callInfo = (name: string | undefined, args: unknown): CallInfo => {
  const command = commandOf(args)
  return { ...(name ? { toolName: name } : {}), ...(command !== undefined ? { command } : {}) }
}

// ---------------------------------------------------------------- shared shapes

/**
 * A content value that is a string or an array of text parts (`type` in `textTypes`): each text
 * through `fn`. Other parts (images, files, refusals, audio) are left alone.
 */
const mapContent = (content: unknown, textTypes: ReadonlySet<string>, seg: () => Segment, fn: Fn): unknown => {
  if (typeof content === "string") return visit(fn, content, seg())
  if (!Array.isArray(content)) return content
  return mapArray(content as ReadonlyArray<unknown>, (part) => {
    const p = obj(part)
    if (p === undefined || !textTypes.has(str(p["type"]) ?? "") || typeof p["text"] !== "string") return part
    return withKey(p, "text", visit(fn, p["text"], seg()))
  })
}

const CHAT_TEXT = new Set(["text", "input_text", "output_text"])
const RESPONSES_TEXT = new Set(["input_text", "output_text", "text"])
const ANTHROPIC_TEXT = new Set(["text"])

/** A field that holds an array: mapped, the body answered with it (the same body when nothing changed). */
const mapField = (body: Body, key: string, f: (x: unknown, i: number, n: number) => unknown): Body => {
  const xs = body[key]
  if (!Array.isArray(xs)) return body
  const n = xs.length
  return withKey(
    body,
    key,
    mapArray(xs as ReadonlyArray<unknown>, (x, i) => f(x, i, n))
  )
}

// ---------------------------------------------------------------- openai-chat

const chatRole = (role: string | undefined): Role | undefined =>
  role === "system" || role === "developer"
    ? "system"
    : role === "user"
      ? "user"
      : role === "assistant"
        ? "assistant"
        : role === "tool" || role === "function"
          ? "tool"
          : undefined

const walkChat = (endpoint: string, body: Body, fn: Fn): Body => {
  if (endpoint === "completions") {
    const prompt = body["prompt"]
    if (typeof prompt === "string") return withKey(body, "prompt", visit(fn, prompt, segment("user", "prose", 0, 1)))
    return mapField(body, "prompt", (p, i, n) => (typeof p === "string" ? visit(fn, p, segment("user", "prose", i, n)) : p))
  }
  const calls = new Map<string, CallInfo>()
  const messages = body["messages"]
  if (!Array.isArray(messages)) return body
  for (const raw of messages as ReadonlyArray<unknown>) {
    const m = obj(raw)
    if (m?.["role"] !== "assistant") continue
    for (const c of Array.isArray(m["tool_calls"]) ? (m["tool_calls"] as ReadonlyArray<unknown>) : []) {
      const call = obj(c)
      const id = str(call?.["id"])
      if (!id) continue
      const custom = obj(call?.["custom"])
      const f = obj(call?.["function"])
      calls.set(id, custom ? callInfo(str(custom["name"]), undefined) : callInfo(str(f?.["name"]), f?.["arguments"]))
    }
  }
  return mapField(body, "messages", (raw, turn, turns) => {
    const m = obj(raw)
    const role = chatRole(str(m?.["role"]))
    if (m === undefined || role === undefined) return raw
    if (role === "tool") {
      const id = str(m["tool_call_id"])
      const known = id !== undefined ? calls.get(id) : undefined
      const name = known?.toolName ?? str(m["name"])
      const call: CallInfo = { ...known, ...(name ? { toolName: name } : {}) }
      return withKey(
        m,
        "content",
        mapContent(m["content"], CHAT_TEXT, () => segment("tool", "tool-result", turn, turns, call), fn)
      )
    }
    return withKey(
      m,
      "content",
      mapContent(m["content"], CHAT_TEXT, () => segment(role, "prose", turn, turns), fn)
    )
  })
}

// ---------------------------------------------------------------- openai-responses

const walkResponses = (body: Body, fn: Fn): Body => {
  const input = body["input"]
  const turns = Array.isArray(input) ? input.length : typeof input === "string" ? 1 : 0
  let out = body
  if (typeof body["instructions"] === "string") {
    out = withKey(out, "instructions", visit(fn, body["instructions"], segment("system", "prose", 0, Math.max(turns, 1))))
  }
  if (typeof input === "string") return withKey(out, "input", visit(fn, input, segment("user", "prose", 0, 1)))
  if (!Array.isArray(input)) return out
  const calls = new Map<string, CallInfo>()
  for (const raw of input as ReadonlyArray<unknown>) {
    const item = obj(raw)
    const id = str(item?.["call_id"])
    if (item === undefined || !id) continue
    switch (item["type"]) {
      case "function_call":
        calls.set(id, callInfo(str(item["name"]), item["arguments"]))
        break
      case "custom_tool_call":
        calls.set(id, callInfo(str(item["name"]), undefined))
        break
      case "local_shell_call": {
        const command = commandOf(obj(item["action"]))
        calls.set(id, { toolName: "local_shell", ...(command !== undefined ? { command } : {}) })
        break
      }
    }
  }
  return mapField(out, "input", (raw, turn) => {
    const item = obj(raw)
    if (item === undefined) return raw
    const type = str(item["type"]) ?? "message"
    if (type === "message") {
      const role = chatRole(str(item["role"]))
      if (role === undefined || role === "tool") return raw
      return withKey(
        item,
        "content",
        mapContent(item["content"], RESPONSES_TEXT, () => segment(role, "prose", turn, turns), fn)
      )
    }
    if (type === "function_call_output" || type === "custom_tool_call_output" || type === "local_shell_call_output") {
      const id = str(item["call_id"])
      const call =
        (id !== undefined ? calls.get(id) : undefined) ?? (type === "local_shell_call_output" ? { toolName: "local_shell" } : undefined)
      return withKey(
        item,
        "output",
        mapContent(item["output"], RESPONSES_TEXT, () => segment("tool", "tool-result", turn, turns, call), fn)
      )
    }
    // reasoning (and its encrypted content), calls, item references, server-side tool items: never touched.
    return raw
  })
}

// ---------------------------------------------------------------- anthropic

const walkAnthropic = (body: Body, fn: Fn): Body => {
  const messages = body["messages"]
  const turns = Array.isArray(messages) ? messages.length : 0
  const systemSeg = () => segment("system", "prose", 0, Math.max(turns, 1))
  let out = withKey(body, "system", mapContent(body["system"], ANTHROPIC_TEXT, systemSeg, fn))
  if (!Array.isArray(messages)) return out
  const calls = new Map<string, CallInfo>()
  for (const raw of messages as ReadonlyArray<unknown>) {
    const content = obj(raw)?.["content"]
    if (!Array.isArray(content)) continue
    for (const b of content as ReadonlyArray<unknown>) {
      const block = obj(b)
      const id = str(block?.["id"])
      if (block?.["type"] === "tool_use" && id) calls.set(id, callInfo(str(block["name"]), block["input"]))
    }
  }
  out = mapField(out, "messages", (raw, turn) => {
    const m = obj(raw)
    const r = str(m?.["role"])
    const role: Role | undefined = r === "user" ? "user" : r === "assistant" ? "assistant" : r === "system" ? "system" : undefined
    if (m === undefined || role === undefined) return raw
    const content = m["content"]
    if (typeof content === "string") return withKey(m, "content", visit(fn, content, segment(role, "prose", turn, turns)))
    if (!Array.isArray(content)) return raw
    return withKey(
      m,
      "content",
      mapArray(content as ReadonlyArray<unknown>, (b) => {
        const block = obj(b)
        if (block === undefined) return b
        if (block["type"] === "text" && typeof block["text"] === "string") {
          return withKey(block, "text", visit(fn, block["text"], segment(role, "prose", turn, turns)))
        }
        if (block["type"] === "tool_result") {
          const id = str(block["tool_use_id"])
          const call = id !== undefined ? calls.get(id) : undefined
          return withKey(
            block,
            "content",
            mapContent(block["content"], ANTHROPIC_TEXT, () => segment("tool", "tool-result", turn, turns, call), fn)
          )
        }
        // thinking, redacted_thinking, image, document, tool_use, server tool blocks: never touched.
        return b
      })
    )
  })
  return out
}

// ---------------------------------------------------------------- gemini

/** The string fields of a functionResponse's `response` that hold a tool's output. */
const GEMINI_OUTPUT_FIELDS = ["output", "content", "result", "stdout", "stderr"] as const

const walkGemini = (body: Body, fn: Fn): Body => {
  const contents = body["contents"]
  const turns = Array.isArray(contents) ? contents.length : 0
  const systemSeg = () => segment("system", "prose", 0, Math.max(turns, 1))
  let out = body
  for (const key of ["systemInstruction", "system_instruction"]) {
    const sys = out[key]
    if (typeof sys === "string") out = withKey(out, key, visit(fn, sys, systemSeg()))
    else if (obj(sys))
      out = withKey(
        out,
        key,
        mapGeminiParts(obj(sys)!, () => systemSeg(), fn)
      )
  }
  if (!Array.isArray(contents)) return out
  // Calls in order; a result answers the call with its id, else the earliest open call of its name.
  const open: Array<{ id: string | undefined; name: string; info: CallInfo }> = []
  const resultCall = (response: Record<string, unknown>): CallInfo => {
    const name = str(response["name"]) ?? ""
    const id = str(response["id"])
    const at = id !== undefined ? open.findIndex((c) => c.id === id) : -1
    const i = at !== -1 ? at : open.findIndex((c) => c.name === name)
    if (i !== -1) return open.splice(i, 1)[0]!.info
    return name ? { toolName: name } : {}
  }
  return mapField(out, "contents", (raw, turn) => {
    const c = obj(raw)
    if (c === undefined || !Array.isArray(c["parts"])) return raw
    const role: Role = c["role"] === "model" ? "assistant" : "user"
    return withKey(
      c,
      "parts",
      mapArray(c["parts"] as ReadonlyArray<unknown>, (p) => {
        const part = obj(p)
        if (part === undefined) return p
        const call = obj(part["functionCall"]) ?? obj(part["function_call"])
        if (call) {
          const name = str(call["name"]) ?? ""
          open.push({ id: str(call["id"]), name, info: callInfo(name || undefined, call["args"]) })
          return p
        }
        const responseKey =
          part["functionResponse"] !== undefined
            ? "functionResponse"
            : part["function_response"] !== undefined
              ? "function_response"
              : undefined
        const fr = responseKey ? obj(part[responseKey]) : undefined
        if (responseKey && fr) {
          const info = resultCall(fr)
          const response = obj(fr["response"])
          if (response === undefined) return p
          let next = response
          for (const field of GEMINI_OUTPUT_FIELDS) {
            const v = next[field]
            if (typeof v === "string") next = withKey(next, field, visit(fn, v, segment("tool", "tool-result", turn, turns, info)))
          }
          return next === response ? p : { ...part, [responseKey]: { ...fr, response: next } }
        }
        return mapGeminiTextPart(part, p, () => segment(role, "prose", turn, turns), fn)
      })
    )
  })
}

/** A text part: not a thought, and not carrying a thought signature (signed model output stays as it was). */
const mapGeminiTextPart = (part: Record<string, unknown>, original: unknown, seg: () => Segment, fn: Fn): unknown => {
  if (typeof part["text"] !== "string" || part["thought"] === true) return original
  if (part["thoughtSignature"] !== undefined || part["thought_signature"] !== undefined) return original
  return withKey(part, "text", visit(fn, part["text"], seg()))
}

const mapGeminiParts = (content: Record<string, unknown>, seg: () => Segment, fn: Fn): Record<string, unknown> => {
  const parts = content["parts"]
  if (!Array.isArray(parts)) return content
  return withKey(
    content,
    "parts",
    mapArray(parts as ReadonlyArray<unknown>, (p) => {
      const part = obj(p)
      return part === undefined ? p : mapGeminiTextPart(part, p, seg, fn)
    })
  )
}

// ---------------------------------------------------------------- ollama

const walkOllama = (endpoint: string, body: Body, fn: Fn): Body => {
  if (endpoint === "api.generate") {
    let out = body
    if (typeof body["system"] === "string") out = withKey(out, "system", visit(fn, body["system"], segment("system", "prose", 0, 1)))
    if (typeof body["prompt"] === "string") out = withKey(out, "prompt", visit(fn, body["prompt"], segment("user", "prose", 0, 1)))
    return out
  }
  // Results name the tool (`tool_name`) or the call id; they answer the earliest open call that fits.
  const open: Array<{ id: string | undefined; name: string; info: CallInfo }> = []
  return mapField(body, "messages", (raw, turn, turns) => {
    const m = obj(raw)
    const role = chatRole(str(m?.["role"]))
    if (m === undefined || role === undefined) return raw
    if (role === "assistant" && Array.isArray(m["tool_calls"])) {
      for (const c of m["tool_calls"] as ReadonlyArray<unknown>) {
        const f = obj(obj(c)?.["function"])
        const name = str(f?.["name"]) ?? ""
        open.push({ id: str(obj(c)?.["id"]), name, info: callInfo(name || undefined, f?.["arguments"]) })
      }
    }
    if (typeof m["content"] !== "string") return raw
    if (role === "tool") {
      const name = str(m["tool_name"]) ?? str(m["name"])
      const id = str(m["tool_call_id"])
      const i = open.findIndex((c) => (id ? c.id === id : name ? c.name === name : true))
      const info: CallInfo = i !== -1 ? open.splice(i, 1)[0]!.info : name ? { toolName: name } : {}
      return withKey(
        m,
        "content",
        visit(fn, m["content"], segment("tool", "tool-result", turn, turns, name ? { ...info, toolName: name } : info))
      )
    }
    return withKey(m, "content", visit(fn, m["content"], segment(role, "prose", turn, turns)))
  })
}

// ---------------------------------------------------------------- entry points

const walk = (format: FormatId, endpoint: string, body: Body, fn: Fn): Body => {
  switch (format) {
    case "openai-chat":
      return walkChat(endpoint, body, fn)
    case "openai-responses":
      return walkResponses(body, fn)
    case "anthropic":
      return walkAnthropic(body, fn)
    case "gemini":
      return walkGemini(body, fn)
    case "ollama":
      return walkOllama(endpoint, body, fn)
  }
}

/**
 * Calls `fn` on every text piece of a request body and answers the body with the results put
 * back (sharing everything unchanged; `body` is never mutated), or undefined when no text changed.
 * `endpoint` is the usage label (`chat.completions`, `completions`, `responses`, `messages`,
 * `generateContent`, `api.chat`, `api.generate`, ...): it tells legacy prompts from messages.
 */
export const mapSegments = (
  format: FormatId,
  endpoint: string,
  body: Body,
  fn: (text: string, segment: Segment) => string
): Record<string, unknown> | undefined => {
  const out = walk(format, endpoint, body, fn)
  return out === body ? undefined : (out as Record<string, unknown>)
}

/** The text pieces of a request body with their segments, in body order (the same walk as `mapSegments`). */
export const segmentsOf = (format: FormatId, endpoint: string, body: Body): Array<{ readonly text: string; readonly segment: Segment }> => {
  const out: Array<{ text: string; segment: Segment }> = []
  walk(format, endpoint, body, (text, segment) => {
    out.push({ text, segment })
    return text
  })
  return out
}
