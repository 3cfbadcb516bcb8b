import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Reasoning budgets sent to a messages (Anthropic) upstream leave room for the answer, and streamed
 * legacy completions report their usage (to the client when asked, and to the usage row).
 */
const ADMIN = "gwk_reason_admin_key_0123456789abcdefg"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (
      await add({
        provider: "anthropic",
        name: "anth",
        apiKey: "sk-ant",
        baseUrl: up.baseUrl("anthropic"),
        defaultModel: "claude-sonnet-4-5"
      })
    ).status
  ).toBe(201)
  expect(
    (await add({ provider: "gemini", name: "gem", apiKey: "gk", baseUrl: up.baseUrl("gemini"), defaultModel: "gemini-2.5-pro" })).status
  ).toBe(201)
  expect(
    (await add({ provider: "openai", name: "oai", apiKey: "sk-oai", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" })).status
  ).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})

/** The body of the last request the messages upstream got. */
const lastMessages = () =>
  up
    .requestsOf("anthropic")
    .filter((r) => r.path.endsWith("/messages"))
    .at(-1)!.body as Record<string, any>

/** Anthropic's rules for extended thinking, plus room for the answer. */
const expectRoomForAnswer = (body: Record<string, any>) => {
  expect(body["thinking"]?.type).toBe("enabled")
  const budget = body["thinking"].budget_tokens as number
  expect(budget).toBeGreaterThanOrEqual(1024)
  expect(body["max_tokens"] - budget).toBeGreaterThanOrEqual(1024)
}

describe("reasoning effort to a messages upstream", () => {
  const user = [{ role: "user", content: "think" }]
  const chat = (extra: Record<string, unknown>) =>
    call(`${gw.url}/v1/chat/completions`, { body: { model: "anth/claude-sonnet-4-5", messages: user, ...extra } })

  it("chat reasoning_effort high without max_tokens: the full high budget and the answer allowance on top, within Opus 4's 32000", async () => {
    expect((await chat({ reasoning_effort: "high" })).status).toBe(200)
    const body = lastMessages()
    expectRoomForAnswer(body)
    expect(body["thinking"].budget_tokens).toBe(24_000)
    expect(body["max_tokens"]).toBe(32_000)
  })

  it("each effort level maps to its table budget", async () => {
    const got: Record<string, number> = {}
    for (const effort of ["minimal", "low", "medium", "high"]) {
      expect((await chat({ reasoning_effort: effort })).status).toBe(200)
      const body = lastMessages()
      expectRoomForAnswer(body)
      got[effort] = body["thinking"].budget_tokens
    }
    expect(got["minimal"]).toBe(1024)
    expect(got["low"]).toBe(2048)
    expect(got["medium"]).toBe(8192)
  })

  it("a client max_completion_tokens is kept and the budget fits below it with room for the answer", async () => {
    expect((await chat({ reasoning_effort: "high", max_completion_tokens: 8192 })).status).toBe(200)
    const body = lastMessages()
    expect(body["max_tokens"]).toBe(8192)
    expectRoomForAnswer(body)
    expect(body["thinking"].budget_tokens).toBe(6144)
  })

  it("a max_tokens too small for a budget and an answer drops thinking rather than send an invalid request", async () => {
    expect((await chat({ reasoning_effort: "high", max_tokens: 1500 })).status).toBe(200)
    const body = lastMessages()
    expect(body["max_tokens"]).toBe(1500)
    expect(body["thinking"]).toBeUndefined()
  })

  it("responses reasoning.effort", async () => {
    const res = await call(`${gw.url}/v1/responses`, {
      body: { model: "anth/claude-sonnet-4-5", input: "think", reasoning: { effort: "high" } }
    })
    expect(res.status).toBe(200)
    const body = lastMessages()
    expectRoomForAnswer(body)
    expect(body["thinking"].budget_tokens).toBe(24_000)
    const capped = await call(`${gw.url}/v1/responses`, {
      body: { model: "anth/claude-sonnet-4-5", input: "think", reasoning: { effort: "medium" }, max_output_tokens: 4096 }
    })
    expect(capped.status).toBe(200)
    expect(lastMessages()["max_tokens"]).toBe(4096)
    expectRoomForAnswer(lastMessages())
  })

  it("generative-language thinkingLevel and thinkingBudget", async () => {
    const gen = (generationConfig: Record<string, unknown>) =>
      call(`${gw.url}/v1beta/models/anth/claude-sonnet-4-5:generateContent`, {
        body: { contents: [{ role: "user", parts: [{ text: "think" }] }], generationConfig }
      })
    expect((await gen({ thinkingConfig: { thinkingLevel: "high" } })).status).toBe(200)
    expectRoomForAnswer(lastMessages())
    expect(lastMessages()["thinking"].budget_tokens).toBe(24_000)
    // An explicit budget is the client's own: kept, with the answer allowance on top.
    expect((await gen({ thinkingConfig: { thinkingBudget: 10_000 } })).status).toBe(200)
    expect(lastMessages()["thinking"].budget_tokens).toBe(10_000)
    expect(lastMessages()["max_tokens"]).toBe(18_000)
    expectRoomForAnswer(lastMessages())
    // Dynamic thinking (-1) and a small maxOutputTokens: still room for the answer.
    expect((await gen({ thinkingConfig: { thinkingBudget: -1 }, maxOutputTokens: 4096 })).status).toBe(200)
    expect(lastMessages()["max_tokens"]).toBe(4096)
    expectRoomForAnswer(lastMessages())
  })
})

describe("reasoning effort to a generative-language upstream", () => {
  // A non-streamed request goes upstream as streamGenerateContent (its answer collected).
  const lastGenerate = () =>
    up
      .requestsOf("gemini")
      .filter((r) => /:(stream)?generateContent$/i.test(r.path))
      .at(-1)!.body as Record<string, any>
  const chat = (extra: Record<string, unknown>) =>
    call(`${gw.url}/v1/chat/completions`, {
      body: { model: "gem/gemini-2.5-pro", messages: [{ role: "user", content: "think" }], ...extra }
    })

  it("a level's budget leaves room for the answer under the client's limit (thoughts count toward maxOutputTokens)", async () => {
    expect((await chat({ reasoning_effort: "high", max_tokens: 8192 })).status).toBe(200)
    expect(lastGenerate()["generationConfig"]).toMatchObject({ maxOutputTokens: 8192, thinkingConfig: { thinkingBudget: 6144 } })
  })

  it("without a client limit the level's budget is sent whole", async () => {
    expect((await chat({ reasoning_effort: "high" })).status).toBe(200)
    expect(lastGenerate()["generationConfig"]["thinkingConfig"]["thinkingBudget"]).toBe(24_576)
    expect(lastGenerate()["generationConfig"]["maxOutputTokens"]).toBeUndefined()
  })
})

describe("streamed legacy completions", () => {
  const flush = () => gw.usageWritten()
  const rowOf = async (requestId: string) => {
    await flush()
    return queryDb(gw.dataDir, "SELECT tokens_in, tokens_out, stream, endpoint FROM usage WHERE request_id = ?", requestId)[0]
  }
  const stream = async (extra: Record<string, unknown>, model = "oai/gpt-4o") => {
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: "2+2?", stream: true, ...extra })
    })
    expect(res.status).toBe(200)
    const text = await res.text()
    const requestId = res.headers.get("x-gateway-request-id")!
    const chunks = text
      .split("\n\n")
      .map((e) => e.replace(/^data: /, "").trim())
      .filter((d) => d && d !== "[DONE]")
      .map((d) => JSON.parse(d) as Record<string, any>)
    return { chunks, requestId }
  }

  it("record their usage and send a final usage chunk when stream_options.include_usage is set", async () => {
    const { chunks, requestId } = await stream({ stream_options: { include_usage: true } })
    expect(chunks.map((c) => c["choices"]?.[0]?.text ?? "").join("")).toBe("Hello from upstream")
    expect(await rowOf(requestId)).toMatchObject({ tokens_in: 11, tokens_out: 7, stream: 1 })
    const last = chunks.at(-1)!
    expect(last["object"]).toBe("text_completion")
    expect(last["choices"]).toEqual([])
    expect(last["usage"]).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 })
  })

  it("record their usage without the client asking, and send no usage chunk then", async () => {
    const { chunks, requestId } = await stream({})
    expect(chunks.some((c) => c["usage"])).toBe(false)
    expect(await rowOf(requestId)).toMatchObject({ tokens_in: 11, tokens_out: 7, stream: 1 })
  })

  it("record their usage from a messages upstream too", async () => {
    const { chunks, requestId } = await stream({ stream_options: { include_usage: true } }, "anth/claude-sonnet-4-5")
    expect(await rowOf(requestId)).toMatchObject({ tokens_in: 11, tokens_out: 7, stream: 1 })
    expect(chunks.at(-1)!["usage"]).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 })
  })
})
