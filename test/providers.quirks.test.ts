import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Per-provider differences are declared with the provider (`quirks` in the catalog) and read by
 * the format modules: the wire shows them for the providers that declare them, and only there.
 */
const ADMIN = "gwk_quirks_admin_key_0123456789abcdefg"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const [provider, name] of [
    ["openai", "q-openai"],
    ["deepseek", "q-deepseek"],
    ["openai-compatible", "q-compat"]
  ]) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { provider, name, apiKey: "sk-quirks", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
      headers: admin
    })
    expect(res.status, res.text).toBe(201)
  }
})
afterAll(async () => {
  await gw.close()
  await up.close()
})

/** An Anthropic-format conversation with a thought-through tool call: translated to chat completions on the way up. */
const messages = (model: string) => ({
  model,
  max_tokens: 300,
  messages: [
    { role: "user", content: "weather in Paris?" },
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "look it up", signature: "sig" },
        { type: "tool_use", id: "toolu_1", name: "weather", input: { city: "Paris" } }
      ]
    },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "sunny" }] }
  ],
  tools: [{ name: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }]
})

const sentFor = async (model: string) => {
  up.next({ content: "sunny it is" })
  const res = await call(`${gw.url}/v1/messages`, { body: messages(model) })
  expect(res.status, res.text).toBe(200)
  return up.requests.at(-1)!.body as Record<string, any>
}

describe("provider quirks from the catalog", () => {
  it("sends the output limit as max_completion_tokens to OpenAI and as max_tokens elsewhere", async () => {
    const openai = await sentFor("q-openai/m1")
    expect(openai["max_completion_tokens"]).toBe(300)
    expect(openai).not.toHaveProperty("max_tokens")
    for (const other of ["q-deepseek/m1", "q-compat/m1"]) {
      const body = await sentFor(other)
      expect(body["max_tokens"], other).toBe(300)
      expect(body, other).not.toHaveProperty("max_completion_tokens")
    }
  })

  it("sends a tool-call turn's reasoning back as reasoning_content to DeepSeek only", async () => {
    const assistantOf = (body: Record<string, any>) => (body["messages"] as Array<any>).find((m) => m.role === "assistant")
    expect(assistantOf(await sentFor("q-deepseek/m1")).reasoning_content).toBe("look it up")
    for (const other of ["q-openai/m1", "q-compat/m1"])
      expect(assistantOf(await sentFor(other)), other).not.toHaveProperty("reasoning_content")
  })
})
