import * as Effect from "effect/Effect"
import type { OwnRoutesShape } from "../../kernel/internalCall.js"
import type { Summarizer } from "./compression/summaries.js"

/**
 * How the summarize engine gets its summaries: a chat completion of the gateway's own, on
 * loopback with the process's internal credential, so routing, resilience, usage rows and cost
 * apply to it as to any request, on behalf of the API key whose conversation it summarises. The call
 * itself is never compressed and gets no memory (no summary of a summary). Bound once the server
 * listens (`Compression.ownRoutesLayer`).
 */
export const summarizeThrough =
  (own: OwnRoutesShape): Summarizer =>
  (model, prompt, maxTokens, owner) =>
    Effect.tryPromise({
      try: async (signal) => {
        const res = await own.fetch("/v1/chat/completions", {
          signal,
          // Charged to the key whose conversation it summarises (its budget and usage), like a batch line.
          onBehalfOf: owner ?? null,
          headers: { "x-gateway-compression": "off", "x-gateway-no-memory": "true" },
          body: { model, stream: false, max_tokens: maxTokens, messages: [{ role: "user", content: prompt }] }
        })
        const body = (await res.json().catch(() => undefined)) as
          | { choices?: Array<{ message?: { content?: unknown } }>; error?: { message?: string } }
          | undefined
        if (res.status !== 200) throw new Error(body?.error?.message ?? `status ${res.status}`)
        const text = body?.choices?.[0]?.message?.content
        if (typeof text !== "string") throw new Error("the answer has no text")
        return text
      },
      catch: (e) => (e as Error).message
    })
