import * as crypto from "node:crypto"
import { describe, expect, it } from "vitest"
import { derivedSession } from "../src/inference/session.js"

/** The id as it was always made: `sess_` and the first 24 hex digits of the prefix's SHA-256. */
const expected = (apiKeyId: string | null, model: string, system: unknown, first: unknown) =>
  `sess_${crypto
    .createHash("sha256")
    .update(JSON.stringify([apiKeyId, model, system, first]))
    .digest("hex")
    .slice(0, 24)}`

describe("derivedSession: a conversation matched by its prefix's parts", () => {
  it("tells apart prefixes that share the first message's text, each read twice", () => {
    const text = "the same first text"
    const cases: Array<[string | null, string, Record<string, unknown>]> = [
      ["k1", "m", { messages: [{ role: "user", content: text }] }],
      ["k2", "m", { messages: [{ role: "user", content: text }] }],
      [null, "m", { messages: [{ role: "user", content: text }] }],
      ["k1", "n", { messages: [{ role: "user", content: text }] }],
      ["k1", "m", { messages: [{ role: "system", content: text }] }],
      ["k1", "m", { system: "s", messages: [{ role: "user", content: text }] }],
      ["k1", "m", { instructions: "s2", input: [{ role: "user", content: text }] }],
      ["k1", "m", { system: [{ type: "text", text: "s" }], messages: [{ role: "user", content: text }] }],
      // Not the plain shape: other keys, another order, content in parts.
      ["k1", "m", { messages: [{ content: text, role: "user" }] }],
      ["k1", "m", { messages: [{ role: "user", content: text, name: "x" }] }],
      ["k1", "m", { messages: [{ role: "user", content: [{ type: "text", text }] }] }],
      ["k1", "m", { input: text }],
      ["k1", "m", { messages: [] }]
    ]
    const check = ([key, model, body]: (typeof cases)[number]) => {
      const list = body["messages"] ?? body["input"]
      const first = Array.isArray(list) ? list[0] : list
      const system = body["system"] ?? body["instructions"] ?? null
      expect(derivedSession(key, model, structuredClone(body))).toBe(expected(key, model, system, first ?? null))
    }
    // Every case read right after every other (the one matched last is the one compared with), twice.
    for (const a of cases)
      for (const b of cases) {
        check(a)
        check(b)
        check(a)
      }
  })
})
