import * as http from "node:http"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Gemini `streamGenerateContent` without `alt=sse`: Google answers `application/json`, one JSON
 * array written as it grows (`[{...}\r\n,{...}\r\n]`), which is what its SDKs and REST clients
 * read then. With `alt=sse` the answer stays SSE.
 */
const CONNECTIONS: ReadonlyArray<{ family: Family; body: Record<string, unknown> }> = [
  { family: "anthropic", body: { provider: "anthropic", name: "arr-anth", apiKey: "sk-ant" } },
  { family: "gemini", body: { provider: "gemini", name: "arr-gem", apiKey: "gkey" } },
  { family: "openai-chat", body: { provider: "openai-compatible", name: "arr-chat" } }
]
const MODEL: Partial<Record<Family, string>> = { anthropic: "arr-anth/m1", gemini: "arr-gem/m1", "openai-chat": "arr-chat/m1" }
const ADMIN = "gwk_jsonarray_admin_key_0123456789abcd"
const BODY = { contents: [{ role: "user", parts: [{ text: "hi" }] }] }

let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway({ timeouts: { firstContentMs: 2000, idleMs: 2000, streamHeadersMs: 2000 } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const { family, body } of CONNECTIONS) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { ...body, baseUrl: up.baseUrl(family), defaultModel: "m1" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(res.status).toBe(201)
  }
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.requests.length = 0
  up.violations.length = 0
  up.always({})
  await gw.resetResilience()
})

const path = (model: string, alt?: string) => `/v1beta/models/${model}:streamGenerateContent${alt ? `?alt=${alt}` : ""}`

/** The text of the answer's chunks (thoughts left out). */
const textOf = (chunks: ReadonlyArray<any>): string =>
  chunks
    .flatMap((c) => c?.candidates?.[0]?.content?.parts ?? [])
    .filter((p: any) => p.thought !== true)
    .map((p: any) => p.text ?? "")
    .join("")

/** A raw POST whose body pieces are kept with the time each arrived. */
const rawPost = (url: string, body: unknown) =>
  new Promise<{ status: number; contentType: string; pieces: Array<{ at: number; text: string }>; endedAt: number }>((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      const pieces: Array<{ at: number; text: string }> = []
      res.setEncoding("utf8")
      res.on("data", (text: string) => pieces.push({ at: Date.now(), text }))
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers["content-type"] ?? ""), pieces, endedAt: Date.now() })
      )
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end(JSON.stringify(body))
  })

describe("streamGenerateContent without alt=sse", () => {
  for (const upstream of ["anthropic", "openai-chat", "gemini"] as const) {
    it(`answers a JSON array of chunks (${upstream === "gemini" ? "pass-through" : `translated from ${upstream}`})`, async () => {
      up.next({ content: "one two three four", chunks: 4 })
      const res = await call(`${gw.url}${path(MODEL[upstream]!)}`, { body: BODY })
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toMatch(/^application\/json/)
      expect(res.text.startsWith("[")).toBe(true)
      expect(res.text.trimEnd().endsWith("]")).toBe(true)
      expect(res.text).not.toContain("data:")
      const chunks = JSON.parse(res.text)
      expect(Array.isArray(chunks)).toBe(true)
      expect(chunks.length).toBeGreaterThan(1)
      expect(textOf(chunks)).toBe("one two three four")
      expect(chunks.some((c: any) => c.candidates?.[0]?.finishReason === "STOP")).toBe(true)
      // The upstream is asked for SSE either way.
      if (upstream === "gemini") expect(up.requests.at(-1)?.query.get("alt")).toBe("sse")
    })
  }

  it("writes each chunk as it arrives, not the whole answer at the end", async () => {
    up.next({ content: "a b c d e", chunks: 5, chunkDelayMs: 120 })
    const res = await rawPost(`${gw.url}${path(MODEL.anthropic!)}`, BODY)
    expect(res.status).toBe(200)
    expect(res.contentType).toMatch(/^application\/json/)
    expect(res.pieces.length).toBeGreaterThan(1)
    expect(res.pieces[0]!.text.startsWith("[")).toBe(true)
    // The first chunk reached the client well before the upstream had finished.
    expect(res.endedAt - res.pieces[0]!.at).toBeGreaterThan(250)
    expect(textOf(JSON.parse(res.pieces.map((p) => p.text).join("")))).toBe("a b c d e")
  })

  it("writes pass-through chunks as they arrive too", async () => {
    up.next({ content: "a b c d e", chunks: 5, chunkDelayMs: 120 })
    const res = await rawPost(`${gw.url}${path(MODEL.gemini!)}`, BODY)
    expect(res.pieces.length).toBeGreaterThan(1)
    expect(res.pieces[0]!.text.startsWith("[")).toBe(true)
    expect(res.endedAt - res.pieces[0]!.at).toBeGreaterThan(250)
    expect(textOf(JSON.parse(res.pieces.map((p) => p.text).join("")))).toBe("a b c d e")
  })

  // Events before the break: the Anthropic stream's first two carry no text yet.
  const AFTER = { anthropic: 4, gemini: 2 } as const
  for (const upstream of ["anthropic", "gemini"] as const) {
    it(`ends with an error element then ] when the upstream fails mid-stream (${upstream})`, async () => {
      up.next({ content: "one two three four", chunks: 4, streamErrorAfterChunks: AFTER[upstream], errorMessage: "Overloaded" })
      const res = await call(`${gw.url}${path(MODEL[upstream]!)}`, { body: BODY })
      expect(res.status).toBe(200)
      const chunks = JSON.parse(res.text)
      expect(Array.isArray(chunks)).toBe(true)
      expect(chunks.at(-1).error.message).toContain("Overloaded")
      expect(chunks.slice(0, -1).every((c: any) => c.error === undefined)).toBe(true)
    })

    it(`ends with an error element then ] when the upstream is cut off (${upstream})`, async () => {
      up.next({ content: "one two three four", chunks: 4, cutAfterChunks: AFTER[upstream] })
      const res = await call(`${gw.url}${path(MODEL[upstream]!)}`, { body: BODY })
      const chunks = JSON.parse(res.text)
      expect(Array.isArray(chunks)).toBe(true)
      expect(chunks.at(-1).error).toBeDefined()
    })
  }

  it("answers a JSON array with alt=json too", async () => {
    const res = await call(`${gw.url}${path(MODEL.anthropic!, "json")}`, { body: BODY })
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(textOf(JSON.parse(res.text))).toBe("Hello from upstream")
  })
})

describe("streamGenerateContent with alt=sse", () => {
  for (const upstream of ["anthropic", "gemini"] as const) {
    it(`stays SSE (${upstream})`, async () => {
      const res = await call(`${gw.url}${path(MODEL[upstream]!, "sse")}`, { body: BODY })
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/)
      const chunks = res.text
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .map((l) => JSON.parse(l.slice(6)))
      expect(textOf(chunks)).toBe("Hello from upstream")
    })
  }
})
