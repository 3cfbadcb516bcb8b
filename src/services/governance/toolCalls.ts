/**
 * Tools in a request body, per inbound format (docs/guardrails.md, "Tool policy"): the tools it
 * declares, the one it forces (`tool_choice` and its equivalents), and the tool calls already in
 * its conversation with their arguments. Plain functions over the client's JSON, no decoding:
 * they run on the request path before routing.
 */
import type { FormatId } from "../../domain/canonical.js"

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)

/** A tool the request offers the model. */
export interface DeclaredTool {
  readonly name: string
}

/** A tool call already in the conversation (an assistant turn the client sends back). */
export interface ConversationCall {
  readonly name: string
  /** The arguments as JSON text. */
  readonly arguments: string
}

export interface RequestTools {
  readonly declared: ReadonlyArray<DeclaredTool>
  /** The tool the request forces, if it names one. */
  readonly forced: string | undefined
  /** The request requires some tool call (`required`, `any`, Gemini `ANY`) without naming one. */
  readonly required: boolean
  readonly calls: ReadonlyArray<ConversationCall>
}

const argsText = (v: unknown): string => (typeof v === "string" ? v : v === undefined ? "" : JSON.stringify(v))

/** The name of an OpenAI-style tool entry (`{type:"function", function:{name}}`), a Responses one (`{type:"function", name}`, or a built-in
 * tool by its type) or an Anthropic one (`{name}`). */
const toolName = (t: unknown): string | undefined => {
  if (!isObject(t)) return undefined
  if (isObject(t["function"])) return str(t["function"]["name"])
  return str(t["name"]) ?? str(t["type"])
}

const openAiCalls = (messages: unknown): Array<ConversationCall> => {
  const out: Array<ConversationCall> = []
  for (const m of arr(messages)) {
    if (!isObject(m)) continue
    for (const c of arr(m["tool_calls"])) {
      if (isObject(c) && isObject(c["function"])) {
        const name = str(c["function"]["name"])
        if (name) out.push({ name, arguments: argsText(c["function"]["arguments"]) })
      }
    }
    // The legacy single function call.
    if (isObject(m["function_call"])) {
      const name = str(m["function_call"]["name"])
      if (name) out.push({ name, arguments: argsText(m["function_call"]["arguments"]) })
    }
  }
  return out
}

/** What the request says about tools, in its own format. */
export const requestTools = (format: FormatId, body: Json): RequestTools => {
  switch (format) {
    case "openai-chat":
    case "ollama": {
      const declared = [...arr(body["tools"]).map(toolName), ...arr(body["functions"]).map(toolName)]
        .filter((n): n is string => n !== undefined)
        .map((name) => ({ name }))
      const choice = body["tool_choice"] ?? body["function_call"]
      const forced = isObject(choice) ? (isObject(choice["function"]) ? str(choice["function"]["name"]) : str(choice["name"])) : undefined
      return { declared, forced, required: choice === "required", calls: openAiCalls(body["messages"]) }
    }
    case "openai-responses": {
      const declared = arr(body["tools"])
        .map(toolName)
        .filter((n): n is string => n !== undefined)
        .map((name) => ({ name }))
      const choice = body["tool_choice"]
      const forced = isObject(choice)
        ? (str(choice["name"]) ?? (choice["type"] !== "function" ? str(choice["type"]) : undefined))
        : undefined
      const calls: Array<ConversationCall> = []
      for (const item of arr(body["input"])) {
        if (isObject(item) && (item["type"] === "function_call" || item["type"] === "custom_tool_call")) {
          const name = str(item["name"])
          if (name) calls.push({ name, arguments: argsText(item["arguments"] ?? item["input"]) })
        }
      }
      return { declared, forced, required: choice === "required", calls }
    }
    case "anthropic": {
      const declared = arr(body["tools"])
        .map(toolName)
        .filter((n): n is string => n !== undefined)
        .map((name) => ({ name }))
      const choice = body["tool_choice"]
      const forced = isObject(choice) && choice["type"] === "tool" ? str(choice["name"]) : undefined
      const calls: Array<ConversationCall> = []
      for (const m of arr(body["messages"])) {
        if (!isObject(m)) continue
        for (const block of arr(m["content"])) {
          if (isObject(block) && (block["type"] === "tool_use" || block["type"] === "server_tool_use")) {
            const name = str(block["name"])
            if (name) calls.push({ name, arguments: argsText(block["input"]) })
          }
        }
      }
      return { declared, forced, required: isObject(choice) && choice["type"] === "any", calls }
    }
    case "gemini": {
      const declared: Array<DeclaredTool> = []
      for (const t of arr(body["tools"])) {
        if (!isObject(t)) continue
        for (const d of [...arr(t["functionDeclarations"]), ...arr(t["function_declarations"])]) {
          const name = isObject(d) ? str(d["name"]) : undefined
          if (name) declared.push({ name })
        }
      }
      const config = isObject(body["toolConfig"]) ? body["toolConfig"] : isObject(body["tool_config"]) ? body["tool_config"] : undefined
      const calling =
        config &&
        (isObject(config["functionCallingConfig"])
          ? config["functionCallingConfig"]
          : isObject(config["function_calling_config"])
            ? config["function_calling_config"]
            : undefined)
      const mode = calling ? String(calling["mode"] ?? "").toUpperCase() : ""
      const allowed = calling
        ? arr(calling["allowedFunctionNames"] ?? calling["allowed_function_names"]).filter((n): n is string => typeof n === "string")
        : []
      const calls: Array<ConversationCall> = []
      for (const c of arr(body["contents"])) {
        if (!isObject(c)) continue
        for (const p of arr(c["parts"])) {
          const call = isObject(p)
            ? isObject(p["functionCall"])
              ? p["functionCall"]
              : isObject(p["function_call"])
                ? p["function_call"]
                : undefined
            : undefined
          const name = call ? str(call["name"]) : undefined
          if (call && name) calls.push({ name, arguments: argsText(call["args"]) })
        }
      }
      return { declared, forced: mode === "ANY" && allowed.length === 1 ? allowed[0] : undefined, required: mode === "ANY", calls }
    }
  }
}

/**
 * The body without the declared tools `remove` names. A request left with no tools loses its
 * tool choice too (upstreams refuse a tool choice without tools).
 */
export const withoutTools = (format: FormatId, body: Json, remove: (name: string) => boolean): Json => {
  const out: Json = { ...body }
  if (format === "gemini") {
    const tools: Array<unknown> = []
    for (const t of arr(body["tools"])) {
      if (!isObject(t)) {
        tools.push(t)
        continue
      }
      const key = Array.isArray(t["functionDeclarations"])
        ? "functionDeclarations"
        : Array.isArray(t["function_declarations"])
          ? "function_declarations"
          : undefined
      if (!key) {
        tools.push(t)
        continue
      }
      const kept = arr(t[key]).filter((d) => !(isObject(d) && typeof d["name"] === "string" && remove(d["name"])))
      if (kept.length > 0) tools.push({ ...t, [key]: kept })
      else if (Object.keys(t).length > 1) {
        const { [key]: _, ...rest } = t
        tools.push(rest)
      }
    }
    if (tools.length > 0) out["tools"] = tools
    else {
      delete out["tools"]
      delete out["toolConfig"]
      delete out["tool_config"]
    }
    return out
  }
  for (const key of ["tools", "functions"]) {
    if (!Array.isArray(body[key])) continue
    const kept = arr(body[key]).filter((t) => {
      const name = toolName(t)
      return name === undefined || !remove(name)
    })
    if (kept.length > 0) out[key] = kept
    else {
      delete out[key]
      delete out[key === "tools" ? "tool_choice" : "function_call"]
      if (key === "tools") delete out["parallel_tool_calls"]
    }
  }
  return out
}
