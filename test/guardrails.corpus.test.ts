import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { guardRequest } from "../src/services/guardrails/Guardrails.js"
import { findPii } from "../src/services/guardrails/pii.js"
import { INJECTION_RULES } from "../src/services/guardrails/rules/injection.js"
import { sanitizeText } from "../src/services/guardrails/sanitize.js"
import { recordedRequests } from "./support/recordedRequests.js"

/**
 * The detectors against their corpus (test/fixtures/guardrails: samples with expected verdicts),
 * and the false-positive check over recorded coding-agent traffic (test/fixtures/clients).
 */
const here = path.dirname(fileURLToPath(import.meta.url))
const fixture = (name: string) => JSON.parse(fs.readFileSync(path.join(here, "fixtures/guardrails", name), "utf8"))

const ON = { sanitizer: true, injection: "block", pii: true, response: undefined } as const

describe("injection corpus", () => {
  const samples: Array<{ role: "user" | "tool"; text: string; rules: Array<string> }> = fixture("injection.json")
  it.each(samples)("$role: $text", ({ role, text, rules }) => {
    const matched = INJECTION_RULES.filter((r) => r.appliesTo.includes(role) && r.pattern.test(text)).map((r) => r.id)
    expect(matched).toEqual(rules)
  })

  it("every rule has an id, a version and a description", () => {
    expect(new Set(INJECTION_RULES.map((r) => r.id)).size).toBe(INJECTION_RULES.length)
    for (const r of INJECTION_RULES) expect(r.version >= 1 && r.description.length > 10).toBe(true)
  })
})

describe("PII corpus", () => {
  const samples: Array<{ text: string; kinds: Array<string> }> = fixture("pii.json")
  it.each(samples)("$text", ({ text, kinds }) => {
    expect(findPii(text).map((m) => m.kind)).toEqual(kinds)
  })
})

describe("sanitizer", () => {
  it("changes exactly what docs/guardrails.md lists", () => {
    expect(sanitizeText("a\u0000b\u001Fc\u007Fd\u0085e\t\n\r")).toBe("abcde\t\n\r")
    // Terminal escapes go whole (colours, cursor moves, an OSC hyperlink), not only their ESC byte.
    expect(
      sanitizeText("\u001b[33mwarning\u001b[0m: x \u001b[2K\u001b[1Gdone \u001b]8;;https://x.dev\u0007link\u001b]8;;\u0007 \u001b(B.")
    ).toBe("warning: x done link .")
    expect(sanitizeText("z\u200Bw\u200Cj\u200Dx\u2060y\uFEFF.")).toBe("zwjxy.")
    expect(sanitizeText("\u202Aa\u202Bb\u202Cc\u202Dd\u202Ee\u2066f\u2067g\u2068h\u2069")).toBe("abcdefgh")
    expect(sanitizeText("\uFF28\uFF49 \uFB01 \u2460 e\u0301")).toBe("Hi fi 1 \u00E9")
    const plain = "plain ascii text"
    expect(sanitizeText(plain)).toBe(plain)
  })
})

const recorded = recordedRequests

describe("false positives on recorded coding-agent traffic", () => {
  const requests = recorded()

  it("the corpus is there (every inbound family the clients speak)", () => {
    expect(requests.length).toBeGreaterThan(40)
    expect(new Set(requests.map((r) => r.format))).toEqual(new Set(["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"]))
  })

  it("the injection guard matches nothing", () => {
    const hits = requests.flatMap((r) => guardRequest(ON, r.format, r.body).injections.map((rule) => `${r.file}: ${rule.id}`))
    expect(hits).toEqual([])
  })

  it("PII redaction finds only e-mail addresses (git author lines and co-author trailers: real addresses, redacted on purpose)", () => {
    const kinds = new Map<string, Array<string>>()
    for (const r of requests) {
      for (const [kind] of guardRequest(ON, r.format, r.body).placeholders.kinds) kinds.set(kind, [...(kinds.get(kind) ?? []), r.file])
    }
    expect([...kinds.keys()].filter((k) => k !== "EMAIL")).toEqual([])
  })
})
