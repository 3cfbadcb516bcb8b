import * as Effect from "effect/Effect"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeNativeBatches } from "./support/fakeNativeBatches.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/** The batch's usage rows once `count` of them are written (the usage writer flushes in batches, after the batch completes). */
const usageRows = (query: string, batchId: string, count: number): Promise<Array<any>> =>
  vi.waitFor(
    () => {
      const rows = queryDb(g.dataDir, query, `${batchId}_%`)
      expect(rows).toHaveLength(count)
      return rows
    },
    { timeout: 5000, interval: 50 }
  )

/** Native batches: `metadata.gateway_mode: "native"` forwards the whole batch to OpenAI's batch API or Anthropic's message batches. */
const ADMIN = "gwk_native_admin_key_0123456789abcdef"
const KEY = "gwk_native_key_a_0123456789abcdef0123"
const OPENAI_KEY = "sk-native-openai-secret-0123456789"
const ANTHROPIC_KEY = "sk-ant-native-secret-0123456789"

let g: TestGateway
let up: FakeNativeBatches
let client: OpenAI
let keyId: string

beforeAll(async () => {
  up = await FakeNativeBatches.start()
  g = await startGateway({ env: { GATEWAY_BATCH_POLL_MS: "50", GATEWAY_NATIVE_BATCH_POLL_MS: "50" } })
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  keyId = (await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "a" }, { secret: KEY })))).id
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${g.url}/api/providers`, { body, headers: { authorization: `Bearer ${ADMIN}` } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openai", name: "oa", apiKey: OPENAI_KEY, baseUrl: up.openaiBase })
  await add({ provider: "anthropic", name: "claude", apiKey: ANTHROPIC_KEY, baseUrl: up.anthropicBase })
  await add({ provider: "groq", name: "gq", apiKey: "gsk-x", baseUrl: `${up.origin}/groq/v1` })
  client = new OpenAI({ apiKey: KEY, baseURL: `${g.url}/v1`, maxRetries: 0 })
})
afterAll(async () => {
  await g?.close()
  await up?.close()
})

const chatLine = (id: string, model: string, text: string) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model, messages: [{ role: "user", content: text }] }
  })
const messageLine = (id: string, model: string, text: string) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/messages",
    body: { model, max_tokens: 64, messages: [{ role: "user", content: text }] }
  })

const upload = async (lines: ReadonlyArray<string>) =>
  client.files.create({ file: await toFile(Buffer.from(lines.join("\n") + "\n"), "batch.jsonl"), purpose: "batch" })

const until = async (id: string, done: (s: string) => boolean, ms = 15_000) => {
  const end = Date.now() + ms
  for (;;) {
    const batch = await client.batches.retrieve(id)
    if (done(batch.status) || Date.now() > end) return batch
    await new Promise((r) => setTimeout(r, 50))
  }
}

const outputLines = async (fileId: string) =>
  (await (await client.files.content(fileId)).text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))

describe("native batches: OpenAI", () => {
  it("forwards the batch to OpenAI's batch API; completed with the upstream's counts, the output in OpenAI's line format, usage rows at half price", async () => {
    const input = await upload([
      chatLine("a-1", "oa/gpt-4o-mini", "one"),
      chatLine("a-2", "oa/gpt-4o-mini", "fail"),
      chatLine("a-3", "oa/gpt-4o-mini", "three")
    ])
    const created = await client.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { gateway_mode: "native", job: "n1" }
    })
    expect(created).toMatchObject({ object: "batch", status: "validating", metadata: { gateway_mode: "native", job: "n1" } })
    const seenInProgress = await until(created.id, (s) => s === "in_progress" || s === "completed")
    expect(["in_progress", "completed"]).toContain(seenInProgress.status)
    const done = await until(created.id, (s) => s === "completed" || s === "failed")
    expect(done.status, JSON.stringify(done.errors)).toBe("completed")
    expect(done.id).toBe(created.id)
    expect(done.request_counts).toEqual({ total: 3, completed: 2, failed: 1 })
    expect(done.completed_at).not.toBeNull()

    // Upstream: one upload, one create, with the key; the lines' model is the upstream's id, custom ids line-<n>.
    const upstream = [...up.openai.values()].find((b) => (b.metadata as Record<string, string>)?.["gateway_batch_id"] === created.id)!
    expect(upstream).toBeDefined()
    expect(upstream.endpoint).toBe("/v1/chat/completions")
    const sent = up.files
      .get(upstream.input_file_id)!
      .toString("utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
    expect(sent.map((l) => l.custom_id)).toEqual(["line-1", "line-2", "line-3"])
    expect(sent.every((l) => l.body.model === "gpt-4o-mini" && l.url === "/v1/chat/completions")).toBe(true)
    expect(up.requests.filter((r) => r.path.startsWith("/openai/")).every((r) => r.auth === `Bearer ${OPENAI_KEY}`)).toBe(true)

    // The output file: the client's custom ids, input order, the gateway's request ids.
    const out = await outputLines(done.output_file_id!)
    expect(out.map((l) => l.custom_id)).toEqual(["a-1", "a-3"])
    expect(out[0]).toMatchObject({ custom_id: "a-1", error: null, response: { status_code: 200, request_id: `${created.id}_1` } })
    expect(out[0].response.body.choices[0].message.content).toBe("batched: one")
    const errors = await outputLines(done.error_file_id!)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ custom_id: "a-2", response: { status_code: 400, request_id: `${created.id}_2` } })
    expect((await client.files.retrieve(done.output_file_id!)).purpose).toBe("batch_output")

    // One usage row per line, the owner's, at 50% of gpt-4o-mini's prices (0.15 / 0.6 per M).
    // Usage rows are written in batches: wait for them rather than for a fixed time.
    const rows = await usageRows(
      "SELECT request_id, api_key_id, status, cost_usd, provider, model, endpoint, tokens_in, tokens_out FROM usage WHERE request_id LIKE ? ORDER BY request_id",
      created.id,
      3
    )
    expect(
      rows.every(
        (r: any) => r.api_key_id === keyId && r.provider === "openai" && r.model === "gpt-4o-mini" && r.endpoint === "chat.completions"
      )
    ).toBe(true)
    const ok = rows.filter((r: any) => r.status === 200)
    expect(ok).toHaveLength(2)
    for (const r of ok) {
      expect([r.tokens_in, r.tokens_out]).toEqual([1000, 500])
      expect(r.cost_usd).toBeCloseTo(((1000 * 0.15 + 500 * 0.6) / 1e6) * 0.5, 10)
    }
    expect(rows.find((r: any) => r.status === 400)?.cost_usd).toBe(0)
  })

  it("forwards a cancel to the upstream; the batch ends cancelled with the answered lines and the rest in the error file", async () => {
    up.hold = true
    try {
      const input = await upload([
        chatLine("c-1", "oa/gpt-4o-mini", "first"),
        chatLine("c-2", "oa/gpt-4o-mini", "second"),
        chatLine("c-3", "oa/gpt-4o-mini", "third")
      ])
      const created = await client.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
        metadata: { gateway_mode: "native" }
      })
      const running = await until(
        created.id,
        (s) =>
          s === "in_progress" &&
          [...up.openai.values()].some((b) => (b.metadata as Record<string, string>)?.["gateway_batch_id"] === created.id)
      )
      expect(running.status).toBe("in_progress")
      const cancelling = await client.batches.cancel(created.id)
      // The worker may end it between the cancel and the answer (its next poll sees the upstream's cancel).
      expect(["cancelling", "cancelled"]).toContain(cancelling.status)
      const upstream = [...up.openai.values()].find((b) => (b.metadata as Record<string, string>)?.["gateway_batch_id"] === created.id)!
      expect(up.requests.some((r) => r.method === "POST" && r.path === `/openai/v1/batches/${upstream.id}/cancel`)).toBe(true)
      const done = await until(created.id, (s) => s === "cancelled")
      expect(done.status).toBe("cancelled")
      expect(done.cancelled_at).not.toBeNull()
      expect(done.request_counts).toEqual({ total: 3, completed: 1, failed: 0 })
      expect((await outputLines(done.output_file_id!)).map((l) => l.custom_id)).toEqual(["c-1"])
      const errors = await outputLines(done.error_file_id!)
      expect(errors.map((l) => [l.custom_id, l.error.code])).toEqual([
        ["c-2", "batch_cancelled"],
        ["c-3", "batch_cancelled"]
      ])
    } finally {
      up.hold = false
    }
  })
})

describe("native batches: Anthropic", () => {
  it("forwards /v1/messages lines as a message batch; results translated to OpenAI's output lines, usage at half price", async () => {
    const input = await upload([
      messageLine("m-1", "claude/claude-haiku-4-5", "hello"),
      messageLine("m-2", "claude/claude-haiku-4-5", "fail")
    ])
    const created = await client.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/messages" as never,
      completion_window: "24h",
      metadata: { gateway_mode: "native" }
    })
    const done = await until(created.id, (s) => s === "completed" || s === "failed")
    expect(done.status, JSON.stringify(done.errors)).toBe("completed")
    expect(done.request_counts).toEqual({ total: 2, completed: 1, failed: 1 })
    const upstream = [...up.anthropic.values()].at(-1)!
    expect(upstream.requests.map((r) => r.custom_id)).toEqual(["line-1", "line-2"])
    expect(upstream.requests[0]!.params).toMatchObject({ model: "claude-haiku-4-5", max_tokens: 64 })
    expect(up.requests.filter((r) => r.path.startsWith("/anthropic/")).every((r) => r.auth === ANTHROPIC_KEY)).toBe(true)
    const out = await outputLines(done.output_file_id!)
    expect(out).toHaveLength(1)
    expect(out[0]).toMatchObject({
      custom_id: "m-1",
      error: null,
      response: {
        status_code: 200,
        request_id: `${created.id}_1`,
        body: { type: "message", content: [{ type: "text", text: "batched: hello" }] }
      }
    })
    const errors = await outputLines(done.error_file_id!)
    expect(errors[0]).toMatchObject({
      custom_id: "m-2",
      response: { status_code: 400, body: { type: "error", error: { type: "invalid_request_error" } } }
    })
    const rows = await usageRows(
      "SELECT status, cost_usd, provider, endpoint FROM usage WHERE request_id LIKE ? ORDER BY request_id",
      created.id,
      2
    )
    expect(rows[0]).toMatchObject({ status: 200, provider: "anthropic", endpoint: "messages" })
    expect(rows[0]!.cost_usd).toBeCloseTo(((1000 * 1 + 500 * 5) / 1e6) * 0.5, 10)
  })

  it("forwards a cancel as a message batch cancel; canceled lines are in the error file", async () => {
    up.hold = true
    try {
      const input = await upload([messageLine("k-1", "claude/claude-haiku-4-5", "a"), messageLine("k-2", "claude/claude-haiku-4-5", "b")])
      const created = await client.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/messages" as never,
        completion_window: "24h",
        metadata: { gateway_mode: "native" }
      })
      const before = up.anthropic.size
      await until(created.id, (s) => s === "in_progress" && up.anthropic.size > before)
      await new Promise((r) => setTimeout(r, 100))
      await client.batches.cancel(created.id)
      const upstream = [...up.anthropic.values()].at(-1)!
      // The runner forwards the cancel on its next step, not inside the cancel call.
      const done = await until(created.id, (s) => s === "cancelled")
      expect(up.requests.some((r) => r.method === "POST" && r.path === `/anthropic/v1/messages/batches/${upstream.id}/cancel`)).toBe(true)
      expect(done.status).toBe("cancelled")
      expect(done.request_counts).toMatchObject({ total: 2, completed: 1 })
      const errors = await outputLines(done.error_file_id!)
      expect(errors.map((l) => [l.custom_id, l.error.code])).toEqual([["k-2", "batch_cancelled"]])
    } finally {
      up.hold = false
    }
  })
})

describe("native batches: refused", () => {
  const refused = async (lines: ReadonlyArray<string>, endpoint: string, match: RegExp) => {
    const input = await upload(lines)
    const err = await client.batches
      .create({ input_file_id: input.id, endpoint: endpoint as never, completion_window: "24h", metadata: { gateway_mode: "native" } })
      .catch((e) => e)
    expect(err).toMatchObject({ status: 400, param: "metadata.gateway_mode", code: "native_batch_unavailable" })
    expect(err.message).toMatch(match)
  }

  it("answers 400 naming why when the batch cannot go native; nothing is forwarded", async () => {
    // Only creations count: an earlier test's batch may still be polled while this one runs.
    const creations = () => up.requests.filter((r) => r.method === "POST" && /\/(batches|files)$/.test(r.path)).length
    const before = creations()
    await refused(
      [chatLine("x-1", "oa/gpt-4o-mini", "a"), chatLine("x-2", "claude/claude-haiku-4-5", "b")],
      "/v1/chat/completions",
      /more than one model/
    )
    await refused([chatLine("y-1", "gq/llama-3.1-8b-instant", "a")], "/v1/chat/completions", /gq \(groq\).*no native batch API/)
    await refused([chatLine("z-1", "claude/claude-haiku-4-5", "a")], "/v1/chat/completions", /'\/v1\/messages' lines only/)
    await refused([messageLine("w-1", "oa/gpt-4o-mini", "a")], "/v1/messages", /does not take '\/v1\/messages'/)
    expect(creations()).toBe(before)
    const input = await upload([chatLine("v-1", "oa/gpt-4o-mini", "a")])
    await expect(
      client.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
        metadata: { gateway_mode: "fast" }
      })
    ).rejects.toMatchObject({ status: 400, param: "metadata.gateway_mode" })
  })

  it("an upstream that refuses the batch fails it with the reason, the connection's key scrubbed", async () => {
    up.refuseCreate = true
    try {
      const input = await upload([chatLine("r-1", "oa/gpt-4o-mini", "a")])
      const created = await client.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
        metadata: { gateway_mode: "native" }
      })
      const done = await until(created.id, (s) => s === "failed" || s === "completed")
      expect(done.status).toBe("failed")
      const error = done.errors!.data![0]!
      expect(error.code).toBe("native_batch_refused")
      expect(error.message).toMatch(/HTTP 401/)
      expect(JSON.stringify(done)).not.toContain(OPENAI_KEY)
    } finally {
      up.refuseCreate = false
    }
  })

  it("without the option a batch is run by the gateway as before (not forwarded)", async () => {
    const before = up.openai.size
    const input = await upload([chatLine("g-1", "oa/gpt-4o-mini", "a")])
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    await until(created.id, (s) => s !== "validating" && s !== "in_progress")
    expect(up.openai.size).toBe(before)
    // The gateway ran the line itself: a chat completion against the fake (which has no such route: 404).
    expect(up.requests.some((r) => r.path === "/openai/v1/chat/completions")).toBe(true)
  })
})
