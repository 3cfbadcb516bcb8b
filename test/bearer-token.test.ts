import { describe, expect, it } from "vitest"
import { bearerToken } from "../src/platform/http/request.js"

/** The header's grammar as a regular expression: what bearerToken reads without one. */
const byPattern = (authorization: string | undefined): string | undefined => {
  const m = authorization ? /^Bearer\s+(.+)$/i.exec(authorization.trim()) : null
  return m ? m[1]!.trim() : undefined
}

describe("bearerToken", () => {
  it("reads the token after the scheme, in any case, after any whitespace", () => {
    expect(bearerToken("Bearer gwk_abc")).toBe("gwk_abc")
    expect(bearerToken("  bearer \t gwk_abc  ")).toBe("gwk_abc")
    expect(bearerToken("BEARER gwk abc")).toBe("gwk abc")
  })

  it("refuses another scheme, a missing token and a token over two lines", () => {
    for (const v of [undefined, "", "Basic abc", "Bearer", "Bearer   ", "Bearerabc", "Bearer a\nb", "Bearer a\u2028b", "Token Bearer a"])
      expect(bearerToken(v), JSON.stringify(v)).toBeUndefined()
  })

  it("gives the pattern's answer for every value built from the characters that matter", () => {
    // Seeded, so a failure names a value that fails again.
    let seed = 42
    const next = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed
    }
    const parts = ["Bearer", "bearer", "BEARER", "Bear", " ", "\t", "\n", "\r", "\u2028", "\u00a0", "\ufeff", "a", "gwk_1", "=", ":"]
    for (let i = 0; i < 50_000; i++) {
      let v = ""
      for (let n = next() % 7; n >= 0; n--) v += parts[next() % parts.length]
      expect(bearerToken(v), JSON.stringify(v)).toBe(byPattern(v))
    }
  })
})
