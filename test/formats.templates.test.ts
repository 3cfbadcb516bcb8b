import { describe, expect, it } from "vitest"
import { AnthropicStreamEncoder } from "../src/upstream/formats/anthropic-stream-encoder.js"
import { ChatStreamEncoder } from "../src/upstream/formats/openai-chat-stream-encoder.js"

/**
 * The most frequent events of a translated stream are written from templates
 * (src/upstream/formats/*-answers.ts): byte for byte what the JSON of their objects is, for any
 * text (quotes, backslashes, control characters, non-ASCII, emoji, a lone surrogate).
 */
const TEXTS = [
  "hello",
  'say "hi"',
  "back\\slash",
  "line\nbreak\ttab\u0000nul\u001f",
  "héllo wörld ✓",
  "emoji 🎉 and 中文",
  "lone \ud800 surrogate",
  "</script>",
  " "
]

describe("template-written events", () => {
  it("a chat chunk's text delta: the bytes of its object's JSON, before and after the stream's start", () => {
    for (const text of TEXTS) {
      const enc = new ChatStreamEncoder("m-1", false)
      enc.push({ type: "start", id: "abc", model: "m-1", created: 1_700_000_000 })
      const out = enc.push({ type: "text_delta", index: 0, text })
      const expected = `data: ${JSON.stringify({
        id: "chatcmpl-abc",
        object: "chat.completion.chunk",
        created: 1_700_000_000,
        model: "m-1",
        choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }]
      })}\n\n`
      expect(out, JSON.stringify(text)).toBe(expected)
      // And a client reads the text back (a lone surrogate as JSON keeps it, escaped).
      expect(JSON.parse(out.slice(6)).choices[0].delta.content).toBe(JSON.parse(JSON.stringify(text)))
    }
  })

  it("an Anthropic content_block_delta: the bytes of its object's JSON", () => {
    for (const text of TEXTS) {
      const enc = new AnthropicStreamEncoder("m-1")
      enc.push({ type: "start", id: "msg_1", model: "m-1", created: 1 })
      enc.push({ type: "block_start", index: 0, block: { type: "text" } })
      const out = enc.push({ type: "text_delta", index: 0, text })
      expect(out, JSON.stringify(text)).toBe(
        `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })}\n\n`
      )
    }
  })
})
