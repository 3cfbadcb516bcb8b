import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { cutOf, SummarizeConfig, withSummary } from "../src/services/context/summarize.js"

/**
 * The summarize engine's corpus (test/fixtures/compression/summarize): each case a body in its
 * wire format and settings; expected, the transcript the model is asked to summarise and the body
 * with the older part replaced by the summary ("SUMMARY"), or null when the conversation stays
 * whole. Checked by eye: leading system entries stay, the cut moves in steps of keepLastTurns and
 * lands before a user's own turn (never between a tool call and its result).
 */
const dir = path.resolve("test/fixtures/compression/summarize")
const cases = fs
  .readdirSync(dir)
  .filter((n) => n.endsWith(".input.json"))
  .map((n) => n.replace(".input.json", ""))

describe("summarize corpus", () => {
  it("has cases in every format with a message list", () => {
    const formats = new Set(cases.map((c) => JSON.parse(fs.readFileSync(path.join(dir, `${c}.input.json`), "utf8")).format))
    expect(formats).toEqual(new Set(["openai-chat", "anthropic", "openai-responses", "gemini"]))
  })
  for (const name of cases) {
    it(name, () => {
      const c = JSON.parse(fs.readFileSync(path.join(dir, `${name}.input.json`), "utf8"))
      const expected = JSON.parse(fs.readFileSync(path.join(dir, `${name}.expected.json`), "utf8"))
      const config = Schema.decodeUnknownSync(SummarizeConfig)(c.config)
      const cut = cutOf(c.format, c.endpoint, c.body, config)
      expect(cut ? { transcript: cut.transcript, body: withSummary(c.format, c.body, cut, "SUMMARY") } : null).toEqual(expected)
    })
  }
})

describe("the cut", () => {
  const chat = (n: number) => ({
    model: "m",
    messages: Array.from({ length: n }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `t${i}` }))
  })
  const config = Schema.decodeUnknownSync(SummarizeConfig)({ minTurns: 6, keepLastTurns: 4 })
  it("moves in steps: every conversation length between two steps has the same older part", () => {
    const at = (n: number) => cutOf("openai-chat", "chat.completions", chat(n), config)?.transcript
    expect(at(9)).toBe(at(10))
    expect(at(10)).toBe(at(11))
    expect(at(12)).not.toBe(at(11))
    expect(at(5)).toBeUndefined()
  })
  it("the input is never changed", () => {
    const body = Object.freeze(chat(12))
    const cut = cutOf("openai-chat", "chat.completions", body, config)!
    expect(withSummary("openai-chat", body, cut, "S").messages).toHaveLength(12 - cut.end + 2)
    expect(body.messages).toHaveLength(12)
  })
  it("settings are strict, with ranges", () => {
    expect(() => Schema.decodeUnknownSync(SummarizeConfig)({ keepLastTurns: 1 })).toThrow()
    expect(() => Schema.decodeUnknownSync(SummarizeConfig, { onExcessProperty: "error" })({ modle: "x" })).toThrow(/modle/)
  })
})
