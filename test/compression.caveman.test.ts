import * as Schema from "effect/Schema"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { caveman, Config, describe as rules, LANGUAGE_PACKS } from "../src/services/context/engines/caveman.js"
import type { Segment } from "../src/services/context/types.js"
import { loadCorpus, noRaw, runCase } from "./support/compressionCorpus.js"

const USER: Segment = { role: "user", kind: "prose", turn: 0, turns: 2 }
const config = (c: unknown = {}) => Schema.decodeUnknownSync(Config)(c)
const run = (text: string, c: unknown = {}, segment: Segment = USER) =>
  caveman.apply(text, segment, config({ minChars: 0, ...(c as object) }), noRaw)

describe("caveman corpus", () => {
  const cases = loadCorpus("caveman", USER)
  it("has the cases (6+, 2 non-English)", () => {
    expect(cases.length).toBeGreaterThanOrEqual(6)
    expect(cases.filter((c) => (c.config as { language?: string }).language !== undefined).length).toBeGreaterThanOrEqual(2)
  })
  for (const c of cases) {
    it(c.name, () => {
      expect(c.expected, `${c.name}.expected.txt`).toBeDefined()
      const out = runCase(caveman, Config, c)
      expect(out).toBe(c.expected)
      // Every case saves something and is a fixed point.
      expect(out.length).toBeLessThan(c.input.length)
      expect(runCase(caveman, Config, { ...c, input: out })).toBe(out)
    })
  }
})

describe("caveman config", () => {
  it("decodes {} to the defaults", () => {
    expect(config()).toEqual({ language: "en", level: "full", roles: ["user", "system"], minChars: 200, preserveLastTurn: true })
  })
  it("rejects an unknown field, naming it, and an unknown language", () => {
    expect(() => config({ lang: "es" })).toThrow(/lang/)
    expect(() => config({ language: "xx" })).toThrow(/language/)
    expect(() => config({ level: "max" })).toThrow(/level/)
  })
  it("lists the language packs with their rule counts, matching the rules listing", () => {
    expect(LANGUAGE_PACKS.map((p) => p.id)).toEqual(["en", "es", "de"])
    const listed = rules()
    for (const p of LANGUAGE_PACKS) {
      expect(p.rules).toBeGreaterThan(20)
      // Each pack's own rules plus the shared repetition rule.
      expect(listed.filter((r) => r.id.startsWith(`${p.id}.`)).length + 1).toBe(p.rules)
    }
    expect(new Set(listed.map((r) => r.id)).size).toBe(listed.length)
    expect(listed.every((r) => r.engine === "caveman" && r.description.length > 0)).toBe(true)
  })
})

describe("caveman segments", () => {
  const text = "Could you please just check the logs of the build? I think the cache is basically broken. ".repeat(3)
  it("never applies to tool results", () => {
    expect(caveman.applies({ role: "tool", kind: "tool-result", turn: 0, turns: 2 })).toBe(false)
    expect(caveman.applies({ role: "user", kind: "tool-result", turn: 0, turns: 2 })).toBe(false)
    expect(caveman.applies(USER)).toBe(true)
  })
  it("rewrites only the configured roles", () => {
    expect(run(text)).not.toBe(text)
    expect(run(text, {}, { ...USER, role: "assistant" })).toBe(text)
    expect(run(text, { roles: ["assistant"] }, { ...USER, role: "assistant" })).not.toBe(text)
    expect(run(text, { roles: ["assistant"] })).toBe(text)
  })
  it("leaves the last turn as written unless preserveLastTurn is off", () => {
    const last: Segment = { ...USER, turn: 3, turns: 4 }
    expect(run(text, {}, last)).toBe(text)
    expect(run(text, { preserveLastTurn: false }, last)).not.toBe(text)
  })
  it("rewrites a system prompt also when it counts as the last turn (a one-message conversation's Anthropic system, Gemini systemInstruction)", () => {
    const system: Segment = { role: "system", kind: "prose", turn: 0, turns: 1 }
    const first = run(text, {}, system)
    expect(first).not.toBe(text)
    // The same on the conversation's next request, so the prefix (and the upstream prompt cache) holds.
    expect(run(text, {}, { ...system, turns: 3 })).toBe(first)
  })
  it("skips texts shorter than minChars (default 200)", () => {
    const short = "Please just check the logs."
    expect(caveman.apply(short, USER, config(), noRaw)).toBe(short)
    expect(caveman.apply(text, USER, config(), noRaw)).not.toBe(text)
    expect(run(short)).toBe("Check logs.")
  })
})

describe("caveman rules", () => {
  it("levels: lite drops politeness and filler only, full adds articles and hedges, ultra adds connectives", () => {
    const t = "Please just fix the parser. I think the bug is in the lexer. However, the tests pass."
    expect(run(t, { level: "lite" })).toBe("Fix the parser. I think the bug is in the lexer. However, the tests pass.")
    expect(run(t, { level: "full" })).toBe("Fix parser. Bug is in lexer. However, tests pass.")
    expect(run(t, { level: "ultra" })).toBe("Fix parser. Bug is in lexer. Tests pass.")
  })
  it("replaces wordy phrases with short ones", () => {
    expect(run("We retry in order to hide the blips, due to the fact that the network is flaky.")).toBe(
      "We retry to hide blips, because network is flaky."
    )
  })
  it("fixes the case of the sentence start, but never of an identifier", () => {
    expect(run("The parser fails.")).toBe("Parser fails.")
    expect(run("The fooBar helper fails. The parse_args helper too. The x.y module.")).toBe(
      "fooBar helper fails. parse_args helper too. x.y module."
    )
  })
  it("leaves capitalised words inside a sentence and ALL-CAPS words alone (names, constants)", () => {
    expect(run("We ship Plan A to The Guardian with THE flag set.")).toBe("We ship Plan A to The Guardian with THE flag set.")
  })
  it("keeps heading, list and quote markers and XML-ish tags", () => {
    const t =
      "<system-reminder>\n## The setup\n- Please run the tests.\n  1. Just the unit tests.\n> The output is basically fine.\n</system-reminder>"
    expect(run(t)).toBe("<system-reminder>\n## Setup\n- Run tests.\n  1. Unit tests.\n> Output is fine.\n</system-reminder>")
  })
  it("leaves fenced code blocks, indented code and tables untouched", () => {
    const t =
      "Please look at the code:\n```ts\n// just the default\nconst a = the.just\n```\n~~~\nthe  a  an\n~~~\n    the indented code\n| the | a |\nThe end."
    expect(run(t)).toBe(
      "Look at code:\n```ts\n// just the default\nconst a = the.just\n```\n~~~\nthe  a  an\n~~~\n    the indented code\n| the | a |\nEnd."
    )
  })
  it("an unclosed fence protects the rest of the text", () => {
    expect(run("Please see:\n```\nthe rest just stays\n")).toBe("See:\n```\nthe rest just stays\n")
  })
  it("collapses a line or sentence repeated right after itself", () => {
    expect(run("Run the build.\nRun the build.\nRun the tests. Run the tests. Then stop.")).toBe("Run build.\nRun tests. Then stop.")
  })
  it("keeps repeated lines that are not prose (code pasted without a fence)", () => {
    expect(run("Please close the block:\n  }\n  }\nend\nend")).toBe("Close block:\n  }\n  }\nend\nend")
  })
  it("keeps words that carry meaning in context", () => {
    for (const t of [
      "It looks good to me.",
      "The job is likely to fail.",
      "So how could you fix this bug?",
      "Determine if you can adjust it.",
      "I feel strongly about it."
    ]) {
      expect(run(t, { level: "full" }).replace(/^The job/, "Job")).toBe(t.replace(/^The job/, "Job"))
    }
    expect(run("Veo que el archivo puede fallar.", { language: "es" })).toBe("Veo que archivo puede fallar.")
    expect(run("Hola, ¿podrías revisar el archivo?", { language: "es" })).toBe("Revisar archivo?")
  })
  it("drops a line that was only politeness, without leaving two blank lines", () => {
    expect(run("Fix the bug.\n\nThank you so much!\n\nBye")).toBe("Fix bug.\n\nBye")
  })
  it("keeps CRLF line endings", () => {
    expect(run("Please fix the bug.\r\nThe tests fail.\r\n")).toBe("Fix bug.\r\nTests fail.\r\n")
  })
  it("German: an article after a comma is a relative pronoun and stays", () => {
    expect(run("Der Fehler liegt in der Funktion, die die Datei liest.", { language: "de" })).toBe(
      "Fehler liegt in Funktion, die Datei liest."
    )
  })
  it("Spanish: politeness with inverted marks", () => {
    expect(run("¿Podrías revisar el archivo por favor? ¡Muchas gracias!", { language: "es" })).toBe("Revisar archivo?")
  })
})

// ---------------------------------------------------------------------------------------------
// Invariants over generated prose mixed with tokens no rule may touch.

const PROSE_WORDS = {
  en: [
    "the",
    "a",
    "an",
    "please",
    "just",
    "basically",
    "really",
    "I think",
    "probably",
    "however,",
    "in order to",
    "thank you",
    "could you",
    "fix",
    "build",
    "cache",
    "parser",
    "is",
    "broken",
    "and",
    "it",
    "seems",
    "that",
    "of course",
    "The",
    "A",
    "Please",
    "Just",
    "Thanks!",
    "Hi,",
    "make sure"
  ],
  es: [
    "el",
    "la",
    "los",
    "un",
    "una",
    "por favor",
    "básicamente",
    "creo que",
    "probablemente",
    "gracias",
    "¿podrías",
    "revisar",
    "archivo",
    "error",
    "función",
    "y",
    "El",
    "La",
    "Hola,"
  ],
  de: [
    "der",
    "die",
    "das",
    "ein",
    "eine",
    "bitte",
    "eigentlich",
    "ich glaube",
    "vielleicht",
    "danke",
    "könntest du",
    "prüfen",
    "Datei",
    "Fehler",
    "und",
    "Der",
    "Die",
    "Hallo,"
  ]
} as const

const PROTECTED_TOKENS = [
  ...["`the`", "`just a test`", "``a `b` c``", "`npm run the-build`"],
  ...["https://example.com/the/a?x=just", "http://127.0.0.1:8080/please", "www.example.org/a/the"],
  ...["src/the/a.ts", "./just.sh", "~/.config/the", "C:\\the\\a", "README.md"],
  ...["42", "1.0", "3.14159", "v2.0.0-beta.1", "12345678901234567890", "0x1F", "-7"],
  ...["fooBar", "the_value", "THE_CONST", "a.b.c", "item2", "--just", "@scope/the", "#123", "$HOME"],
  ...['"the a an"', '"please, just do it"', "'the quoted one'", "“a smart quote”"],
  ...["<system-reminder>", "</system-reminder>", "<the a='b'>"]
]
const PROTECTED = fc.constantFrom(...PROTECTED_TOKENS)

const sentence = (lang: keyof typeof PROSE_WORDS) =>
  fc
    .array(fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...PROSE_WORDS[lang]) }, { weight: 1, arbitrary: PROTECTED }), {
      minLength: 1,
      maxLength: 14
    })
    .chain((words) => fc.constantFrom(".", "?", "!", "", ",").map((end) => words.join(" ") + end))

const CODE_BLOCK = fc.constantFrom(
  "```ts\nconst the = a.just // please\n  return  the\n```",
  "~~~\nthe  a  an   please\n~~~",
  "```\n\n  basically  \n```"
)

const document = (lang: keyof typeof PROSE_WORDS) =>
  fc
    .array(
      fc.oneof(
        { weight: 4, arbitrary: fc.array(sentence(lang), { minLength: 1, maxLength: 4 }).map((s) => s.join(" ")) },
        { weight: 1, arbitrary: CODE_BLOCK },
        { weight: 1, arbitrary: fc.constantFrom("", "- ", "## ", "1. ", "> ").chain((p) => sentence(lang).map((s) => p + s)) }
      ),
      { minLength: 1, maxLength: 8 }
    )
    .map((parts) => parts.join("\n"))

const codeBlocks = (text: string): ReadonlyArray<string> => [...text.matchAll(/^(```|~~~)[\s\S]*?^\1/gm)].map((m) => m[0])

describe("caveman invariants", () => {
  for (const language of ["en", "es", "de"] as const) {
    for (const level of ["lite", "full", "ultra"] as const) {
      it(`${language}/${level}: code and protected tokens byte-identical, idempotent, deterministic`, () => {
        const c = config({ language, level, minChars: 0 })
        fc.assert(
          fc.property(document(language), (input) => {
            const out = caveman.apply(input, USER, c, noRaw)
            for (const block of codeBlocks(input)) expect(out).toContain(block)
            for (const token of PROTECTED_TOKENS) if (input.includes(token)) expect(out, token).toContain(token)
            expect(caveman.apply(out, USER, c, noRaw)).toBe(out)
            expect(caveman.apply(input, USER, c, noRaw)).toBe(out)
            return true
          }),
          { seed: 24, numRuns: 300 }
        )
      })
    }
  }
})
