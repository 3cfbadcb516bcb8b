import * as Effect from "effect/Effect"
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/auth/ApiKeys.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * An answer given before the request body has arrived, on a connection that closes after it
 * (`Connection: close`, what node's client sends without an agent): the client gets the whole
 * answer, never a reset (src/http/lingering.ts).
 */
let gw: TestGateway
beforeAll(async () => {
  gw = await startGateway()
  const admin = "gwk_lingering_admin_key_0123456789abcd"
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: admin })))
  const on = await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "REQUIRE_API_KEY", value: "true" }, headers: { authorization: `Bearer ${admin}` } })
  expect(on.status).toBe(200)
})
afterAll(async () => {
  await gw?.close()
})

interface Outcome {
  readonly status?: number
  readonly bytes?: number
  readonly body?: string
  readonly error?: string
}

const send = (method: string, path: string, body: Buffer): Promise<Outcome> =>
  new Promise((resolve) => {
    const url = new URL(gw.url)
    const req = http.request({ host: url.hostname, port: url.port, method, path, agent: false, headers: { "content-type": "application/json", "content-length": body.length, authorization: "Bearer not-a-key" } })
    req.on("error", (e) => resolve({ error: `${(e as NodeJS.ErrnoException).code ?? ""} ${e.message}` }))
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (d: Buffer) => chunks.push(d))
      res.on("error", (e) => resolve({ status: res.statusCode!, error: `answer cut: ${e.message}` }))
      res.on("end", () => {
        const all = Buffer.concat(chunks)
        resolve({ status: res.statusCode!, bytes: all.length, body: all.subarray(0, 300).toString("utf8") })
      })
    })
    req.end(body)
  })

const many = async (method: string, path: string, body: Buffer) => {
  const outcomes: Array<Outcome> = []
  for (let round = 0; round < 12; round++) outcomes.push(...(await Promise.all([0, 1, 2].map(() => send(method, path, body)))))
  return outcomes
}

describe("lingering close", () => {
  it("a large answer to a GET whose body nobody reads arrives whole", async () => {
    const outcomes = await many("GET", "/api/openapi.json", Buffer.alloc(300_000, 97))
    expect(outcomes.filter((o) => o.error !== undefined)).toEqual([])
    const sizes = new Set(outcomes.map((o) => o.bytes))
    expect(sizes.size).toBe(1)
    expect([...sizes][0]).toBeGreaterThan(100_000)
    expect(outcomes.every((o) => o.status === 200)).toBe(true)
  })

  it("a 401 given before a 4 MB body arrives is read by the client, not reset", async () => {
    const body = Buffer.from(JSON.stringify({ model: "x", messages: [{ role: "user", content: "a".repeat(4 * 1024 * 1024) }] }))
    const outcomes = await many("POST", "/v1/chat/completions", body)
    expect(outcomes.filter((o) => o.error !== undefined)).toEqual([])
    for (const o of outcomes) {
      expect(o.status).toBe(401)
      expect(JSON.parse(o.body!).error.code).toBeTruthy()
    }
  })
})
