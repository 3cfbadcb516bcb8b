import * as Schema from "effect/Schema"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Config, describe as rules, whitespace } from "../src/services/context/engines/whitespace.js"
import type { Segment } from "../src/services/context/types.js"
import { loadCorpus, noRaw, runCase } from "./support/compressionCorpus.js"

const PROSE: Segment = { role: "user", kind: "prose", turn: 0, turns: 2 }
const TOOL: Segment = { role: "tool", kind: "tool-result", turn: 1, turns: 3, toolName: "Bash", command: "ls -la" }
const config = (c: unknown = {}) => Schema.decodeUnknownSync(Config)(c)
const run = (text: string, segment: Segment = PROSE, c: unknown = {}) => whitespace.apply(text, segment, config(c), noRaw)

describe("whitespace corpus", () => {
  const cases = loadCorpus("whitespace", PROSE)
  it("has 4+ cases", () => expect(cases.length).toBeGreaterThanOrEqual(4))
  for (const c of cases) {
    it(c.name, () => {
      expect(c.expected, `${c.name}.expected.txt`).toBeDefined()
      const out = runCase(whitespace, Config, c)
      expect(out).toBe(c.expected)
      expect(runCase(whitespace, Config, { ...c, input: out })).toBe(out)
    })
  }
})

describe("whitespace", () => {
  it("config: defaults, unknown field named", () => {
    expect(config()).toEqual({ prose: true, toolResults: true })
    expect(() => config({ toolResult: false })).toThrow(/toolResult/)
    expect(rules().map((r) => r.id)).toEqual(["trailing", "blank-runs", "inner-runs"])
  })
  it("prose: trailing removed, inner runs squeezed, indentation kept, 3+ blank lines become one, 2 stay", () => {
    expect(run("  a  b\t\tc   \n\n\n\nd\n\n\ne\n\nf")).toBe("  a b c\n\nd\n\n\ne\n\nf")
  })
  it("prose: nothing inside a fenced code block changes, even unclosed", () => {
    const code = "```py\nx  =  1   \n\n\n\n\ty = 2\n```"
    expect(run(`a  b\n${code}\nc  d`)).toBe(`a b\n${code}\nc d`)
    expect(run("a  b\n~~~\nx  =  1   \n\n\n\n")).toBe("a b\n~~~\nx  =  1   \n\n\n\n")
  })
  it("tool results: inner alignment kept, trailing and blank runs removed", () => {
    expect(run("a    1   \nbb   22\t\n\n\n\n  cc   333", TOOL)).toBe("a    1\nbb   22\n\n  cc   333")
  })
  it("tool results: code fences are not special (trailing whitespace goes everywhere)", () => {
    expect(run("```\nx  =  1   \n```", TOOL)).toBe("```\nx  =  1\n```")
  })
  it("CRLF line endings stay CRLF", () => {
    expect(run("a  \r\n\r\n\r\n\r\nb\r\n", TOOL)).toBe("a\r\n\r\nb\r\n")
  })
  it("config switches", () => {
    expect(run("a   \n", PROSE, { prose: false })).toBe("a   \n")
    expect(run("a   \n", TOOL, { toolResults: false })).toBe("a   \n")
    expect(run("a   \n", TOOL, { prose: false })).toBe("a\n")
  })
  it("answers the same string when nothing changes", () => {
    const t = "already\n\nclean"
    expect(run(t)).toBe(t)
  })
  it("invariants: non-whitespace characters and their order kept, leading indentation kept, idempotent", () => {
    const line = fc
      .tuple(
        fc.constantFrom("", "  ", "\t", "    "),
        fc.array(fc.constantFrom("a", "b", " ", "  ", "\t", "```", "~~~", "é"), { maxLength: 8 })
      )
      .map(([i, w]) => i + w.join(""))
    const text = fc.array(line, { maxLength: 12 }).map((l) => l.join("\n"))
    fc.assert(
      fc.property(text, fc.constantFrom(PROSE, TOOL), (t, segment) => {
        const out = run(t, segment)
        expect(out.replace(/\s/g, "")).toBe(t.replace(/\s/g, ""))
        expect(run(out, segment)).toBe(out)
        if (segment.kind === "tool-result") {
          const indents = (s: string) =>
            s
              .split("\n")
              .filter((l) => l.trim() !== "")
              .map((l) => /^[ \t]*/.exec(l)![0])
          expect(indents(out)).toEqual(indents(t))
        }
        return true
      }),
      { seed: 7, numRuns: 400 }
    )
  })
})
