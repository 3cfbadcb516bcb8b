import Anthropic from "@anthropic-ai/sdk"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/auth/ApiKeys.js"
import { RequestHooks } from "../src/inference/hooks.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Policies (docs/governance.md): validated and versioned through /api/policies, applied on the
 * request path, with the tool policy in every inbound format. The gateway runs for real against a
 * fake OpenAI-compatible upstream on 127.0.0.1; the tests assert what the upstream received and
 * what the client (the official SDKs where they exist) got.
 */
const ADMIN = "gwk_policies_admin_key_0123456789abcdef"
const USER = "gwk_policies_user_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let upstream: FakeUpstream
let userKeyId: string
let openai: OpenAI
let anthropic: Anthropic

const policy = (body: Record<string, unknown>) => call(`${gw.url}/api/policies`, { body, headers: admin })
const setMode = async (value: string) => expect((await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "TOOL_POLICY_MODE", value }, headers: admin })).status).toBe(200)
const clearPolicies = async () => {
  const list = await call(`${gw.url}/api/policies`, { headers: admin })
  for (const p of list.body.policies) expect((await call(`${gw.url}/api/policies/${p.name}`, { method: "DELETE", headers: admin })).status).toBe(200)
}
const upstreamTools = (): Array<string> => (upstream.requests.at(-1)?.body.tools ?? []).map((t: any) => t.function?.name)
const fn = (name: string) => ({ type: "function" as const, function: { name, description: name, parameters: { type: "object", properties: {} } } })

beforeAll(async () => {
  upstream = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const user = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))
  userKeyId = user.id
  const created = await call(`${gw.url}/api/providers`, { body: { provider: "openai-compatible", name: "up", baseUrl: upstream.baseUrl("openai-chat"), defaultModel: "m1" }, headers: admin })
  expect(created.status).toBe(201)
  openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: USER, maxRetries: 0 })
  anthropic = new Anthropic({ baseURL: gw.url, apiKey: USER, maxRetries: 0 })
})

afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

beforeEach(async () => {
  upstream.always({})
  upstream.requests.length = 0
  await clearPolicies()
  await setMode("disabled")
})

describe("/api/policies", () => {
  it("refuses malformed documents with a 400 naming the field", async () => {
    const badName = await policy({ name: "no spaces allowed", blockedTerms: ["x"] })
    expect(badName.status).toBe(400)
    expect(badName.body.message).toContain("name")
    const badTokens = await policy({ name: "p", maxTokens: -5 })
    expect(badTokens.status).toBe(400)
    expect(badTokens.body.message).toContain("maxTokens")
    const noRules = await policy({ name: "p" })
    expect(noRules.status).toBe(400)
    expect(noRules.body.message).toContain("at least one rule")
    const emptyTools = await policy({ name: "p", tools: {} })
    expect(emptyTools.status).toBe(400)
    expect(emptyTools.body.message).toContain("tools")
    const badPattern = await policy({ name: "p", tools: { deny: ["ok", ""] } })
    expect(badPattern.status).toBe(400)
    expect(badPattern.body.message).toContain("deny")
    const emptyModels = await policy({ name: "p", models: { "*": [] } })
    expect(emptyModels.status).toBe(400)
    expect(emptyModels.body.message).toContain("models")
  })

  it("versions each POST of a name, lists the current versions, keeps the history, deletes by name or id", async () => {
    const v1 = await policy({ name: "acme", blockedTerms: ["alpha"] })
    expect(v1.status).toBe(201)
    expect(v1.body).toMatchObject({ name: "acme", version: 1, enabled: true, blockedTerms: ["alpha"], createdBy: expect.any(String) })
    const v2 = await policy({ name: "acme", blockedTerms: ["beta"], description: "second" })
    expect(v2.body).toMatchObject({ version: 2, description: "second" })
    const list = await call(`${gw.url}/api/policies`, { headers: admin })
    expect(list.body.policies.map((p: any) => [p.name, p.version])).toEqual([["acme", 2]])
    expect(list.body.toolPolicyMode).toBe("disabled")
    const detail = await call(`${gw.url}/api/policies/${v1.body.id}`, { headers: admin })
    expect(detail.body.policy.version).toBe(2)
    expect(detail.body.history.map((p: any) => p.version)).toEqual([2, 1])
    const removed = await call(`${gw.url}/api/policies/${v2.body.id}`, { method: "DELETE", headers: admin })
    expect(removed.status).toBe(200)
    expect((await call(`${gw.url}/api/policies`, { headers: admin })).body.policies).toEqual([])
    const after = await call(`${gw.url}/api/policies/acme`, { headers: admin })
    expect(after.body.policy).toBeNull()
    expect(after.body.history.every((p: any) => p.deletedAt !== null)).toBe(true)
    expect((await call(`${gw.url}/api/policies/acme`, { method: "DELETE", headers: admin })).status).toBe(404)
    expect((await call(`${gw.url}/api/policies/nothing`, { headers: admin })).status).toBe(404)
    // A new POST of the name brings it back as version 3.
    expect((await policy({ name: "acme", blockedTerms: ["gamma"] })).body.version).toBe(3)
  })

  it("attaches its hook only while an enabled policy exists", async () => {
    const names = () => gw.run(Effect.map(RequestHooks, (h) => h.registered().map((r) => r.name)))
    expect(await names()).not.toContain("gateway.policies")
    await policy({ name: "off", enabled: false, blockedTerms: ["x"] })
    expect(await names()).not.toContain("gateway.policies")
    await policy({ name: "on", blockedTerms: ["x"] })
    expect(await names()).toContain("gateway.policies")
    await clearPolicies()
    expect(await names()).not.toContain("gateway.policies")
  })
})

describe("policies on the request path", () => {
  it("refuses a blocked term in the client's format, naming the policy and rule; nothing goes upstream", async () => {
    await policy({ name: "terms", blockedTerms: ["Project Falcon"] })
    const e = await openai.chat.completions.create({ model: "m1", messages: [{ role: "user", content: "tell me about project falcon" }] }).catch((x) => x)
    expect(e).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect(e.message).toContain('policy "terms" v1')
    expect(e.message).toContain("blockedTerms[0]")
    const a = await anthropic.messages.create({ model: "m1", max_tokens: 50, messages: [{ role: "user", content: "PROJECT FALCON" }] }).catch((x) => x)
    expect(a).toBeInstanceOf(Anthropic.PermissionDeniedError)
    expect(a.error?.error?.type).toBeDefined()
    expect(upstream.requests).toHaveLength(0)
    // Ordinary text passes.
    const ok = await openai.chat.completions.create({ model: "m1", messages: [{ role: "user", content: "hello" }] })
    expect(ok.choices[0]?.message.content).toBe("Hello from upstream")
  })

  it("caps output tokens: a larger ask is a 400, a request without one gets the cap upstream", async () => {
    await policy({ name: "cap", maxTokens: 100 })
    const e = await anthropic.messages.create({ model: "m1", max_tokens: 5000, messages: [{ role: "user", content: "hi" }] }).catch((x) => x)
    expect(e).toBeInstanceOf(Anthropic.BadRequestError)
    expect(e.error.error.message).toContain('policy "cap" v1, rule maxTokens')
    expect(upstream.requests).toHaveLength(0)
    await openai.chat.completions.create({ model: "m1", messages: [{ role: "user", content: "hi" }] })
    expect(upstream.requests[0]?.body.max_tokens).toBe(100)
    await openai.chat.completions.create({ model: "m1", max_tokens: 40, messages: [{ role: "user", content: "hi" }] })
    expect(upstream.requests[1]?.body.max_tokens).toBe(40)
  })

  it("refuses a model outside the key's allow list; '*' covers keys without an entry", async () => {
    await policy({ name: "models", models: { [userKeyId]: ["m1", "up/m1"], "*": ["nothing-*"] } })
    const ok = await openai.chat.completions.create({ model: "m1", messages: [{ role: "user", content: "hi" }] })
    expect(ok.choices[0]?.message.content).toBe("Hello from upstream")
    const e = await openai.chat.completions.create({ model: "up/m2", messages: [{ role: "user", content: "hi" }] }).catch((x) => x)
    expect(e).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect(e.message).toContain('rule models: model "up/m2" is not allowed')
    // Without a key (REQUIRE_API_KEY is off) the '*' entry applies.
    const anon = await call(`${gw.url}/v1/chat/completions`, { body: { model: "m1", messages: [{ role: "user", content: "hi" }] } })
    expect(anon.status).toBe(403)
    expect(anon.body.error.message).toContain("requests without an API key")
    expect(upstream.requests).toHaveLength(1)
  })

  it("refuses a request whose estimated cost exceeds maxCostUsd at the target's prices", async () => {
    const set = await call(`${gw.url}/api/pricing`, { method: "PUT", body: { provider: "openai-compatible", model: "m1", input: 1000, output: 1000 }, headers: admin })
    expect(set.status).toBe(200)
    await policy({ name: "cost", maxCostUsd: 0.01 })
    // 500 output tokens at $1000 per million: about $0.5.
    const e = await openai.chat.completions.create({ model: "m1", max_tokens: 500, messages: [{ role: "user", content: "hi" }] }).catch((x) => x)
    expect(e).toBeInstanceOf(OpenAI.BadRequestError)
    expect(e.message).toContain('policy "cost" v1, rule maxCostUsd')
    // 5 output tokens: about $0.005, under the limit.
    const ok = await openai.chat.completions.create({ model: "m1", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
    expect(ok.choices[0]?.message.content).toBe("Hello from upstream")
    expect(upstream.requests).toHaveLength(1)
    await call(`${gw.url}/api/pricing`, { method: "DELETE", body: { provider: "openai-compatible", model: "m1" }, headers: admin })
  })
})
