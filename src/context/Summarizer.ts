import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { INTERNAL_HEADER, InternalCalls, ON_BEHALF_HEADER } from "../batches/Batches.js"
import { GatewayServer } from "../http/Server.js"
import { Compression } from "./Compression.js"

/**
 * How the summarize engine gets its summaries: a chat completion of the gateway's own, on
 * loopback with the process's internal credential, so routing, resilience, usage rows and cost
 * apply to it as to any request, on behalf of the API key whose conversation it summarises. The call
 * itself is never compressed and gets no memory (no summary of a summary).
 */
export const SummarizerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const compression = yield* Compression
    const internal = yield* InternalCalls
    const server = yield* GatewayServer
    const host = server.host === "0.0.0.0" || server.host === "::" || server.host === "" ? "127.0.0.1" : server.host.includes(":") ? `[${server.host}]` : server.host
    const url = `http://${host}:${server.port}/v1/chat/completions`
    compression.setSummarizer((model, prompt, maxTokens, owner) =>
      Effect.tryPromise({
        try: async (signal) => {
          const res = await fetch(url, {
            method: "POST",
            signal,
            headers: {
              "content-type": "application/json",
              [INTERNAL_HEADER]: internal.secret,
              // Charged to the key whose conversation it summarises (its budget and usage), like a batch line.
              ...(owner ? { [ON_BEHALF_HEADER]: owner } : {}),
              "x-gateway-compression": "off",
              "x-gateway-no-memory": "true"
            },
            body: JSON.stringify({ model, stream: false, max_tokens: maxTokens, messages: [{ role: "user", content: prompt }] })
          })
          const body = (await res.json().catch(() => undefined)) as { choices?: Array<{ message?: { content?: unknown } }>; error?: { message?: string } } | undefined
          if (res.status !== 200) throw new Error(body?.error?.message ?? `status ${res.status}`)
          const text = body?.choices?.[0]?.message?.content
          if (typeof text !== "string") throw new Error("the answer has no text")
          return text
        },
        catch: (e) => (e as Error).message
      })
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => compression.setSummarizer(undefined)))
  })
)
