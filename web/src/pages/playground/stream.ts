// The playground's calls to the gateway's inference routes (same origin), and what it measures
// of a streamed chat answer: time to first token, tokens per second, token counts (reported by
// the gateway when it can, else estimated) and a cost estimate from the gateway's own prices.

import { readSse } from "../../sse"

export type Params = {
  temperature?: number
  max_tokens?: number
  top_p?: number
  presence_penalty?: number
  frequency_penalty?: number
  seed?: number
  stop?: string | string[]
}

export interface ToolCall {
  name: string
  arguments: string
}

export interface ChatRun {
  model: string
  text: string
  reasoning: string
  toolCalls: ToolCall[]
  /** ms from sending to the first content. */
  ttftMs: number | null
  durationMs: number | null
  promptTokens: number | null
  completionTokens: number | null
  /** Counts from the answer's usage (true) or estimated from the text (false). */
  reported: boolean
  /** The model that answered (the answer's `model`). */
  servedModel: string | null
  error: string | null
  done: boolean
}

export const emptyRun = (model: string): ChatRun => ({
  model,
  text: "",
  reasoning: "",
  toolCalls: [],
  ttftMs: null,
  durationMs: null,
  promptTokens: null,
  completionTokens: null,
  reported: false,
  servedModel: null,
  error: null,
  done: false
})

export const authHeaders = (key: string): Record<string, string> => (key.trim() ? { authorization: `Bearer ${key.trim()}` } : {})

/** The error message of an inference answer in any of the gateway's formats. */
export const errorOf = async (res: Response): Promise<string> => {
  const text = await res.text()
  try {
    const body = JSON.parse(text) as { error?: { message?: string } | string; message?: string }
    const m = typeof body.error === "string" ? body.error : (body.error?.message ?? body.message)
    if (m) return `${res.status}: ${m}`
  } catch {
    // not JSON
  }
  return `${res.status}: ${text.slice(0, 300) || res.statusText}`
}

/**
 * Streams a chat completion, calling `update` with the run as it grows; resolves when it ends.
 * A failure (an error status, an error event, a cut connection) ends the run with `error`.
 */
export const streamChat = async (
  body: Record<string, unknown>,
  key: string,
  update: (run: ChatRun) => void,
  signal?: AbortSignal
): Promise<ChatRun> => {
  const run = emptyRun(String(body["model"]))
  const started = performance.now()
  const emit = () => update({ ...run, toolCalls: run.toolCalls.map((t) => ({ ...t })) })
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", ...authHeaders(key) },
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      signal
    })
    if (!res.ok || !res.body) {
      run.error = await errorOf(res)
      run.done = true
      emit()
      return run
    }
    await readSse(res.body, (_event, raw) => {
      const data = raw.trim()
      if (data === "[DONE]") return emit()
      let chunk: any
      try {
        chunk = JSON.parse(data)
      } catch {
        return emit()
      }
      if (chunk.error) {
        run.error = chunk.error.message ?? String(chunk.error)
        return emit()
      }
      if (chunk.model) run.servedModel = chunk.model
      if (chunk.usage) {
        run.promptTokens = chunk.usage.prompt_tokens ?? null
        run.completionTokens = chunk.usage.completion_tokens ?? null
        run.reported = true
      }
      const delta = chunk.choices?.[0]?.delta
      if (!delta) return emit()
      const piece = (delta.content ?? "") + (delta.reasoning_content ?? delta.reasoning ?? "")
      if (piece && run.ttftMs === null) run.ttftMs = performance.now() - started
      if (delta.content) run.text += delta.content
      if (delta.reasoning_content || delta.reasoning) run.reasoning += delta.reasoning_content ?? delta.reasoning
      for (const tc of delta.tool_calls ?? []) {
        const i = tc.index ?? 0
        run.toolCalls[i] ??= { name: "", arguments: "" }
        if (tc.function?.name) run.toolCalls[i]!.name += tc.function.name
        if (tc.function?.arguments) run.toolCalls[i]!.arguments += tc.function.arguments
        if (run.ttftMs === null) run.ttftMs = performance.now() - started
      }
      emit()
    })
  } catch (e) {
    run.error = (e as Error).name === "AbortError" ? "stopped" : `the connection failed: ${(e as Error).message}`
  }
  run.durationMs = performance.now() - started
  if (!run.reported) {
    // No usage in the stream: estimated at about four characters a token.
    run.completionTokens = Math.ceil((run.text.length + run.reasoning.length) / 4)
  }
  run.done = true
  emit()
  return run
}

/** Tokens per second of the generation (after the first token). */
export const tokensPerSecond = (r: ChatRun): number | null =>
  r.completionTokens !== null && r.durationMs !== null && r.ttftMs !== null && r.durationMs > r.ttftMs
    ? (r.completionTokens * 1000) / (r.durationMs - r.ttftMs)
    : null

export interface Price {
  provider: string
  model: string
  input: number
  output: number
}

/** The estimated cost: the served model's price from the gateway's price list (USD per million tokens). */
export const estimateCost = (r: ChatRun, prices: ReadonlyArray<Price>): number | null => {
  const id = r.servedModel ?? r.model
  const bare = id.includes("/") ? id.slice(id.lastIndexOf("/") + 1) : id
  const price = prices.find((p) => p.model === id || p.model === bare || `${p.provider}/${p.model}` === id)
  if (!price || r.completionTokens === null) return null
  return ((r.promptTokens ?? 0) * price.input + r.completionTokens * price.output) / 1_000_000
}
