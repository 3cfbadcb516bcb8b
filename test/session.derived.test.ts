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

describe("derivedSession", () => {
  it("names a conversation by its prefix, the same on every request (remembered or not)", () => {
    const body = {
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hi" }
      ]
    }
    const want = expected("key_1", "m", null, body.messages[0])
    for (let i = 0; i < 3; i++) expect(derivedSession("key_1", "m", structuredClone(body))).toBe(want)
    // Another key, model or first message is another conversation.
    expect(derivedSession("key_2", "m", body)).toBe(expected("key_2", "m", null, body.messages[0]))
    expect(derivedSession("key_1", "n", body)).toBe(expected("key_1", "n", null, body.messages[0]))
    expect(derivedSession(null, "m", { system: "s", messages: [{ role: "user", content: "x" }] })).toBe(
      expected(null, "m", "s", { role: "user", content: "x" })
    )
  })

  it("hashes a prefix too long to remember each time, to the same id", () => {
    const long = { input: [{ role: "user", content: "x".repeat(10_000) }], instructions: "i" }
    const want = expected("k", "m", "i", long.input[0])
    expect(derivedSession("k", "m", long)).toBe(want)
    expect(derivedSession("k", "m", long)).toBe(want)
  })
})
