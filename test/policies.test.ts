import Anthropic from "@anthropic-ai/sdk"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { RequestHooks } from "../src/kernel/RequestHooks.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Policies (docs/guardrails.md): validated and versioned through /api/policies, applied on the
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
const setMode = async (value: string) =>
  expect(
    (await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "TOOL_POLICY_MODE", value }, headers: admin })).status
  ).toBe(200)
const clearPolicies = async () => {
  const list = await call(`${gw.url}/api/policies`, { headers: admin })
  for (const p of list.body.policies)
    expect((await call(`${gw.url}/api/policies/${p.name}`, { method: "DELETE", headers: admin })).status).toBe(200)
}
const upstreamTools = (): Array<string> => (upstream.requests.at(-1)?.body.tools ?? []).map((t: any) => t.function?.name)
const fn = (name: string) => ({
  type: "function" as const,
  function: { name, description: name, parameters: { type: "object", properties: {} } }
})

beforeAll(async () => {
  upstream = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const user = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))
  userKeyId = user.id
  const created = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "up", baseUrl: upstream.baseUrl("openai-chat"), defaultModel: "m1" },
    headers: admin
  })
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
    const e = await openai.chat.completions
      .create({ model: "m1", messages: [{ role: "user", content: "tell me about project falcon" }] })
      .catch((x) => x)
    expect(e).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect(e.message).toContain('policy "terms" v1')
    expect(e.message).toContain("blockedTerms[0]")
    const a = await anthropic.messages
      .create({ model: "m1", max_tokens: 50, messages: [{ role: "user", content: "PROJECT FALCON" }] })
      .catch((x) => x)
    expect(a).toBeInstanceOf(Anthropic.PermissionDeniedError)
    expect(a.error?.error?.type).toBeDefined()
    expect(upstream.requests).toHaveLength(0)
    // Ordinary text passes.
    const ok = await openai.chat.completions.create({ model: "m1", messages: [{ role: "user", content: "hello" }] })
    expect(ok.choices[0]?.message.content).toBe("Hello from upstream")
  })

  it("caps output tokens: a larger ask is a 400, a request without one gets the cap upstream", async () => {
    await policy({ name: "cap", maxTokens: 100 })
    const e = await anthropic.messages
      .create({ model: "m1", max_tokens: 5000, messages: [{ role: "user", content: "hi" }] })
      .catch((x) => x)
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
    const set = await call(`${gw.url}/api/pricing`, {
      method: "PUT",
      body: { provider: "openai-compatible", model: "m1", input: 1000, output: 1000 },
      headers: admin
    })
    expect(set.status).toBe(200)
    await policy({ name: "cost", maxCostUsd: 0.01 })
    // 500 output tokens at $1000 per million: about $0.5.
    const e = await openai.chat.completions
      .create({ model: "m1", max_tokens: 500, messages: [{ role: "user", content: "hi" }] })
      .catch((x) => x)
    expect(e).toBeInstanceOf(OpenAI.BadRequestError)
    expect(e.message).toContain('policy "cost" v1, rule maxCostUsd')
    // 5 output tokens: about $0.005, under the limit.
    const ok = await openai.chat.completions.create({ model: "m1", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
    expect(ok.choices[0]?.message.content).toBe("Hello from upstream")
    expect(upstream.requests).toHaveLength(1)
    await call(`${gw.url}/api/pricing`, { method: "DELETE", body: { provider: "openai-compatible", model: "m1" }, headers: admin })
  })
})

describe("TOOL_POLICY_MODE", () => {
  const denyShell = () => policy({ name: "tools", tools: { deny: ["shell_*"] } })

  it("disabled: tool rules are not applied; the upstream gets every tool", async () => {
    await denyShell()
    const r = await openai.chat.completions
      .create({ model: "m1", messages: [{ role: "user", content: "hi" }], tools: [fn("shell_exec"), fn("read_file")] })
      .withResponse()
    expect(upstreamTools()).toEqual(["shell_exec", "read_file"])
    expect(r.response.headers.get("x-gateway-policy-warning")).toBeNull()
  })

  it("block, OpenAI chat (SDK): a denied tool is removed from the request and named in a header", async () => {
    await denyShell()
    await setMode("block")
    const r = await openai.chat.completions
      .create({ model: "m1", messages: [{ role: "user", content: "hi" }], tools: [fn("shell_exec"), fn("read_file")] })
      .withResponse()
    expect(r.data.choices[0]?.message.content).toBe("Hello from upstream")
    expect(upstreamTools()).toEqual(["read_file"])
    expect(r.response.headers.get("x-gateway-policy-removed-tools")).toBe("shell_exec")
  })

  it("block, streaming: the denied tool is removed before the stream opens", async () => {
    await denyShell()
    await setMode("block")
    const stream = await openai.chat.completions.create({
      model: "m1",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
      tools: [fn("shell_exec"), fn("read_file")]
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("Hello from upstream")
    expect(upstreamTools()).toEqual(["read_file"])
  })

  it("block, every inbound format: Responses, Anthropic (SDK), Gemini, Ollama declare tools; the upstream never sees the denied one", async () => {
    await policy({ name: "tools", tools: { allow: ["read_*", "shell_exec"], deny: ["shell_*"] } })
    await setMode("block")
    const responses = await openai.responses.create({
      model: "m1",
      input: "hi",
      tools: [
        { type: "function", name: "shell_exec", parameters: { type: "object", properties: {} }, strict: false },
        { type: "function", name: "read_file", parameters: { type: "object", properties: {} }, strict: false }
      ]
    })
    expect(responses.output_text).toBe("Hello from upstream")
    expect(upstreamTools()).toEqual(["read_file"])

    const messages = await anthropic.messages.create({
      model: "m1",
      max_tokens: 50,
      messages: [{ role: "user", content: "hi" }],
      tools: [
        { name: "shell_exec", input_schema: { type: "object", properties: {} } },
        { name: "read_file", input_schema: { type: "object", properties: {} } },
        { name: "write_file", input_schema: { type: "object", properties: {} } }
      ]
    })
    expect(messages.content[0]).toMatchObject({ type: "text", text: "Hello from upstream" })
    // write_file is not in the allow list.
    expect(upstreamTools()).toEqual(["read_file"])

    const gemini = await call(`${gw.url}/v1beta/models/m1:generateContent`, {
      headers: { "x-goog-api-key": USER },
      body: {
        contents: [{ role: "user", parts: [{ text: "hi" }] }],
        tools: [
          {
            functionDeclarations: [
              { name: "shell_exec", parameters: { type: "object", properties: {} } },
              { name: "read_file", parameters: { type: "object", properties: {} } }
            ]
          }
        ]
      }
    })
    expect(gemini.status).toBe(200)
    expect(gemini.headers.get("x-gateway-policy-removed-tools")).toBe("shell_exec")
    expect(upstreamTools()).toEqual(["read_file"])

    const ollama = await call(`${gw.url}/api/chat`, {
      headers: { authorization: `Bearer ${USER}` },
      body: { model: "m1", stream: false, messages: [{ role: "user", content: "hi" }], tools: [fn("shell_exec"), fn("read_file")] }
    })
    expect(ollama.status).toBe(200)
    expect(upstreamTools()).toEqual(["read_file"])

    // Only denied tools: the request goes on without tools (and without its tool_choice).
    await openai.chat.completions.create({
      model: "m1",
      messages: [{ role: "user", content: "hi" }],
      tools: [fn("shell_exec")],
      tool_choice: "auto"
    })
    expect(upstream.requests.at(-1)?.body.tools).toBeUndefined()
    expect(upstream.requests.at(-1)?.body.tool_choice).toBeUndefined()
  })

  it("block: a request that forces a denied tool, requires a tool when all are denied, or carries a denied call is refused", async () => {
    await denyShell()
    await setMode("block")
    const forced = await openai.chat.completions
      .create({
        model: "m1",
        messages: [{ role: "user", content: "hi" }],
        tools: [fn("shell_exec"), fn("read_file")],
        tool_choice: { type: "function", function: { name: "shell_exec" } }
      })
      .catch((x) => x)
    expect(forced).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect(forced.message).toMatch(/policy "tools" v\d+, rule tools.deny: the request forces tool "shell_exec" is denied/)
    const required = await anthropic.messages
      .create({
        model: "m1",
        max_tokens: 50,
        messages: [{ role: "user", content: "hi" }],
        tools: [{ name: "shell_run", input_schema: { type: "object", properties: {} } }],
        tool_choice: { type: "any" }
      })
      .catch((x) => x)
    expect(required).toBeInstanceOf(Anthropic.PermissionDeniedError)
    expect(required.error.error.message).toContain("requires a tool call")
    // The client sends back a call of a denied tool (made before the policy, or invented by the model): refused.
    const history = await openai.chat.completions
      .create({
        model: "m1",
        messages: [
          { role: "user", content: "list files" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "c1", type: "function", function: { name: "shell_exec", arguments: '{"cmd":"rm -rf /"}' } }]
          },
          { role: "tool", tool_call_id: "c1", content: "done" }
        ]
      })
      .catch((x) => x)
    expect(history).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect(history.message).toContain('the conversation carries a call of tool "shell_exec"')
    const geminiHistory = await call(`${gw.url}/v1beta/models/m1:generateContent`, {
      headers: { "x-goog-api-key": USER },
      body: {
        contents: [
          { role: "user", parts: [{ text: "hi" }] },
          { role: "model", parts: [{ functionCall: { name: "shell_exec", args: { cmd: "ls" } } }] },
          { role: "user", parts: [{ functionResponse: { name: "shell_exec", response: { out: "a" } } }] }
        ]
      }
    })
    expect(geminiHistory.status).toBe(403)
    expect(geminiHistory.body.error.message).toContain("tools.deny")
    expect(upstream.requests).toHaveLength(0)
  })

  it("warn: the request goes unchanged, with a warning header", async () => {
    await denyShell()
    await setMode("warn")
    const r = await openai.chat.completions
      .create({ model: "m1", messages: [{ role: "user", content: "hi" }], tools: [fn("shell_exec"), fn("read_file")] })
      .withResponse()
    expect(upstreamTools()).toEqual(["shell_exec", "read_file"])
    expect(r.response.headers.get("x-gateway-policy-warning")).toMatch(/policy "tools" v\d+, rule tools.deny: tool "shell_exec" is denied/)
  })
})
