import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { open } from "../src/upstream/formats/signatures.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Reasoning state across fallbacks (docs/reasoning-state.md): thinking signatures, redacted
 * thinking, encrypted_content and thoughtSignature are bound to the connection that issued
 * them. Each fake upstream here is one account: it issues `sig.<account>.<n>` and refuses any
 * other signature with the error the real API gives for another account's. A conversation that
 * moves to the other account (a fallback) drops the first one's state and is answered; back on
 * the issuer, its own state is sent again, exactly as it issued it.
 */
const ADMIN = "gwk_reasoning_state_admin_0123456789ab"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let a: FakeUpstream
let b: FakeUpstream

beforeAll(async () => {
  a = await FakeUpstream.start({ issuer: "A" })
  b = await FakeUpstream.start({ issuer: "B" })
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  const pair = async (name: string, family: Family, connection: Record<string, unknown>, model: string) => {
    await add({ ...connection, name: `${name}-a`, priority: 1, baseUrl: a.baseUrl(family), models: [model] })
    await add({ ...connection, name: `${name}-b`, priority: 2, baseUrl: b.baseUrl(family), models: [model] })
    const res = await call(`${gw.url}/api/combos`, {
      body: { name, strategy: "priority", targets: [{ model: `${name}-a/${model}` }, { model: `${name}-b/${model}` }] },
      headers: admin
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await pair("claude-pair", "anthropic", { provider: "anthropic", apiKey: "sk-ant-upstream" }, "claude-x")
  await pair("resp-pair", "openai-responses", { provider: "openai-compatible", upstreamFormat: "openai-responses" }, "gpt-r")
  await pair("gem-pair", "gemini", { provider: "gemini", apiKey: "gemini-upstream-key" }, "gem-x")
  // Another family first: a Gemini account, then an Anthropic one.
  await add({
    provider: "anthropic",
    apiKey: "sk-ant-upstream",
    name: "cross-anth",
    priority: 2,
    baseUrl: b.baseUrl("anthropic"),
    models: ["claude-x"]
  })
  const res = await call(`${gw.url}/api/combos`, {
    body: { name: "cross", strategy: "priority", targets: [{ model: "gem-pair-a/gem-x" }, { model: "cross-anth/claude-x" }] },
    headers: admin
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await a?.close()
  await b?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  for (const up of [a, b]) {
    up.always({ content: "done" })
    up.requests.length = 0
    up.violations.length = 0
  }
})

const TOOLS = [
  {
    name: "read_file",
    description: "Reads a file",
    input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }
  }
]
const THINKING = { type: "enabled", budget_tokens: 2048 }

/** The data of each SSE event. */
const events = (text: string): Array<any> =>
  text
    .split("\n")
    .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)))

const last = (up: FakeUpstream, path: RegExp) => up.requests.filter((r) => path.test(r.path)).at(-1)?.body

describe("Anthropic thinking signatures (a messages client, passed through)", () => {
  const turn1 = async (stream: boolean) => {
    a.next({ reasoning: { text: "I should read it." }, toolCalls: [{ name: "read_file", arguments: '{"path":"a.txt"}' }] })
    const res = await call(`${gw.url}/v1/messages`, {
      body: {
        model: "claude-pair",
        max_tokens: 4096,
        thinking: THINKING,
        tools: TOOLS,
        stream,
        messages: [{ role: "user", content: "read a.txt" }]
      }
    })
    expect(res.status, res.text).toBe(200)
    const content: Array<any> = stream
      ? (() => {
          const blocks: Array<any> = []
          for (const e of events(res.text)) {
            if (e.type === "content_block_start") blocks[e.index] = { ...e.content_block }
            if (e.type === "content_block_delta" && e.delta.type === "signature_delta") blocks[e.index].signature = e.delta.signature
            if (e.type === "content_block_delta" && e.delta.type === "thinking_delta") blocks[e.index].thinking += e.delta.thinking
            if (e.type === "content_block_delta" && e.delta.type === "input_json_delta")
              blocks[e.index].json = (blocks[e.index].json ?? "") + e.delta.partial_json
          }
          return blocks.map((b) =>
            b.type === "tool_use" ? { type: "tool_use", id: b.id, name: b.name, input: JSON.parse(b.json ?? "{}") } : b
          )
        })()
      : res.body.content
    return content
  }

  for (const stream of [true, false]) {
    it(`${stream ? "streamed" : "non-streamed"}: sealed to the client; dropped at the other account (thinking off for that turn); sent back to its issuer as issued`, async () => {
      const content = await turn1(stream)
      const thinking = content.find((c) => c.type === "thinking")
      expect(thinking.thinking).toBe("I should read it.")
      // What the client holds is sealed: not the upstream's own string, but it opens to it.
      expect(thinking.signature).not.toMatch(/^sig\./)
      expect(open(thinking.signature).signature).toMatch(/^sig\.A\.\d+$/)
      const tool = content.find((c) => c.type === "tool_use")
      const history = [
        { role: "user", content: "read a.txt" },
        { role: "assistant", content: content.map(({ json: _j, ...c }) => c) },
        { role: "user", content: [{ type: "tool_result", tool_use_id: tool.id, content: "hello" }] }
      ]
      const turn = { model: "claude-pair", max_tokens: 4096, thinking: THINKING, tools: TOOLS, messages: history }

      // The first account fails: the second one answers without the first one's signature.
      a.next({ status: 503 })
      const moved = await call(`${gw.url}/v1/messages`, { body: turn })
      expect(moved.status, moved.text).toBe(200)
      expect(moved.headers.get("x-gateway-fallback-attempts")).toBe("1")
      expect(b.violations).toEqual([])
      const atB = last(b, /messages$/)
      expect(JSON.stringify(atB)).not.toContain("sig.A.")
      expect(atB.thinking).toEqual({ type: "disabled" })
      expect(atB.messages[1].content.map((c: any) => c.type)).toEqual(["tool_use"])

      // Back on the issuer: its own signature, exactly.
      await gw.resetResilience()
      const back = await call(`${gw.url}/v1/messages`, { body: turn })
      expect(back.status, back.text).toBe(200)
      expect(a.violations).toEqual([])
      const atA = last(a, /messages$/)
      expect(atA.thinking).toEqual(THINKING)
      expect(atA.messages[1].content[0]).toEqual({
        type: "thinking",
        thinking: "I should read it.",
        signature: open(thinking.signature).signature
      })
    })
  }

  it("a signature the gateway did not seal (a conversation from before) goes on as it came", async () => {
    const res = await call(`${gw.url}/v1/messages`, {
      body: {
        model: "claude-pair-a/claude-x",
        max_tokens: 4096,
        thinking: THINKING,
        messages: [
          { role: "user", content: "hi" },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "hm", signature: "sig.A.legacy" },
              { type: "text", text: "hello" }
            ]
          },
          { role: "user", content: "again" }
        ]
      }
    })
    expect(res.status, res.text).toBe(200)
    expect(last(a, /messages$/).messages[1].content[0].signature).toBe("sig.A.legacy")
  })

  it("a tool turn a model without thinking answered (a conversation begun elsewhere), with thinking on: thinking is off for the request instead of Anthropic's 400", async () => {
    const res = await call(`${gw.url}/v1/messages`, {
      body: {
        model: "claude-pair-a/claude-x",
        max_tokens: 4096,
        thinking: THINKING,
        tools: TOOLS,
        messages: [
          { role: "user", content: "read a.txt" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "read_file", input: { path: "a.txt" } }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "hello" }] }
        ]
      }
    })
    expect(res.status, res.text).toBe(200)
    const sent = last(a, /messages$/)
    expect(sent.thinking).toEqual({ type: "disabled" })
    expect(sent.messages[1].content[0].type).toBe("tool_use")
    expect(a.violations).toEqual([])
  })

  it("without the gateway's seal, the other account refuses it as the real API does (what the seal prevents)", async () => {
    const res = await call(`${gw.url}/v1/messages`, {
      body: {
        model: "claude-pair-b/claude-x",
        max_tokens: 4096,
        thinking: THINKING,
        messages: [
          { role: "user", content: "hi" },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "hm", signature: "sig.A.legacy" },
              { type: "text", text: "hello" }
            ]
          },
          { role: "user", content: "again" }
        ]
      }
    })
    expect(res.status).toBe(400)
    expect(res.text).toContain("Invalid `signature` in `thinking` block")
  })
})

describe("OpenAI encrypted reasoning (a Responses client, passed through)", () => {
  it("the other account gets no reasoning item of the first; the issuer gets its encrypted_content back", async () => {
    a.next({ reasoning: { text: "plan" }, toolCalls: [{ name: "read_file", arguments: '{"path":"a.txt"}' }] })
    const body = {
      model: "resp-pair",
      store: false,
      include: ["reasoning.encrypted_content"],
      reasoning: { effort: "low" },
      tools: [{ type: "function", name: "read_file", parameters: TOOLS[0]!.input_schema }],
      input: "read a.txt"
    }
    const first = await call(`${gw.url}/v1/responses`, { body })
    expect(first.status, first.text).toBe(200)
    const reasoning = first.body.output.find((i: any) => i.type === "reasoning")
    expect(open(reasoning.encrypted_content)).toEqual({ issuer: expect.any(String), signature: expect.stringMatching(/^sig\.A\./) })
    const fc = first.body.output.find((i: any) => i.type === "function_call")
    const next = {
      ...body,
      input: [
        { role: "user", content: "read a.txt" },
        ...first.body.output,
        { type: "function_call_output", call_id: fc.call_id, output: "hello" }
      ]
    }

    a.next({ status: 503 })
    const moved = await call(`${gw.url}/v1/responses`, { body: next })
    expect(moved.status, moved.text).toBe(200)
    expect(b.violations).toEqual([])
    const atB = last(b, /responses$/)
    expect(atB.input.some((i: any) => i.type === "reasoning")).toBe(false)
    expect(atB.input.some((i: any) => i.type === "function_call")).toBe(true)

    await gw.resetResilience()
    const back = await call(`${gw.url}/v1/responses`, { body: next })
    expect(back.status, back.text).toBe(200)
    expect(a.violations).toEqual([])
    expect(last(a, /responses$/).input.find((i: any) => i.type === "reasoning").encrypted_content).toBe(
      open(reasoning.encrypted_content).signature
    )
  })
})

describe("Gemini thought signatures", () => {
  it("a chat client (translated, the signature in the tool call's id): the other account gets Google's bypass value, the issuer its own", async () => {
    a.next({ reasoning: { text: "need the file" }, toolCalls: [{ name: "read_file", arguments: '{"path":"a.txt"}' }] })
    const tools = [{ type: "function", function: { name: "read_file", parameters: TOOLS[0]!.input_schema } }]
    const first = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "gem-pair", tools, messages: [{ role: "user", content: "read a.txt" }], stream: true }
    })
    expect(first.status, first.text).toBe(200)
    const calls = events(first.text).flatMap((e) => e.choices?.[0]?.delta?.tool_calls ?? [])
    const id: string = calls.find((c: any) => c.id)!.id
    expect(id).toContain("__ts__")
    const next = {
      model: "gem-pair",
      tools,
      messages: [
        { role: "user", content: "read a.txt" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id, type: "function", function: { name: "read_file", arguments: '{"path":"a.txt"}' } }]
        },
        { role: "tool", tool_call_id: id, content: "hello" }
      ]
    }
    a.next({ status: 503 })
    const moved = await call(`${gw.url}/v1/chat/completions`, { body: next })
    expect(moved.status, moved.text).toBe(200)
    expect(b.violations).toEqual([])
    const callAtB = last(b, /GenerateContent$/).contents[1].parts.find((p: any) => p.functionCall)
    expect(callAtB.thoughtSignature).toBe("skip_thought_signature_validator")

    await gw.resetResilience()
    const back = await call(`${gw.url}/v1/chat/completions`, { body: next })
    expect(back.status, back.text).toBe(200)
    expect(a.violations).toEqual([])
    expect(last(a, /GenerateContent$/).contents[1].parts.find((p: any) => p.functionCall).thoughtSignature).toMatch(/^sig\.A\.\d+$/)
  })

  it("a Gemini client (passed through): sealed in the answer, the issuer's own sent back, the other account's dropped", async () => {
    a.next({ reasoning: { text: "need the file" }, toolCalls: [{ name: "read_file", arguments: '{"path":"a.txt"}' }] })
    const tools = [{ functionDeclarations: [{ name: "read_file", parametersJsonSchema: TOOLS[0]!.input_schema }] }]
    const first = await call(`${gw.url}/v1beta/models/gem-pair:generateContent`, {
      body: { tools, contents: [{ role: "user", parts: [{ text: "read a.txt" }] }] }
    })
    expect(first.status, first.text).toBe(200)
    const parts: Array<any> = first.body.candidates[0].content.parts
    const signed = parts.find((p) => p.thoughtSignature)
    // Still base64, as Google's SDKs read the field.
    expect(Buffer.from(signed.thoughtSignature, "base64").toString("base64")).toBe(signed.thoughtSignature)
    expect(open(signed.thoughtSignature).signature).toMatch(/^sig\.A\./)
    const next = {
      tools,
      contents: [
        { role: "user", parts: [{ text: "read a.txt" }] },
        { role: "model", parts },
        { role: "user", parts: [{ functionResponse: { name: "read_file", response: { content: "hello" } } }] }
      ]
    }
    a.next({ status: 503 })
    const moved = await call(`${gw.url}/v1beta/models/gem-pair:generateContent`, { body: next })
    expect(moved.status, moved.text).toBe(200)
    expect(b.violations).toEqual([])
    expect(JSON.stringify(last(b, /GenerateContent$/))).not.toContain("sig.A.")

    await gw.resetResilience()
    const back = await call(`${gw.url}/v1beta/models/gem-pair:generateContent`, { body: next })
    expect(back.status, back.text).toBe(200)
    expect(a.violations).toEqual([])
    expect(JSON.stringify(last(a, /GenerateContent$/))).toContain(open(signed.thoughtSignature).signature)
  })
})

describe("across families", () => {
  it("a Gemini signature is never sent to Anthropic as a thinking signature: the conversation moves on, thinking off for the turn", async () => {
    a.next({ reasoning: { text: "gemini thinks" }, toolCalls: [{ name: "read_file", arguments: '{"path":"a.txt"}' }] })
    const first = await call(`${gw.url}/v1/messages`, {
      body: { model: "cross", max_tokens: 4096, thinking: THINKING, tools: TOOLS, messages: [{ role: "user", content: "read a.txt" }] }
    })
    expect(first.status, first.text).toBe(200)
    const content: Array<any> = first.body.content
    // Gemini signed the call, not the thought: the client holds an unsigned thinking block and a sealed signature in the call's id.
    expect(content[0]).toMatchObject({ type: "thinking", thinking: "gemini thinks", signature: "" })
    const tool = content.find((c) => c.type === "tool_use")
    a.next({ status: 503 })
    const moved = await call(`${gw.url}/v1/messages`, {
      body: {
        model: "cross",
        max_tokens: 4096,
        thinking: THINKING,
        tools: TOOLS,
        messages: [
          { role: "user", content: "read a.txt" },
          { role: "assistant", content },
          { role: "user", content: [{ type: "tool_result", tool_use_id: tool.id, content: "hello" }] }
        ]
      }
    })
    expect(moved.status, moved.text).toBe(200)
    expect(b.violations).toEqual([])
    const atB = last(b, /messages$/)
    expect(JSON.stringify(atB)).not.toContain("sig.A.")
    expect(atB.thinking).toEqual({ type: "disabled" })
  })
})
