import * as Schema from "effect/Schema"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Config, describe as rules, json, minifyJson } from "../src/services/context/engines/json.js"
import type { Segment } from "../src/services/context/types.js"
import { loadCorpus, noRaw, runCase } from "./support/compressionCorpus.js"

const PROSE: Segment = { role: "user", kind: "prose", turn: 0, turns: 2 }
const TOOL: Segment = { role: "tool", kind: "tool-result", turn: 1, turns: 3, toolName: "Read" }
const config = (c: unknown = {}) => Schema.decodeUnknownSync(Config)(c)
const run = (text: string, segment: Segment = TOOL, c: unknown = {}) =>
  json.apply(text, segment, config({ minChars: 0, ...(c as object) }), noRaw)

describe("json corpus", () => {
  const cases = loadCorpus("json", TOOL)
  it("has 4+ cases", () => expect(cases.length).toBeGreaterThanOrEqual(4))
  for (const c of cases) {
    it(c.name, () => {
      expect(c.expected, `${c.name}.expected.txt`).toBeDefined()
      const out = runCase(json, Config, c)
      expect(out).toBe(c.expected)
      expect(runCase(json, Config, { ...c, input: out })).toBe(out)
    })
  }
})

describe("json", () => {
  it("config: defaults, unknown field named", () => {
    expect(config()).toEqual({ toolResults: true, prose: false, fencedBlocks: true, minChars: 50 })
    expect(() => config({ fenced: true })).toThrow(/fenced/)
    expect(rules().map((r) => r.id)).toEqual(["whole-text", "fenced-block"])
  })
  it("minifies a tool result that is one JSON object or array, keeping number and string text exactly", () => {
    expect(run('{\n  "a": 1.0,\n  "b": [ 12345678901234567890, -0, 1E+2 ],\n  "c": "x  \\u00e9 \\/ y"\n}\n')).toBe(
      '{"a":1.0,"b":[12345678901234567890,-0,1E+2],"c":"x  \\u00e9 \\/ y"}'
    )
  })
  it("agrees with JSON.stringify(JSON.parse(x)) when no literal has another spelling", () => {
    const value = fc.jsonValue({ maxDepth: 3 }).filter((v) => typeof v === "object" && v !== null)
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 4 }), (v, indent) => {
        const pretty = JSON.stringify(v, null, indent)
        expect(run(pretty)).toBe(JSON.stringify(v))
        return true
      }),
      { seed: 5, numRuns: 300 }
    )
  })
  it("leaves invalid JSON, scalars and mixed text alone", () => {
    for (const t of ['{ "a": 1, }', '"just a string"', "42", 'result: { "a": 1 }', "[1, 2] and more"]) expect(run(t)).toBe(t)
  })
  it("prose only with prose: true; tool results only with toolResults", () => {
    const t = '{ "a" : 1 }'
    expect(run(t, PROSE)).toBe(t)
    expect(run(t, PROSE, { prose: true })).toBe('{"a":1}')
    expect(run(t, TOOL, { toolResults: false })).toBe(t)
  })
  it("minChars (default 50)", () => {
    const t = '{ "a" : 1 }'
    expect(json.apply(t, TOOL, config(), noRaw)).toBe(t)
    const long = `{ "key": "${"v".repeat(60)}" }`
    expect(json.apply(long, TOOL, config(), noRaw)).toBe(`{"key":"${"v".repeat(60)}"}`)
  })
  it("minifies ```json fenced blocks, keeping the fence, unless fencedBlocks is off", () => {
    const t = 'See:\n```json\n{\n  "a": [1, 2]\n}\n```\nand ```js\n{ "b" : 1 }\n```'
    expect(run(t, PROSE)).toBe('See:\n```json\n{"a":[1,2]}\n```\nand ```js\n{ "b" : 1 }\n```')
    expect(run(t, PROSE, { fencedBlocks: false })).toBe(t)
    expect(run(t.replace(/\n/g, "\r\n"), PROSE)).toBe('See:\r\n```json\r\n{"a":[1,2]}\r\n```\r\nand ```js\r\n{ "b" : 1 }\r\n```')
  })
  it("minifyJson never changes a string's content, whatever it holds", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: "binary" }), { maxLength: 5 }), (strings) => {
        const text = JSON.stringify(strings, null, 2)
        expect(JSON.parse(minifyJson(text))).toEqual(strings)
        return true
      }),
      { seed: 3, numRuns: 300 }
    )
  })
})
