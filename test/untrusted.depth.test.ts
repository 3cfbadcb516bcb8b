import { describe, expect, it } from "vitest"
import { jsonTooDeep, MAX_JSON_DEPTH } from "../src/kernel/untrusted.js"

const nested = (depth: number, open = "[", close = "]") => `${open.repeat(depth)}${close.repeat(depth)}`

describe("jsonTooDeep", () => {
  it("judges the nesting, not the number of brackets", () => {
    expect(jsonTooDeep(nested(MAX_JSON_DEPTH))).toBe(false)
    expect(jsonTooDeep(nested(MAX_JSON_DEPTH + 1))).toBe(true)
    expect(jsonTooDeep(`{"a":${nested(MAX_JSON_DEPTH, '{"b":', "}").replace(/:}/g, ":1}")}}`)).toBe(true)
    // Many brackets side by side, or in strings: shallow.
    expect(jsonTooDeep(`[${Array.from({ length: 500 }, () => "{}").join(",")}]`)).toBe(false)
    expect(jsonTooDeep(JSON.stringify({ text: "[{".repeat(500) }))).toBe(false)
    // A quote escaped in a string does not end it.
    expect(jsonTooDeep(JSON.stringify({ text: `\\"${"[".repeat(500)}` }))).toBe(false)
  })

  it("reads an ordinary request or answer as shallow", () => {
    const body = { model: "m", messages: [{ role: "user", content: "hi [there] {you}" }], max_tokens: 5 }
    expect(jsonTooDeep(JSON.stringify(body))).toBe(false)
    expect(jsonTooDeep(JSON.stringify({ ...body, padding: "x".repeat(1000) }))).toBe(false)
  })
})
