import { afterEach, describe, expect, it, vi } from "vitest"
import { redactText, scrubSecrets } from "../src/kernel/redact.js"

const KEY = "sk-proj-Zq8vR2mN4pL7xK1wT5yB9cD3opaqueABCDEFGH"
/** Every piece of 12 key characters of `secret`. */
const piecesOf = (secret: string) =>
  Array.from({ length: secret.length - 11 }, (_, i) => secret.slice(i, i + 12)).filter((p) => /^[A-Za-z0-9_-]{12}$/.test(p))
const expectNoPiece = (text: string, secret: string) => {
  for (const piece of piecesOf(secret)) expect(text, `${piece} in ${text}`).not.toContain(piece)
}

describe("JSON stays JSON", () => {
  it("masks a credential value holding an escaped quote without ending the string early", () => {
    const body = '{"error":{"message":"bad request","token":"a\\"b\\\\c\\"","code":1}}'
    for (const out of [redactText(body), scrubSecrets(body, [])]) {
      const parsed = JSON.parse(out)
      expect(parsed.error).toEqual({ message: "bad request", token: "****", code: 1 })
    }
  })

  it("masks credential values that are not strings, inside JSON and inside a JSON string", () => {
    const body = JSON.stringify({ password: 123456789, token: null, secret: { a: 1 }, message: JSON.stringify({ api_key: 98765432 }) })
    const parsed = JSON.parse(redactText(body))
    expect(parsed).toMatchObject({ password: "****", token: null, secret: { a: 1 } })
    expect(JSON.parse(parsed.message)).toEqual({ api_key: "****" })
  })

  it("leaves a quote that ends a JSON string alone, and masks a value quoted inside one", () => {
    const body = JSON.stringify({ m: "password: ", x: 1, n: 'password: "hunter2hunter2" rejected' })
    expect(JSON.parse(redactText(body))).toEqual({ m: "password: ", x: 1, n: 'password: "****" rejected' })
  })

  it("keeps escape sequences whole around what it masks", () => {
    const key = "nABCDEFGHIJKLMNOPQRSTU"
    // `\n` followed by the key without its first letter, and `\r8_…`, a carriage return and `8_…`.
    const body = JSON.stringify({ a: `line\n${key.slice(1)} end`, b: "\rk-abcdef", c: `é${key}` })
    const out = scrubSecrets(body.replace("é", "\\u00e9"), [key])
    const parsed = JSON.parse(out)
    expect(parsed.a).not.toContain(key.slice(1, 13))
    expect(parsed.c).toBe("é****")
  })

  it("holds for any JSON document: the scrubbed text parses, and no piece of a secret survives", () => {
    const secrets = [KEY, 'Zq"8\\vR2mN4pL7xK1/wT5y', "98765432109876543210"]
    let seed = 42
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296
    }
    const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(random() * xs.length)]!
    const words = [
      "password",
      "token",
      "api_key",
      "Authorization",
      "x-api-key",
      "secret",
      ": ",
      "=",
      ":",
      '"',
      "'",
      '\\"',
      "\\",
      "\n",
      " ",
      "é",
      "\u0000",
      "expected string",
      "Bearer abcdef123456",
      "sk-abcdefghij",
      "u00e9",
      "rk-abcdef",
      "12345678",
      "hunter2hunter2",
      "?key=abc",
      "&token=",
      KEY,
      KEY.slice(5, 30),
      KEY.slice(20),
      secrets[1]!,
      JSON.stringify(secrets[1]),
      encodeURIComponent(secrets[1]!),
      secrets[2]!,
      secrets[2]!.slice(3, 17)
    ]
    const text = (): string => Array.from({ length: 1 + Math.floor(random() * 6) }, () => pick(words)).join("")
    const value = (depth: number): unknown => {
      const r = random()
      if (depth > 3 || r < 0.35) return text()
      if (r < 0.45) return pick([98765432109876, -1234567890123, 1.5e-7, 0, true, false, null])
      if (r < 0.65) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1))
      return Object.fromEntries(
        Array.from({ length: Math.floor(random() * 4) }, () => [random() < 0.5 ? pick(words) : text(), value(depth + 1)])
      )
    }
    for (let i = 0; i < 2000; i++) {
      const doc = { error: value(0) }
      const body = JSON.stringify(doc, null, random() < 0.5 ? 1 : undefined)
      const out = scrubSecrets(body, secrets)
      let parsed: unknown
      expect(() => (parsed = JSON.parse(out)), `${body}\n=> ${out}`).not.toThrow()
      expectNoPiece(out, KEY)
      expect(JSON.stringify(parsed)).not.toContain(secrets[1])
      expect(out).not.toContain(secrets[2]!.slice(0, 12))
    }
  })
})

describe("pieces of the connection's key", () => {
  it("are masked inside longer runs of key characters, wherever they start and end", () => {
    const out = scrubSecrets(`bad key: x${KEY.slice(8, 40)}y`, [KEY])
    expect(out).toBe("bad key: x****y")
    for (const [from, to] of [
      [0, 12],
      [3, 20],
      [10, 46],
      [30, 46]
    ] as const) {
      const piece = KEY.slice(from, to)
      for (const around of [
        ["", ""],
        ["QQQQ", ""],
        ["", "_zzzz"],
        ["QQ_", "_QQ"]
      ] as const) {
        const masked = scrubSecrets(`got ${around[0]}${piece}${around[1]} instead`, [KEY])
        expect(masked, piece).toBe(`got ${around[0]}****${around[1]} instead`)
      }
    }
    // Two pieces in one run, and a piece as long as the window but no longer.
    expect(scrubSecrets(`q${KEY.slice(0, 14)}MIDDLE${KEY.slice(30, 44)}q`, [KEY])).toBe("q****MIDDLE****q")
    expect(scrubSecrets(`q${KEY.slice(0, 11)}q`, [KEY])).toBe(`q${KEY.slice(0, 11)}q`)
  })

  it("are masked in text that only begins like JSON (a `[tag]` or `{` prefix), outside any string", () => {
    const secret = "conn-secret-0123456789abcdefXYZ"
    expect(scrubSecrets(`[quota] key was ${secret}, caller used it`, [secret])).toBe("[quota] key was ****, caller used it")
    expect(scrubSecrets(`{broken ${secret.slice(2, 20)} x`, [secret])).toBe("{broken **** x")
    // A document stays a document: strings masked as strings, numbers as numbers.
    expect(JSON.parse(scrubSecrets(`{"k":"${secret}","n":123456789012345}`, [secret, "123456789012345"]))).toEqual({
      k: "****",
      n: 111111111111111
    })
  })

  it("are not looked for in a key too short to have them", () => {
    expect(scrubSecrets("x0123456789ab", ["0123456789a"])).toBe("x****b")
    expect(scrubSecrets("x0123456789b", ["0123456789a"])).toBe("x0123456789b")
  })
})

describe("key: value", () => {
  it("masks the whole value of a secret-named key, quoted or not, digits or not, without stray quotes", () => {
    expect(redactText('password: "hunter2hunter2"')).toBe('password: "****"')
    expect(redactText("password: 'correct horse battery'")).toBe("password: '****'")
    expect(redactText("password=correcthorsebattery")).toBe("password=****")
    expect(redactText("password=hunter")).toBe("password=****")
    expect(redactText("client_secret: correcthorsebattery")).toBe("client_secret: ****")
    expect(redactText("db password: s3cr3t!x now")).toBe("db password: **** now")
    expect(redactText("Authorization: Basic dXNlcjpwYXNz")).toBe("Authorization: Basic ****")
    expect(redactText("proxy-authorization=abc")).toBe("proxy-authorization=****")
    expect(redactText('{"webhook_secret":"plain","db-password":"words"}')).toBe('{"webhook_secret":"****","db-password":"****"}')
    expect(redactText("max_tokens: 4096, tokens=12")).toBe("max_tokens: 4096, tokens=12")
  })

  it("keeps validation messages about those fields readable", () => {
    for (const text of [
      "password: expected string",
      "password: Required",
      "token: expired",
      "api_key: String must contain at least 8 character(s)",
      "Unexpected token: < in JSON at position 0",
      "Incorrect API key provided; password: expected string"
    ]) {
      expect(redactText(text)).toBe(text)
    }
  })
})

describe("the pre-filter", () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it("costs little on adversarial text", () => {
    const text = `${"a-".repeat(50_000)}token=x ${"password".repeat(10_000)}: `
    const start = performance.now()
    redactText(text)
    expect(performance.now() - start).toBeLessThan(1000)
  })

  it("lets an ordinary log line through without running the patterns", () => {
    const replace = vi.spyOn(RegExp.prototype, Symbol.replace as unknown as "exec")
    for (const line of [
      "request completed in 123 ms for model gpt-4o-mini via openai",
      "connection openai: circuit breaker half-open after 30000 ms",
      "upstream answered 429, retrying on anthropic/claude-3-5-sonnet-20241022"
    ]) {
      expect(redactText(line)).toBe(line)
    }
    expect(replace).not.toHaveBeenCalled()
  })

  it("still masks every common secret", () => {
    const secrets: Array<[string, string]> = [
      ["Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"],
      ["key sk-proj-abcdef123456 used", "sk-proj-abcdef123456"],
      ["short fw_abcdef1", "fw_abcdef1"],
      ["hf_abcdefghijklmnop12", "hf_abcdefghijklmnop12"],
      ["AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"],
      ["google AIzaSyA1234567890abcdefghijklmnop", "AIzaSyA1234567890abcdefghijklmnop"],
      ["oauth ya29.a0AfH6SMBx1234567890", "ya29.a0AfH6SMBx1234567890"],
      ["jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "dozjgNryP4J3jVmNHl0w5N"],
      ["GET /v1/models?key=abc123 200", "abc123"],
      ['{"api_key":"plainwords"}', "plainwords"],
      ['{"message":"{\\"token\\":\\"zzz\\"}"}', "zzz"],
      ["x-goog-api-key: abcdefgh12", "abcdefgh12"],
      ["PASSWORD=letmein", "letmein"]
    ]
    for (const [text, secret] of secrets) expect(redactText(text), text).not.toContain(secret)
  })
})
