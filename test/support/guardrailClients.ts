/**
 * The guardrail tests' clients: one request builder and one answer reader per inbound format
 * (whole and streamed, each format's wire shape), so every test runs in every format.
 */
import type { Family } from "./fakeUpstream.js"

export type ClientFormat = Family | "completions"

export const CONNECTIONS: ReadonlyArray<{ family: Family; connection: Record<string, unknown> }> = [
  { family: "openai-chat", connection: { provider: "openai-compatible", name: "up-chat" } },
  { family: "openai-responses", connection: { provider: "openai-compatible", name: "up-resp", upstreamFormat: "openai-responses" } },
  { family: "anthropic", connection: { provider: "anthropic", name: "up-anth", apiKey: "sk-ant-upstream" } },
  { family: "gemini", connection: { provider: "gemini", name: "up-gem", apiKey: "gemini-upstream-key" } },
  { family: "ollama", connection: { provider: "ollama", name: "up-oll" } }
]

/** The connection speaking the client's own format (same-format pass-through). */
export const SAME: Record<ClientFormat, string> = {
  "openai-chat": "up-chat/m1",
  "openai-responses": "up-resp/m1",
  anthropic: "up-anth/m1",
  gemini: "up-gem/m1",
  ollama: "up-oll/m1",
  completions: "up-chat/m1"
}

export const FORMATS: ReadonlyArray<ClientFormat> = ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama", "completions"]

/** Path and body of a request with `user` as the user's text and `system` as system text. */
export const requestFor = (
  format: ClientFormat,
  model: string,
  user: string,
  stream: boolean,
  system?: string
): { path: string; body: Record<string, unknown> } => {
  switch (format) {
    case "openai-chat":
      return {
        path: "/v1/chat/completions",
        body: { model, stream, messages: [...(system ? [{ role: "system", content: system }] : []), { role: "user", content: user }] }
      }
    case "completions":
      return { path: "/v1/completions", body: { model, stream, prompt: user } }
    case "openai-responses":
      return {
        path: "/v1/responses",
        body: {
          model,
          stream,
          ...(system ? { instructions: system } : {}),
          input: [{ role: "user", content: [{ type: "input_text", text: user }] }]
        }
      }
    case "anthropic":
      return {
        path: "/v1/messages",
        body: { model, stream, max_tokens: 256, ...(system ? { system } : {}), messages: [{ role: "user", content: user }] }
      }
    case "gemini":
      return {
        path: `/v1beta/models/${model}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`,
        body: {
          ...(system ? { systemInstruction: { parts: [{ text: system }] } } : {}),
          contents: [{ role: "user", parts: [{ text: user }] }]
        }
      }
    case "ollama":
      return {
        path: "/api/chat",
        body: { model, stream, messages: [...(system ? [{ role: "system", content: system }] : []), { role: "user", content: user }] }
      }
  }
}

/** A request whose last turn is a tool result carrying `result`. */
export const toolResultRequest = (format: Family, model: string, result: string): { path: string; body: Record<string, unknown> } => {
  switch (format) {
    case "openai-chat":
      return {
        path: "/v1/chat/completions",
        body: {
          model,
          messages: [
            { role: "user", content: "read the page" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_1", type: "function", function: { name: "fetch", arguments: '{"url":"https://example.org"}' } }]
            },
            { role: "tool", tool_call_id: "call_1", content: result }
          ],
          tools: [
            { type: "function", function: { name: "fetch", parameters: { type: "object", properties: { url: { type: "string" } } } } }
          ]
        }
      }
    case "openai-responses":
      return {
        path: "/v1/responses",
        body: {
          model,
          input: [
            { role: "user", content: "read the page" },
            { type: "function_call", call_id: "call_1", name: "fetch", arguments: '{"url":"https://example.org"}' },
            { type: "function_call_output", call_id: "call_1", output: result }
          ],
          tools: [{ type: "function", name: "fetch", parameters: { type: "object", properties: { url: { type: "string" } } } }]
        }
      }
    case "anthropic":
      return {
        path: "/v1/messages",
        body: {
          model,
          max_tokens: 256,
          messages: [
            { role: "user", content: "read the page" },
            { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "fetch", input: { url: "https://example.org" } }] },
            { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: result }] }
          ],
          tools: [{ name: "fetch", input_schema: { type: "object", properties: { url: { type: "string" } } } }]
        }
      }
    case "gemini":
      return {
        path: `/v1beta/models/${model}:generateContent`,
        body: {
          contents: [
            { role: "user", parts: [{ text: "read the page" }] },
            { role: "model", parts: [{ functionCall: { name: "fetch", args: { url: "https://example.org" } } }] },
            { role: "user", parts: [{ functionResponse: { name: "fetch", response: { content: result } } }] }
          ],
          tools: [{ functionDeclarations: [{ name: "fetch", parameters: { type: "object", properties: { url: { type: "string" } } } }] }]
        }
      }
    case "ollama":
      return {
        path: "/api/chat",
        body: {
          model,
          stream: false,
          messages: [
            { role: "user", content: "read the page" },
            { role: "assistant", content: "", tool_calls: [{ function: { name: "fetch", arguments: { url: "https://example.org" } } }] },
            { role: "tool", content: result }
          ],
          tools: [
            { type: "function", function: { name: "fetch", parameters: { type: "object", properties: { url: { type: "string" } } } } }
          ]
        }
      }
  }
}

const events = (text: string): Array<{ event: string | undefined; data: any }> =>
  text
    .split(/\n\n/)
    .map((block) => {
      let event: string | undefined
      const data: Array<string> = []
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim()
        else if (line.startsWith("data:")) data.push(line.slice(5).trim())
      }
      const joined = data.join("\n")
      if (!joined.startsWith("{")) return undefined
      return { event, data: JSON.parse(joined) }
    })
    .filter((e): e is { event: string | undefined; data: any } => e !== undefined)

/** The assistant text the client got (whole answer or stream), as an SDK would assemble it. */
export const answerText = (format: ClientFormat, text: string, stream: boolean): string => {
  if (!stream) {
    const b = JSON.parse(text)
    switch (format) {
      case "openai-chat":
        return b.choices[0].message.content ?? ""
      case "completions":
        return b.choices[0].text
      case "openai-responses":
        return b.output.flatMap((o: any) => (o.type === "message" ? o.content.map((c: any) => c.text ?? "") : [])).join("")
      case "anthropic":
        return b.content.flatMap((c: any) => (c.type === "text" ? [c.text] : [])).join("")
      case "gemini":
        return b.candidates[0].content.parts.map((p: any) => p.text ?? "").join("")
      case "ollama":
        return b.message.content
    }
  }
  switch (format) {
    case "openai-chat":
      return events(text)
        .map((e) => e.data.choices?.[0]?.delta?.content ?? "")
        .join("")
    case "completions":
      return events(text)
        .map((e) => e.data.choices?.[0]?.text ?? "")
        .join("")
    case "openai-responses":
      return events(text)
        .map((e) => (e.data.type === "response.output_text.delta" ? e.data.delta : ""))
        .join("")
    case "anthropic":
      return events(text)
        .map((e) => (e.data.type === "content_block_delta" && e.data.delta.type === "text_delta" ? e.data.delta.text : ""))
        .join("")
    case "gemini":
      return events(text)
        .map((e) => (e.data.candidates?.[0]?.content?.parts ?? []).map((p: any) => p.text ?? "").join(""))
        .join("")
    case "ollama":
      return text
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l).message?.content ?? "")
        .join("")
  }
}

/** Responses streams repeat the whole text in done and completed events: what they say. */
export const responsesDoneText = (text: string): string =>
  events(text).find((e) => e.data.type === "response.output_text.done")?.data.text ?? ""

/** Whether the stream carried the format's error event, and its message. */
export const streamError = (format: ClientFormat, text: string): string | undefined => {
  if (format === "ollama") {
    for (const l of text.split("\n")) if (l.trim() && JSON.parse(l).error) return String(JSON.parse(l).error)
    return undefined
  }
  for (const e of events(text)) {
    const err = e.data.error ?? (e.data.type === "response.failed" ? e.data.response?.error : undefined)
    if (err) return typeof err === "string" ? err : String(err.message ?? JSON.stringify(err))
  }
  return undefined
}

/** The message of a whole error answer in any format. */
export const errorMessage = (body: any): string => String(body?.error?.message ?? body?.error ?? body?.message ?? JSON.stringify(body))
