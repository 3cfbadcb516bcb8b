import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * ENABLE_CC_COMPATIBLE_PROVIDER (docs/feature-flags.md): the `claude-code-compatible` provider, an
 * Anthropic-messages relay that only takes Claude Code's traffic, against a fake Anthropic
 * upstream on 127.0.0.1 that records what it was sent.
 */
const ADMIN = "gwk_ccompat_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const KEY = "sk-relay-key-5f0c2a9e41b7"
let on: TestGateway
let off: TestGateway
let up: FakeUpstream

const withAdmin = async (gw: TestGateway) => {
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  return gw
}
const create = (gw: TestGateway) =>
  call(`${gw.url}/api/providers`, {
    body: { provider: "claude-code-compatible", name: "relay", baseUrl: up.baseUrl("anthropic"), apiKey: KEY },
    headers: admin
  })

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "hello from the relay" })
  on = await withAdmin(await startGateway({ env: { ENABLE_CC_COMPATIBLE_PROVIDER: "true" } }))
  off = await withAdmin(await startGateway())
})
afterAll(async () => {
  await on?.close()
  await off?.close()
  await up?.close()
})

describe("ENABLE_CC_COMPATIBLE_PROVIDER", () => {
  it("off (the default): creating a claude-code-compatible connection is a 400 naming the flag", async () => {
    const res = await create(off)
    expect(res.status).toBe(400)
    expect(res.text).toContain("ENABLE_CC_COMPATIBLE_PROVIDER")
    expect((await call(`${off.url}/api/providers`, { headers: admin })).body.connections).toHaveLength(0)
  })

  it("on: requests reach the relay with Claude Code's headers, the key as x-api-key and bearer, and the system preamble", async () => {
    expect((await create(on)).status).toBe(201)
    const res = await call(`${on.url}/v1/chat/completions`, {
      body: {
        model: "relay/claude-sonnet-4-5",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "hi" }
        ]
      }
    })
    expect(res.status).toBe(200)
    expect(res.body.choices[0].message.content).toBe("hello from the relay")
    const sent = up.requests.filter((r) => r.path === "/v1/messages").at(-1)!
    expect(up.violations).toEqual([])
    expect(sent.headers["anthropic-beta"]).toContain("claude-code-20250219")
    expect(sent.headers["x-app"]).toBe("cli")
    expect(sent.headers["user-agent"]).toMatch(/^claude-cli\/\d+\.\d+\.\d+ \(external, cli\)$/)
    expect(sent.headers["x-api-key"]).toBe(KEY)
    expect(sent.headers["authorization"]).toBe(`Bearer ${KEY}`)
    expect(sent.headers["anthropic-version"]).toBe("2023-06-01")
    expect(sent.body.system[0]).toEqual({ type: "text", text: "You are Claude Code, Anthropic's official CLI for Claude." })
    expect(JSON.stringify(sent.body.system)).toContain("Be brief.")
  })

  it("on: an Anthropic client's own anthropic-beta values are kept beside Claude Code's, and its preamble is not doubled", async () => {
    const res = await call(`${on.url}/v1/messages`, {
      body: {
        model: "relay/claude-sonnet-4-5",
        max_tokens: 64,
        system: "You are Claude Code, Anthropic's official CLI for Claude.",
        messages: [{ role: "user", content: "hi" }]
      },
      headers: { "anthropic-version": "2023-06-01", "anthropic-beta": "context-1m-2025-08-07" }
    })
    expect(res.status).toBe(200)
    const sent = up.requests.filter((r) => r.path === "/v1/messages").at(-1)!
    const betas = String(sent.headers["anthropic-beta"]).split(",")
    expect(betas).toContain("claude-code-20250219")
    expect(betas).toContain("context-1m-2025-08-07")
    expect(JSON.stringify(sent.body.system).split("official CLI for Claude").length - 1).toBe(1)
  })

  it("on: the provider test (model list) is made with the same headers", async () => {
    const id = (await call(`${on.url}/api/providers`, { headers: admin })).body.connections[0].id
    const res = await call(`${on.url}/api/providers/${id}/test`, { method: "POST", headers: admin })
    expect(res.status).toBe(200)
    const probe = up.requests.filter((r) => r.method === "GET" && r.path === "/v1/models").at(-1)!
    expect(probe.headers["x-app"]).toBe("cli")
    expect(probe.headers["x-api-key"]).toBe(KEY)
  })
})
