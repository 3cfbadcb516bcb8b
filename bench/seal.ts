/**
 * What the reasoning-state seal (docs/reasoning-state.md) costs on the request path, measured
 * alone: per passed-through frame (one regular expression on frames without reasoning state),
 * per translated frame's events, and per same-format request body (its reasoning fields
 * walked). `JSON.parse` of the same chunk is measured in the same run, as the scale.
 *
 *   npx vite-node bench/seal.ts            (N=200000 to change the iterations)
 */
import type { StreamEvent } from "../src/domain/canonical.js"
import { bindBody, seal, sealEvents, sealFrameData } from "../src/upstream/formats/signatures.js"

const N = Number(process.env["N"] ?? 200_000)

const chatChunk = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion.chunk",
  created: 1_764_000_000,
  model: "json-1k",
  choices: [{ index: 0, delta: { content: "The quick brown fox jumps over the lazy dog again. " }, finish_reason: null }]
})
const anthropicDelta = JSON.stringify({
  type: "content_block_delta",
  index: 0,
  delta: { type: "text_delta", text: "The quick brown fox jumps over the lazy dog again. " }
})
const anthropicSignature = JSON.stringify({
  type: "content_block_delta",
  index: 0,
  delta: { type: "signature_delta", signature: "EqQBCgIYAhIM".repeat(20) }
})
const events: ReadonlyArray<StreamEvent> = [{ type: "text_delta", index: 0, text: "The quick brown fox jumps over the lazy dog again. " }]

/** A coding agent's body: 40 turns, thinking blocks sealed by this connection. */
const turns = Array.from({ length: 40 }, (_, i) =>
  i % 2 === 0
    ? { role: "user", content: [{ type: "text", text: `step ${i}: ${"context ".repeat(200)}` }] }
    : {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "plan the step", signature: seal("conn_a", `sig-${i}`) },
          { type: "tool_use", id: `toolu_${i}`, name: "read_file", input: { path: `f${i}.ts` } }
        ]
      }
)
const sealedBody = { model: "claude-x", max_tokens: 4096, thinking: { type: "enabled", budget_tokens: 2048 }, messages: turns }
const plainBody = {
  ...sealedBody,
  messages: turns.map((m) => (m.role === "assistant" ? { ...m, content: m.content.filter((c) => c.type !== "thinking") } : m))
}
/** The same conversation without thinking asked: the common case. */
const noThinkingBody = { model: "claude-x", max_tokens: 4096, messages: plainBody.messages }

const time = (label: string, f: () => unknown, n = N): number => {
  for (let i = 0; i < Math.min(n, 20_000); i++) f()
  const t0 = process.hrtime.bigint()
  let sink = 0
  for (let i = 0; i < n; i++) sink += f() === undefined ? 0 : 1
  const ns = Number(process.hrtime.bigint() - t0) / n
  console.log(`${label.padEnd(72)} ${(ns / 1000).toFixed(3)} µs${sink < 0 ? "" : ""}`)
  return ns
}

console.log(`node ${process.version}, ${N} iterations each (request bodies: ${N / 100})`)
time("JSON.parse of the chat chunk (the scale)", () => JSON.parse(chatChunk))
time("sealFrameData, chat chunk (no marker: one regex test)", () => sealFrameData("openai-chat", chatChunk, "conn_a"))
time("sealFrameData, Anthropic text delta (one regex test)", () => sealFrameData("anthropic", anthropicDelta, "conn_a"))
time("sealFrameData, Anthropic signature delta (parsed, sealed, re-serialized)", () =>
  sealFrameData("anthropic", anthropicSignature, "conn_a")
)
time("sealEvents, a translated frame's text event", () => sealEvents(events, "conn_a"))
time(
  "bindBody, 40-turn Anthropic body without sealed state, thinking not asked",
  () => bindBody("anthropic", noThinkingBody, "conn_a"),
  N / 100
)
time(
  "bindBody, 40-turn body, thinking on, tool turns without thinking (turned off, copied)",
  () => bindBody("anthropic", plainBody, "conn_a"),
  N / 100
)
time(
  "bindBody, 40-turn Anthropic body with 20 sealed signatures (opened, copied)",
  () => bindBody("anthropic", sealedBody, "conn_a"),
  N / 100
)
