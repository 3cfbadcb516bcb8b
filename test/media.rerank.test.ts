import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeRerank, rerankTokens } from "./support/fakeRerank.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Rerank, moderation and the model lists (docs/media.md, "Rerank, moderation and model lists"),
 * against fake Cohere, Jina, Voyage, Together, OpenAI and Mistral upstreams on loopback that
 * check the wire shape they get. Rerank is called over raw HTTP (the openai SDK has no rerank),
 * moderation through the openai SDK's `moderations.create`.
 */
const ADMIN = "gwk_media_rerank_admin_key_0123456789ab"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeRerank
/** Answers 503 to everything: the first target of the fallback combo. */
let down: FakeRerank
let openai: OpenAI

const rerank = (body: unknown) => call(`${gw.url}/v1/rerank`, { body })

const usageRow = async (requestId: string | null) => {
  await gw.usageWritten()
  const [row] = queryDb(
    gw.dataDir,
    "SELECT endpoint, status, provider, model, tokens_in, cost_usd, fallback_attempts, connection_id FROM usage WHERE request_id = ?",
    requestId
  )
  return row as Record<string, any> | undefined
}
const connectionId = async (name: string): Promise<string> => (await call(`${gw.url}/api/providers/${name}`, { headers: admin })).body.id

/** The headers every priced media answer carries. */
const expectCostHeaders = (headers: Headers, cost: string, model: string, provider: string, tokensIn = "0") => {
  expect(headers.get("x-gateway-response-cost")).toBe(cost)
  expect(headers.get("x-gateway-response-cost")).toMatch(/^\d+\.\d{10}$/)
  expect(headers.get("x-gateway-tokens-in")).toBe(tokensIn)
  expect(headers.get("x-gateway-tokens-out")).toBe("0")
  expect(headers.get("x-gateway-model")).toBe(model)
  expect(headers.get("x-gateway-provider")).toBe(provider)
  expect(headers.get("x-gateway-cache-hit")).toBe("false")
  expect(Number(headers.get("x-gateway-latency-ms"))).toBeGreaterThanOrEqual(0)
}

const DOCS = [
  "Carson City is the capital of Nevada.",
  "Washington, D.C. is the capital of the United States.",
  "Capital punishment exists in many states."
]
const QUERY = "What is the capital of the United States?"

beforeAll(async () => {
  up = await FakeRerank.start()
  down = await FakeRerank.start()
  down.always(503)
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body: { apiKey: up.key, ...body }, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "cohere", name: "co", baseUrl: up.baseUrl("cohere") })
  await add({ provider: "jina", name: "jn", baseUrl: up.baseUrl("jina") })
  await add({ provider: "voyage", name: "vo", baseUrl: up.baseUrl("voyage") })
  await add({ provider: "together", name: "tg", baseUrl: up.baseUrl("compat"), models: ["Salesforce/Llama-Rank-V1"] })
  await add({ provider: "openai", name: "oai", baseUrl: up.baseUrl("openai") })
  await add({ provider: "mistral", name: "mis", baseUrl: up.baseUrl("mistral") })
  await add({ provider: "elevenlabs", name: "el", baseUrl: up.origin })
  // Fallback: the first target's Jina answers 503, the second is Voyage.
  await add({ provider: "jina", name: "jn-down", baseUrl: down.baseUrl("jina"), apiKey: down.key })
  const combo = async (name: string, targets: Array<string>) => {
    const res = await call(`${gw.url}/api/combos`, {
      body: { name, strategy: "priority", targets: targets.map((model) => ({ model })) },
      headers: admin
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await combo("reranking", ["jn-down/jina-reranker-v2-base-multilingual", "vo/rerank-2.5"])
  await combo("guard", ["mis/mistral-moderation-latest", "oai/omni-moderation-latest"])
  await combo("vectors", ["oai/text-embedding-3-small"])
  openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "sk-anything", maxRetries: 0 })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  await down?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
})

describe("POST /v1/rerank", () => {
  it("Cohere: v2 shape upstream (top_n, no return_documents); the gateway attaches the documents; priced per search unit", async () => {
    const res = await rerank({
      model: "co/rerank-v3.5",
      query: QUERY,
      documents: [DOCS[0], { text: DOCS[1] }, DOCS[2]],
      top_n: 2,
      return_documents: true
    })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("cohere")!
    expect(sent.path).toBe("/cohere/v2/rerank")
    expect(sent.headers.authorization).toBe(`Bearer ${up.key}`)
    // Objects with a text field go upstream as strings; v2 has no return_documents.
    expect(sent.body).toEqual({ model: "rerank-v3.5", query: QUERY, documents: DOCS, top_n: 2 })
    expect(res.body).toEqual({
      id: expect.any(String),
      model: "rerank-v3.5",
      results: [
        { index: 1, relevance_score: expect.any(Number), document: { text: DOCS[1] } },
        { index: expect.any(Number), relevance_score: expect.any(Number), document: { text: expect.any(String) } }
      ],
      usage: { search_units: 1 }
    })
    const [first, second] = res.body.results
    expect(first.relevance_score).toBeGreaterThan(second.relevance_score)
    expect(second.document.text).toBe(DOCS[second.index])
    // $2 per 1000 searches; one search = one query with up to 100 documents.
    expectCostHeaders(res.headers, "0.0020000000", "rerank-v3.5", "cohere")
    expect(await usageRow(res.headers.get("x-gateway-request-id"))).toMatchObject({
      endpoint: "rerank",
      status: 200,
      provider: "cohere",
      model: "rerank-v3.5",
      tokens_in: null,
      cost_usd: 0.002,
      fallback_attempts: 0
    })

    const many = await rerank({
      model: "co/rerank-v3.5",
      query: "capital",
      documents: Array.from({ length: 150 }, (_, i) => `document ${i} about a capital`)
    })
    expect(many.status, many.text).toBe(200)
    expect(many.body.results).toHaveLength(150)
    expect(many.body.usage).toEqual({ search_units: 2 })
    expect(many.body.results[0]).not.toHaveProperty("document")
    expectCostHeaders(many.headers, "0.0040000000", "rerank-v3.5", "cohere")
  })

  it("Jina: top_n and return_documents false upstream; priced per token (an /api/pricing override: the catalog has no Jina price)", async () => {
    const set = await call(`${gw.url}/api/pricing`, {
      method: "PUT",
      body: { provider: "jina", model: "jina-reranker-v2-base-multilingual", input: 0.02 },
      headers: admin
    })
    expect(set.status, set.text).toBe(200)
    try {
      const res = await rerank({ model: "jn/jina-reranker-v2-base-multilingual", query: QUERY, documents: DOCS, top_n: 3 })
      expect(res.status, res.text).toBe(200)
      const sent = up.last("jina")!
      expect(sent.path).toBe("/jina/v1/rerank")
      expect(sent.body).toEqual({
        model: "jina-reranker-v2-base-multilingual",
        query: QUERY,
        documents: DOCS,
        top_n: 3,
        return_documents: false
      })
      const tokens = rerankTokens(QUERY, DOCS)
      expect(res.body.model).toBe("jina-reranker-v2-base-multilingual")
      expect(res.body.id).toMatch(/^rerank-/)
      expect(res.body.usage).toEqual({ total_tokens: tokens })
      expect(res.body.results.map((r: any) => r.index)).toEqual([1, 0, 2])
      for (const r of res.body.results) expect(Object.keys(r).sort()).toEqual(["index", "relevance_score"])
      const cost = (tokens * 0.02) / 1e6
      expectCostHeaders(res.headers, cost.toFixed(10), "jina-reranker-v2-base-multilingual", "jina", String(tokens))
      const row = await usageRow(res.headers.get("x-gateway-request-id"))
      expect(row).toMatchObject({ endpoint: "rerank", status: 200, provider: "jina", tokens_in: tokens })
      expect(row!.cost_usd).toBeCloseTo(cost, 12)
    } finally {
      await call(`${gw.url}/api/pricing`, {
        method: "DELETE",
        body: { provider: "jina", model: "jina-reranker-v2-base-multilingual" },
        headers: admin
      })
    }
  })

  it("Voyage: top_k upstream and data[] back, answered as results[]; priced per token at the catalog's $0.05/1M", async () => {
    const res = await rerank({ model: "vo/rerank-2.5", query: QUERY, documents: DOCS, top_n: 1, return_documents: true })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("voyage")!
    expect(sent.path).toBe("/voyage/v1/rerank")
    expect(sent.body).toEqual({ model: "rerank-2.5", query: QUERY, documents: DOCS, top_k: 1, return_documents: false })
    const tokens = rerankTokens(QUERY, DOCS)
    expect(res.body).toEqual({
      id: expect.stringMatching(/^rerank-/),
      model: "rerank-2.5",
      results: [{ index: 1, relevance_score: expect.any(Number), document: { text: DOCS[1] } }],
      usage: { total_tokens: tokens }
    })
    const cost = (tokens * 0.05) / 1e6
    expectCostHeaders(res.headers, cost.toFixed(10), "rerank-2.5", "voyage", String(tokens))
    const row = await usageRow(res.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "rerank", status: 200, provider: "voyage", model: "rerank-2.5", tokens_in: tokens })
    expect(row!.cost_usd).toBeCloseTo(cost, 12)
  })

  it("Together (and OpenAI-compatible servers): the Cohere v1 / Jina shape at {base}/rerank; an unpriced model costs 0.0000000000", async () => {
    const res = await rerank({ model: "tg/Salesforce/Llama-Rank-V1", query: QUERY, documents: DOCS, return_documents: true })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("compat")!
    expect(sent.path).toBe("/compat/v1/rerank")
    expect(sent.body).toEqual({ model: "Salesforce/Llama-Rank-V1", query: QUERY, documents: DOCS, return_documents: false })
    expect(res.body.results.map((r: any) => [r.index, r.document.text])).toEqual([
      [1, DOCS[1]],
      [0, DOCS[0]],
      [2, DOCS[2]]
    ])
    expect(res.body.usage).toEqual({ total_tokens: rerankTokens(QUERY, DOCS) })
    expectCostHeaders(res.headers, "0.0000000000", "Salesforce/Llama-Rank-V1", "together", String(rerankTokens(QUERY, DOCS)))
  })

  it("falls back to the combo's next target when the first answers 503: served by Voyage, one fallback in the header and the row", async () => {
    const before = down.seen.length
    const res = await rerank({ model: "reranking", query: QUERY, documents: DOCS, top_n: 2 })
    expect(res.status, res.text).toBe(200)
    expect(down.seen.length - before).toBe(1)
    expect(down.last("jina")!.body).toMatchObject({ top_n: 2 })
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(res.headers.get("x-gateway-provider")).toBe("voyage")
    expect(res.body.model).toBe("rerank-2.5")
    expect(res.body.results).toHaveLength(2)
    const row = await usageRow(res.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({
      endpoint: "rerank",
      status: 200,
      provider: "voyage",
      fallback_attempts: 1,
      connection_id: await connectionId("vo")
    })
  })

  it("an answer it cannot trust (an index outside the documents) is the target's failure: 502 naming the connection", async () => {
    up.answerOnce({ id: "x", results: [{ index: 7, relevance_score: 0.9 }], meta: { billed_units: { search_units: 1 } } })
    const res = await rerank({ model: "co/rerank-v3.5", query: QUERY, documents: DOCS })
    expect(res.status, res.text).toBe(502)
    expect(res.body.error.message).toContain("co:")
    expect(res.body.error.message).toContain("relevance_score")
    expect(res.headers.get("x-gateway-response-cost")).toBeNull()
    expect(await usageRow(res.headers.get("x-gateway-request-id"))).toMatchObject({ endpoint: "rerank", status: 502, cost_usd: 0 })
  })

  it("bad input is a 400 naming the field, and nothing goes upstream", async () => {
    const before = up.seen.length
    for (const [body, param, message] of [
      [{ model: "co/rerank-v3.5", query: QUERY, documents: "one document" }, "documents", /non-empty array/],
      [{ model: "co/rerank-v3.5", query: QUERY, documents: [] }, "documents", /non-empty array/],
      [{ model: "co/rerank-v3.5", query: QUERY, documents: ["a", 7] }, "documents[1]", /string or an object with a string text/],
      [{ model: "co/rerank-v3.5", query: "", documents: DOCS }, "query", /non-empty string/],
      [{ model: "co/rerank-v3.5", query: "   ", documents: DOCS }, "query", /non-empty string/],
      [{ model: "co/rerank-v3.5", query: QUERY, documents: DOCS, top_n: 0 }, "top_n", /positive integer/],
      [{ model: "co/rerank-v3.5", query: QUERY, documents: DOCS, top_n: 1.5 }, "top_n", /positive integer/],
      [{ model: "co/rerank-v3.5", query: QUERY, documents: DOCS, return_documents: "yes" }, "return_documents", /boolean/],
      [{ query: QUERY, documents: DOCS }, "model", /non-empty string/],
      [{ model: "co/rerank-v3.5", query: QUERY, documents: Array.from({ length: 1001 }, () => "d") }, "documents", /at most 1000/]
    ] as const) {
      const res = await rerank(body)
      expect(res.status, `${param}: ${res.text}`).toBe(400)
      expect(res.body.error).toMatchObject({ type: "invalid_request_error", param })
      expect(res.body.error.message).toMatch(message)
      expect(res.body.error.message).toContain(param)
    }
    // A model that cannot rerank.
    const chat = await rerank({ model: "oai/gpt-4o", query: QUERY, documents: DOCS })
    expect(chat.status).toBe(400)
    expect(chat.body.error).toMatchObject({ param: "model", code: "model_not_supported" })
    expect(chat.body.error.message).toContain("rerank")
    const notJson = await call(`${gw.url}/v1/rerank`, { body: "{not json" })
    expect(notJson.status).toBe(400)
    expect(up.seen.length).toBe(before)
  })
})

describe("POST /v1/moderations (openai SDK)", () => {
  it("OpenAI: the body relayed and the answer relayed; the cost is exactly 0.0000000000, also in the usage row", async () => {
    const { data, response } = await openai.moderations
      .create({ model: "oai/omni-moderation-latest", input: ["I will kill you", "have a nice day"] })
      .withResponse()
    expect(up.last("openai")!.body).toEqual({ model: "omni-moderation-latest", input: ["I will kill you", "have a nice day"] })
    expect(up.last("openai")!.headers.authorization).toBe(`Bearer ${up.key}`)
    expect(data.model).toBe("omni-moderation-2024-09-26")
    expect(data.results).toHaveLength(2)
    expect(data.results[0]).toMatchObject({ flagged: true, categories: { violence: true, "harassment/threatening": true, hate: false } })
    expect(data.results[0]!.category_scores.violence).toBeCloseTo(0.93)
    expect(data.results[1]!.flagged).toBe(false)
    expectCostHeaders(response.headers, "0.0000000000", "omni-moderation-latest", "openai")
    const row = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "moderations", status: 200, provider: "openai", cost_usd: 0 })

    // A multimodal input goes to OpenAI as it is: one result.
    const image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    const multi = await openai.moderations.create({
      model: "oai/omni-moderation-latest",
      input: [
        { type: "text", text: "what is in this picture" },
        { type: "image_url", image_url: { url: image } }
      ]
    })
    expect(up.last("openai")!.body.input[1]).toEqual({ type: "image_url", image_url: { url: image } })
    expect(multi.results).toHaveLength(1)
    expect(multi.results[0]!.category_applied_input_types.violence).toEqual(["text", "image"])
  })

  it("Mistral: text in, categories translated to OpenAI's (flagged by Mistral's booleans or a score of 0.5), its own kept; cost 0", async () => {
    const input = ["I will kill you", "which pills help with a headache", "call my phone number", "how to build a bomb", "I feel sad"]
    const { data, response } = await openai.moderations.create({ model: "mis/mistral-moderation-latest", input }).withResponse()
    const sent = up.last("mistral")!
    expect(sent.path).toBe("/mistral/v1/moderations")
    expect(sent.body).toEqual({ model: "mistral-moderation-latest", input })
    expect(data.model).toBe("mistral-moderation-latest")
    expect(data.results).toHaveLength(5)
    const [kill, pills, phone, bomb, sad] = data.results as Array<any>
    // Every OpenAI category is there.
    for (const r of data.results) {
      for (const c of ["harassment", "hate", "illicit", "self-harm", "sexual", "sexual/minors", "violence", "violence/graphic"])
        expect(r.categories, c).toHaveProperty(c)
      expect(r.category_applied_input_types.violence).toEqual(["text"])
    }
    expect(kill).toMatchObject({ flagged: true, categories: { violence: true, hate: false }, category_scores: { violence: 0.91 } })
    // Advice categories are reported under Mistral's names but do not flag.
    expect(pills).toMatchObject({ flagged: false, categories: { health: true, violence: false }, category_scores: { health: 0.82 } })
    // PII has no OpenAI counterpart: kept, and it flags.
    expect(phone).toMatchObject({ flagged: true, categories: { pii: true }, category_scores: { pii: 0.77 } })
    // Mistral said false, the score crosses 0.5: flagged as illicit.
    expect(bomb).toMatchObject({ flagged: true, categories: { illicit: true }, category_scores: { illicit: 0.55 } })
    expect(sad).toMatchObject({ flagged: false, categories: { "self-harm": false }, category_scores: { "self-harm": 0.45 } })
    for (const r of data.results) expect(r.categories).not.toHaveProperty("violence_and_threats")
    expectCostHeaders(response.headers, "0.0000000000", "mistral-moderation-latest", "mistral")
    expect(await usageRow(response.headers.get("x-gateway-request-id"))).toMatchObject({
      endpoint: "moderations",
      status: 200,
      provider: "mistral",
      cost_usd: 0
    })
  })

  it("Mistral reads text only: a multimodal text input is joined into one; an image skips Mistral (a 400 alone, the combo's OpenAI target in a combo)", async () => {
    const texts = await openai.moderations.create({
      model: "mis/mistral-moderation-latest",
      input: [
        { type: "text", text: "first part" },
        { type: "text", text: "second part" }
      ]
    })
    expect(up.last("mistral")!.body.input).toEqual(["first part\nsecond part"])
    expect(texts.results).toHaveLength(1)

    const mistralCalls = up.seen.filter((s) => s.family === "mistral").length
    const withImage = [
      { type: "text" as const, text: "look" },
      { type: "image_url" as const, image_url: { url: "https://example.com/cat.png" } }
    ]
    const alone = await call(`${gw.url}/v1/moderations`, { body: { model: "mis/mistral-moderation-latest", input: withImage } })
    expect(alone.status).toBe(400)
    expect(alone.body.error).toMatchObject({ param: "model", code: "model_not_supported" })
    expect(alone.body.error.message).toContain("moderation of images")

    const { data, response } = await openai.moderations.create({ model: "guard", input: withImage }).withResponse()
    expect(response.headers.get("x-gateway-provider")).toBe("openai")
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    expect(data.results).toHaveLength(1)
    expect(up.seen.filter((s) => s.family === "mistral").length).toBe(mistralCalls)
  })

  it("bad input is a 400 naming the field", async () => {
    const before = up.seen.length
    for (const [body, param] of [
      [{ model: "oai/omni-moderation-latest" }, "input"],
      [{ model: "oai/omni-moderation-latest", input: [] }, "input"],
      [{ model: "oai/omni-moderation-latest", input: 42 }, "input"],
      [{ model: "oai/omni-moderation-latest", input: ["ok", { type: "text", text: "mixed" }] }, "input[0]"],
      [{ model: "oai/omni-moderation-latest", input: [{ type: "image_url", image_url: {} }] }, "input[0]"],
      [{ model: "", input: "hi" }, "model"]
    ] as const) {
      const res = await call(`${gw.url}/v1/moderations`, { body })
      expect(res.status, `${param}: ${res.text}`).toBe(400)
      expect(res.body.error).toMatchObject({ type: "invalid_request_error", param })
      expect(res.body.error.message).toContain(param.replace(/\[\d\]$/, ""))
    }
    await expect(openai.moderations.create({ model: "oai/omni-moderation-latest", input: undefined as never })).rejects.toMatchObject({
      status: 400
    })
    expect(up.seen.length).toBe(before)
  })
})

describe("model lists", () => {
  it("GET /v1/embeddings lists the embedding models (and combos of them) in the /v1/models list shape", async () => {
    const res = await call(`${gw.url}/v1/embeddings`)
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ object: "list", has_more: false })
    const ids = res.body.data.map((m: any) => m.id)
    expect(ids).toEqual(
      expect.arrayContaining(["oai/text-embedding-3-small", "oai/text-embedding-3-large", "mis/mistral-embed", "vectors"])
    )
    expect(ids).not.toContain("oai/gpt-4o")
    expect(ids).not.toContain("co/rerank-v3.5")
    for (const m of res.body.data) expect(m).toMatchObject({ object: "model", kind: "embedding" })
    expect(res.body.data.find((m: any) => m.id === "oai/text-embedding-3-small")).toMatchObject({
      owned_by: "openai",
      context_length: 8191
    })
    expect(res.body.first_id).toBe(ids[0])
  })

  it("GET /v1/models lists every model with its kind: chat, embedding and the media models", async () => {
    const res = await call(`${gw.url}/v1/models`)
    expect(res.status).toBe(200)
    const kind = (id: string) => res.body.data.find((m: any) => m.id === id)?.kind
    expect(kind("oai/gpt-4o")).toBe("chat")
    expect(kind("oai/text-embedding-3-small")).toBe("embedding")
    expect(kind("oai/omni-moderation-latest")).toBe("moderation")
    expect(kind("mis/mistral-moderation-latest")).toBe("moderation")
    expect(kind("co/rerank-v3.5")).toBe("rerank")
    expect(kind("jn/jina-reranker-v3")).toBe("rerank")
    expect(kind("vo/rerank-2.5")).toBe("rerank")
    expect(kind("el/eleven_multilingual_v2")).toBe("speech")
    expect(kind("el/music_v1")).toBe("music")
    expect(kind("el/scribe_v1")).toBe("transcription")
    expect(kind("reranking")).toBe("rerank")
    expect(kind("guard")).toBe("moderation")
    // Chat entries keep their shape; media entries advertise no context window.
    expect(res.body.data.find((m: any) => m.id === "oai/gpt-4o")).toMatchObject({
      object: "model",
      owned_by: "openai",
      context_length: 128_000,
      max_output_tokens: 16_384
    })
    expect(res.body.data.find((m: any) => m.id === "co/rerank-v3.5")).not.toHaveProperty("context_length")
    // Media-only connections offer no chat model to auto routing: the auto ids' pools leave them out.
    const auto = await call(`${gw.url}/api/combos/auto`, { headers: admin })
    expect(auto.status, auto.text).toBe(200)
    expect(JSON.stringify(auto.body)).not.toMatch(/rerank-v3\.5|eleven_multilingual_v2|jina-reranker/)
  })
})
