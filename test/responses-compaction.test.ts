import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import * as Redacted from "effect/Redacted"
import { makeCipher, SecretDecryptError } from "../src/platform/store/Secrets.js"
import { makeResponsesCompaction } from "../src/inference/compaction/ResponsesCompaction.js"
import { type Family, FakeUpstream, type Recorded } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { connectWs } from "./support/wsClient.js"

/**
 * Codex's remote compaction through the gateway (docs/agents.md, "Codex compaction"), replayed
 * from the pinned Codex's recorded requests: the trigger form (0.169: a `/responses` input ending
 * with `compaction_trigger`) and the older `POST /responses/compact` (0.150). Every upstream family
 * gets exactly one sealed compaction item back, and the item goes upstream again as its summary.
 */
const ADMIN = "gwk_compaction_admin_key_0123456789ab"
const KEY = "gwk_compaction_client_key_0123456789a"
const SUMMARY = "SUMMARY-OF-THE-SESSION: goal echo TOOL_OK; files none; next: answer the user"

const CLI = path.resolve("test/fixtures/clients/cli")
const lines = (file: string) =>
  fs
    .readFileSync(path.join(CLI, file), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as { method: string; path: string; headers: Record<string, string>; body: any })
const v2 = lines("codex-exec-openai_base_url-compaction-trigger.requests.jsonl")
const v1 = lines("codex-0.150-exec-openai_base_url-responses-compact.requests.jsonl")
const TRIGGER = v2.find((r) => r.body?.input?.at?.(-1)?.type === "compaction_trigger")!
const AFTER = v2.find((r) => r.body?.input?.some?.((i: any) => i.type === "compaction"))!
const COMPACT = v1.find((r) => r.path.endsWith("/responses/compact"))!
const AFTER_V1 = v1.find((r) => r.path === "/v1/responses" && r.body?.input?.some?.((i: any) => i.type === "compaction"))!

/** The headers Codex sent (the gateway's key instead of its own). */
const headersOf = (r: { headers: Record<string, string> }) => {
  const h: Record<string, string> = {}
  for (const [k, v] of Object.entries(r.headers))
    if (!["host", "content-length", "connection", "accept-encoding", "authorization"].includes(k)) h[k] = String(v)
  return { ...h, authorization: `Bearer ${KEY}` }
}

const MODELS: ReadonlyArray<{ family: Family; model: string }> = [
  { family: "openai-chat", model: "up-chat/m-chat" },
  { family: "anthropic", model: "up-anth/claude-x" },
  { family: "openai-responses", model: "up-resp/m-resp" },
  { family: "gemini", model: "up-gem/gemini-x" },
  { family: "ollama", model: "up-oll/llama-x" }
]

let gw: TestGateway
let up: FakeUpstream

const asked = (r: Recorded) => JSON.stringify(r.body).includes("handoff summary")

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.script((r) => (asked(r) ? { content: SUMMARY, chunks: 2 } : { content: "DONE_AFTER_COMPACT" }))
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const connections: ReadonlyArray<{ family: Family; connection: Record<string, unknown> }> = [
    { family: "openai-chat", connection: { provider: "openai-compatible", name: "up-chat", models: ["m-chat"] } },
    { family: "anthropic", connection: { provider: "anthropic", name: "up-anth", apiKey: "sk-ant-upstream", models: ["claude-x"] } },
    { family: "gemini", connection: { provider: "gemini", name: "up-gem", apiKey: "gemini-upstream", models: ["gemini-x"] } },
    { family: "ollama", connection: { provider: "ollama", name: "up-oll", models: ["llama-x"] } },
    {
      family: "openai-responses",
      connection: { provider: "openai-compatible", name: "up-resp", upstreamFormat: "openai-responses", models: ["m-resp"] }
    },
    {
      family: "openai-responses",
      connection: {
        provider: "openai",
        name: "up-oai",
        apiKey: "sk-openai-upstream",
        models: ["gpt-up"],
        compaction: "upstream",
        timeouts: { nonStreamed: "whole" }
      }
    }
  ]
  for (const { family, connection } of connections) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { ...connection, baseUrl: up.baseUrl(family) },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

/** The events of an SSE answer. */
const events = (text: string): Array<any> =>
  text
    .split("\n\n")
    .map((block) => block.split("\n").find((l) => l.startsWith("data: ")))
    .filter((l): l is string => l !== undefined)
    .map((l) => JSON.parse(l.slice(6)))

const post = (p: string, body: unknown, headers = headersOf(TRIGGER)) =>
  call(`${gw.url}${p}`, { body, headers: { ...headers, "content-type": "application/json" } })

/** The trigger request replayed for `model`: its one compaction item. */
const compactWith = async (model: string, stream = true) => {
  const res = await post("/v1/responses", { ...TRIGGER.body, model, stream })
  expect(res.status, res.text.slice(0, 600)).toBe(200)
  if (!stream) {
    expect(res.body.output).toHaveLength(1)
    return res.body.output[0]
  }
  const evs = events(res.text)
  const done = evs.filter((e) => e.type === "response.output_item.done")
  expect(done).toHaveLength(1)
  const completed = evs.find((e) => e.type === "response.completed")
  expect(completed.response.output).toHaveLength(1)
  expect(completed.response.output[0]).toEqual(done[0].item)
  return done[0].item
}

/** A follow-up request carrying `item` instead of the one Codex was given when recorded. */
const withItem = (request: { body: any }, item: unknown, model: string) => ({
  ...request.body,
  model,
  input: request.body.input.map((i: any) => (i.type === "compaction" ? item : i))
})

describe("Codex compaction, the trigger form (0.169), on every upstream family", () => {
  for (const { family, model } of MODELS) {
    it(`${family}: exactly one compaction item, sealed, and the follow-up reaches the upstream with the summary`, async () => {
      const before = up.requestsOf(family).length
      const item = await compactWith(model)
      expect(item.type).toBe("compaction")
      expect(item.encrypted_content).toMatch(/^gwcmp1:v1:/)
      // Sealed: the summary cannot be read from the item.
      expect(item.encrypted_content).not.toContain("SUMMARY")
      const summaryCall = up.requestsOf(family).slice(before)
      expect(summaryCall).toHaveLength(1)
      expect(asked(summaryCall[0]!)).toBe(true)
      expect(JSON.stringify(summaryCall[0]!.body)).not.toContain("compaction_trigger")

      const res = await post("/v1/responses", withItem(AFTER, item, model), headersOf(AFTER))
      expect(res.status, res.text.slice(0, 600)).toBe(200)
      expect(res.text).toContain("DONE_AFTER_COMPACT")
      const sent = up.requestsOf(family).at(-1)!
      const text = JSON.stringify(sent.body)
      expect(text).toContain(SUMMARY)
      expect(text).not.toContain("gwcmp1:")
    })
  }

  it("answers a non-streamed trigger with the item in a whole response", async () => {
    const item = await compactWith("up-chat/m-chat", false)
    expect(item).toMatchObject({ type: "compaction", encrypted_content: expect.stringMatching(/^gwcmp1:/) })
  })

  it("the item moves the conversation to another family: made by Anthropic, read by a chat upstream", async () => {
    const item = await compactWith("up-anth/claude-x")
    const res = await post("/v1/responses", withItem(AFTER, item, "up-chat/m-chat"), headersOf(AFTER))
    expect(res.status).toBe(200)
    expect(JSON.stringify(up.requestsOf("openai-chat").at(-1)!.body)).toContain(SUMMARY)
  })

  it("an altered item or one sealed under another storage key is a 400 naming the item, never sent upstream", async () => {
    const item = await compactWith("up-chat/m-chat")
    const tampered = { ...item, encrypted_content: item.encrypted_content.slice(0, -6) + "AAAAAA" }
    const foreign = {
      ...item,
      encrypted_content: `gwcmp1:${makeCipher(crypto.randomBytes(32)).encrypt(JSON.stringify({ v: 1, summary: "x", model: "m", at: 1 }))}`
    }
    for (const bad of [tampered, foreign]) {
      const before = up.requests.length
      const res = await post("/v1/responses", withItem(AFTER, bad, "up-chat/m-chat"), headersOf(AFTER))
      expect(res.status).toBe(400)
      expect(res.body.error.code).toBe("invalid_compaction_item")
      expect(res.body.error.message).toContain("another storage key")
      expect(res.body.error.param).toMatch(/^input\.\d+\.encrypted_content$/)
      expect(up.requests.length).toBe(before)
    }
  })
})

describe("Codex compaction, POST /responses/compact (0.150)", () => {
  for (const { family, model } of MODELS) {
    it(`${family}: the user messages, then exactly one compaction item; the follow-up is expanded`, async () => {
      const res = await post("/v1/responses/compact", { ...COMPACT.body, model }, headersOf(COMPACT))
      expect(res.status, res.text.slice(0, 600)).toBe(200)
      expect(res.body.object).toBe("response.compaction")
      const compactions = res.body.output.filter((i: any) => i.type === "compaction")
      expect(compactions).toHaveLength(1)
      expect(res.body.output.at(-1)).toEqual(compactions[0])
      for (const i of res.body.output.slice(0, -1)) expect(i).toMatchObject({ type: "message", role: "user" })
      const after = await post("/v1/responses", withItem(AFTER_V1, compactions[0], model), headersOf(AFTER_V1))
      expect(after.status, after.text.slice(0, 600)).toBe(200)
      expect(JSON.stringify(up.requestsOf(family).at(-1)!.body)).toContain(SUMMARY)
    })
  }

  it("answers on /responses/compact and /api/v1/responses/compact too", async () => {
    for (const p of ["/responses/compact", "/api/v1/responses/compact"]) {
      const res = await post(p, { ...COMPACT.body, model: "up-chat/m-chat" }, headersOf(COMPACT))
      expect(res.status, res.text.slice(0, 300)).toBe(200)
      expect(res.body.output.filter((i: any) => i.type === "compaction")).toHaveLength(1)
    }
  })

  it("a body without a model is a 400 naming it", async () => {
    const res = await post("/v1/responses/compact", { input: [] }, headersOf(COMPACT))
    expect(res.status).toBe(400)
    expect(res.body.error.param).toBe("model")
  })
})

/** A body without what only OpenAI's own server takes (the fake Responses server is strict about it). */
const plain = (body: any) => ({
  ...body,
  client_metadata: undefined,
  tools: body.tools.filter((t: any) => t.type !== "namespace"),
  input: body.input.map(({ internal_chat_message_metadata_passthrough: _m, ...i }: any) => i)
})

describe('compaction: "upstream" on an OpenAI connection', () => {
  it("passes the trigger through, and binds the upstream's item to the connection that issued it", async () => {
    const before = up.requestsOf("openai-responses").length
    up.next({
      body: {
        id: "resp_up_1",
        object: "response",
        created_at: 1,
        status: "completed",
        model: "gpt-up",
        output: [{ type: "compaction", id: "cmp_up_1", encrypted_content: "OPENAI-OPAQUE-COMPACTION" }],
        usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12 }
      }
    })
    const res = await post("/v1/responses", { ...plain(TRIGGER.body), model: "up-oai/gpt-up", stream: false })
    expect(res.status, res.text.slice(0, 600)).toBe(200)
    const sent = up.requestsOf("openai-responses").slice(before)
    expect(sent).toHaveLength(1)
    expect(sent[0]!.body.input.at(-1)).toEqual({ type: "compaction_trigger" })
    const item = res.body.output[0]
    expect(item.type).toBe("compaction")
    // Sealed with its issuer, as reasoning state is.
    expect(item.encrypted_content).not.toBe("OPENAI-OPAQUE-COMPACTION")
    expect(item.encrypted_content).not.toMatch(/^gwcmp1:/)

    // Back to the same connection: as issued.
    const again = await post("/v1/responses", plain(withItem(AFTER, item, "up-oai/gpt-up")), headersOf(AFTER))
    expect(again.status, again.text.slice(0, 600)).toBe(200)
    const back = up.requestsOf("openai-responses").at(-1)!
    expect(back.body.input.find((i: any) => i.type === "compaction")?.encrypted_content).toBe("OPENAI-OPAQUE-COMPACTION")
    // To another Responses server: dropped, never shown to it.
    await post("/v1/responses", withItem(AFTER, item, "up-resp/m-resp"), headersOf(AFTER))
    expect(JSON.stringify(up.requestsOf("openai-responses").at(-1)!.body)).not.toContain("compaction")
  })

  it("a gateway item is never sent to the OpenAI connection: it goes as its summary", async () => {
    const item = await compactWith("up-chat/m-chat")
    const res = await post("/v1/responses", plain(withItem(AFTER, item, "up-oai/gpt-up")), headersOf(AFTER))
    expect(res.status, res.text.slice(0, 600)).toBe(200)
    const body = up.requestsOf("openai-responses").at(-1)!.body
    expect(body.input.some((i: any) => i.type === "compaction")).toBe(false)
    expect(JSON.stringify(body)).toContain(SUMMARY)
  })
})

describe('compaction: "upstream" and POST /responses/compact', () => {
  it("passes the request to the connection's own /responses/compact and seals its item with the connection", async () => {
    const got: Array<{ path: string; body: any }> = []
    const server = http.createServer((req, res) => {
      let text = ""
      req.on("data", (c) => (text += c))
      req.on("end", () => {
        got.push({ path: req.url ?? "", body: JSON.parse(text) })
        res.writeHead(200, { "content-type": "application/json" })
        res.end(
          JSON.stringify({
            id: "cmp_resp_1",
            object: "response.compaction",
            created_at: 1,
            output: [
              { type: "message", role: "user", content: [{ type: "input_text", text: "run echo TOOL_OK" }] },
              { type: "compaction", id: "cmp_1", encrypted_content: "OPENAI-OWN-COMPACTION" }
            ],
            usage: { input_tokens: 100, output_tokens: 10, total_tokens: 110 }
          })
        )
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    try {
      const port = (server.address() as AddressInfo).port
      const made = await call(`${gw.url}/api/providers`, {
        body: {
          provider: "openai",
          name: "up-oai-compact",
          apiKey: "sk-openai-upstream",
          baseUrl: `http://127.0.0.1:${port}/v1`,
          models: ["gpt-compact"],
          compaction: "upstream"
        },
        headers: { authorization: `Bearer ${ADMIN}` }
      })
      expect(made.status, made.text).toBe(201)
      const res = await post("/v1/responses/compact", { ...COMPACT.body, model: "up-oai-compact/gpt-compact" }, headersOf(COMPACT))
      expect(res.status, res.text.slice(0, 600)).toBe(200)
      expect(got).toHaveLength(1)
      expect(got[0]!.path).toBe("/v1/responses/compact")
      expect(got[0]!.body.model).toBe("gpt-compact")
      expect(got[0]!.body.input).toEqual(COMPACT.body.input)
      const item = res.body.output.at(-1)
      expect(item.type).toBe("compaction")
      expect(item.encrypted_content).not.toBe("OPENAI-OWN-COMPACTION")
      expect(item.encrypted_content).not.toMatch(/^gwcmp1:/)
    } finally {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})

describe("the connection setting", () => {
  it("is listed, refused when unknown, and null hands compaction back to the gateway", async () => {
    const admin = { authorization: `Bearer ${ADMIN}` }
    const list = await call(`${gw.url}/api/providers`, { headers: admin })
    const oai = list.body.connections.find((c: any) => c.name === "up-oai")
    expect(oai.compaction).toBe("upstream")
    const bad = await call(`${gw.url}/api/providers/${oai.id}`, { method: "PUT", body: { compaction: "sometimes" }, headers: admin })
    expect(bad.status).toBe(400)
    expect(bad.text).toContain("compaction")
    const off = await call(`${gw.url}/api/providers/${oai.id}`, { method: "PUT", body: { compaction: null }, headers: admin })
    expect(off.status, off.text).toBe(200)
    expect(off.body.compaction).toBeNull()
    try {
      const res = await post("/v1/responses", { ...plain(TRIGGER.body), model: "up-oai/gpt-up", stream: false })
      expect(res.status, res.text.slice(0, 600)).toBe(200)
      expect(res.body.output).toHaveLength(1)
      expect(res.body.output[0].encrypted_content).toMatch(/^gwcmp1:/)
    } finally {
      const on = await call(`${gw.url}/api/providers/${oai.id}`, { method: "PUT", body: { compaction: "upstream" }, headers: admin })
      expect(on.body.compaction).toBe("upstream")
    }
  })
})

describe("Codex compaction over the Responses WebSocket", () => {
  it("answers the trigger frame with one compaction item, and opens it in the next frame", async () => {
    const ws = await connectWs(`${gw.url.replace("http", "ws")}/v1/responses`, { authorization: `Bearer ${KEY}` })
    try {
      const before = up.requestsOf("anthropic").length
      ws.send({ type: "response.create", ...TRIGGER.body, model: "up-anth/claude-x" })
      const completed = await ws.until("response.completed")
      expect(completed.response.output).toHaveLength(1)
      const item = completed.response.output[0]
      expect(item).toMatchObject({ type: "compaction", encrypted_content: expect.stringMatching(/^gwcmp1:/) })
      expect(ws.frames.filter((f) => f.type === "response.output_item.done")).toHaveLength(1)
      expect(up.requestsOf("anthropic").slice(before).some(asked)).toBe(true)

      ws.send({ type: "response.create", ...withItem(AFTER, item, "up-anth/claude-x") })
      await ws.until("response.completed", 2)
      const sent = JSON.stringify(up.requestsOf("anthropic").at(-1)!.body)
      expect(sent).toContain(SUMMARY)
      expect(sent).not.toContain("gwcmp1:")
    } finally {
      ws.ws.close()
    }
  })
})

describe("the summarizer model (GATEWAY_COMPACTION_MODEL)", () => {
  it("writes the summary instead of the request's model, and its item opens into the summary", async () => {
    const cipher = makeCipher(crypto.randomBytes(32))
    const secrets = {
      encrypt: cipher.encrypt,
      decrypt: (stored: string) =>
        Effect.try({ try: () => Redacted.make(cipher.decrypt(stored)), catch: () => new SecretDecryptError({ message: "no" }) })
    }
    const compaction = makeResponsesCompaction(secrets, "cheap/summarizer")
    const asked: Array<any> = []
    compaction.setOwnRoutes({
      base: "http://127.0.0.1:1",
      fetch: async (p, request) => {
        asked.push({ path: p, ...(request as any) })
        const answer = { output: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "THE SUMMARY" }] }] }
        return new Response(JSON.stringify(answer), { status: 200 })
      }
    })
    const body = { model: "big/model", input: [{ type: "message", role: "user", content: "hi" }, { type: "compaction_trigger" }] }
    const made = await Effect.runPromise(compaction.compact(body, "big/model", "key_1"))
    expect(asked).toHaveLength(1)
    expect(asked[0].path).toBe("/v1/responses")
    expect(asked[0].body.model).toBe("cheap/summarizer")
    expect(asked[0].onBehalfOf).toBe("key_1")
    expect(asked[0].body.input.some((i: any) => i.type === "compaction_trigger")).toBe(false)
    expect(made.model).toBe("cheap/summarizer")
    const opened = compaction.openItems({ input: [made.item, { type: "message", role: "user", content: "next" }] }) as any
    expect(opened.input[0]).toMatchObject({ type: "message", role: "user" })
    expect(opened.input[0].content[0].text).toContain("THE SUMMARY")
    expect(opened.input[1].content).toBe("next")
  })
})
