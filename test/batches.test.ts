import * as Effect from "effect/Effect"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeBatchUpstream } from "./support/fakeBatchUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/** `/v1/batches` with the openai SDK against a fake upstream: the gateway runs each line through its own routes. */
const ADMIN = "gwk_batch_admin_key_0123456789abcdef"
const KEY_A = "gwk_batch_key_a_0123456789abcdef0123"
const KEY_B = "gwk_batch_key_b_0123456789abcdef0123"

let g: TestGateway
let up: FakeBatchUpstream
let a: OpenAI
let b: OpenAI
let keyA: string

beforeAll(async () => {
  up = await FakeBatchUpstream.start()
  g = await startGateway({ env: { GATEWAY_BATCH_POLL_MS: "50", GATEWAY_BATCH_RETRY_BASE_MS: "50", GATEWAY_BATCH_CONCURRENCY: "4" } })
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  keyA = (await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "a" }, { secret: KEY_A })))).id
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "b" }, { secret: KEY_B })))
  const res = await call(`${g.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "fake", apiKey: "sk-up", baseUrl: up.baseUrl, models: ["m1"] },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  a = new OpenAI({ apiKey: KEY_A, baseURL: `${g.url}/v1`, maxRetries: 0 })
  b = new OpenAI({ apiKey: KEY_B, baseURL: `${g.url}/v1`, maxRetries: 0 })
})
afterAll(async () => {
  await g?.close()
  await up?.close()
})

const chatLine = (id: string, text: string) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "fake/m1", messages: [{ role: "user", content: text }] }
  })

const upload = async (client: OpenAI, lines: ReadonlyArray<string>) =>
  client.files.create({ file: await toFile(Buffer.from(lines.join("\n") + "\n"), "batch.jsonl"), purpose: "batch" })

const until = async (client: OpenAI, id: string, done: (s: string) => boolean, ms = 20_000) => {
  const end = Date.now() + ms
  for (;;) {
    const batch = await client.batches.retrieve(id)
    if (done(batch.status) || Date.now() > end) return batch
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe("batches with the openai SDK", () => {
  it("runs a batch to completed with request_counts and the output file in OpenAI's format; usage rows carry the batch id", async () => {
    const input = await upload(
      a,
      Array.from({ length: 12 }, (_, i) => chatLine(`req-${i}`, `hello ${i}`))
    )
    const created = await a.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { job: "nightly" }
    })
    expect(created).toMatchObject({ object: "batch", status: "validating", input_file_id: input.id, metadata: { job: "nightly" } })
    expect(created.id).toMatch(/^batch_/)
    const done = await until(a, created.id, (s) => s === "completed" || s === "failed")
    expect(done.status).toBe("completed")
    expect(done.request_counts).toEqual({ total: 12, completed: 12, failed: 0 })
    expect(done.in_progress_at).not.toBeNull()
    expect(done.completed_at).not.toBeNull()
    expect(done.error_file_id).toBeNull()
    const text = await (await a.files.content(done.output_file_id!)).text()
    const lines = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
    expect(lines).toHaveLength(12)
    for (const [i, l] of lines.entries()) {
      expect(l.custom_id).toBe(`req-${i}`)
      expect(l.error).toBeNull()
      expect(l.response.status_code).toBe(200)
      expect(l.response.request_id).toBe(`${created.id}_${i + 1}`)
      expect(l.response.body.choices[0].message.content).toBe(`echo: hello ${i}`)
    }
    expect((await a.files.retrieve(done.output_file_id!)).purpose).toBe("batch_output")
    // One usage row per line, as the batch's owner, with the batch id in its request id (written
    // behind the answers: the last line's may come just after the batch completes).
    const usageRows = () =>
      queryDb(g.dataDir, "SELECT request_id, api_key_id, status FROM usage WHERE request_id LIKE ?", `${created.id}_%`)
    await expect.poll(() => usageRows().length, { timeout: 10_000 }).toBe(12)
    const rows = usageRows()
    expect(rows).toHaveLength(12)
    expect(rows.every((r: any) => r.api_key_id === keyA && r.status === 200)).toBe(true)
    // Listed for its owner, not for another key; retrieve by another key is 404.
    expect((await a.batches.list()).data.map((x) => x.id)).toContain(created.id)
    expect((await b.batches.list()).data.map((x) => x.id)).not.toContain(created.id)
    await expect(b.batches.retrieve(created.id)).rejects.toMatchObject({ status: 404 })
    // A finished batch can be deleted.
    const del = await call(`${g.url}/v1/batches/${created.id}`, { method: "DELETE", headers: { authorization: `Bearer ${KEY_A}` } })
    expect(del.body).toEqual({ id: created.id, object: "batch", deleted: true })
    await expect(a.batches.retrieve(created.id)).rejects.toMatchObject({ status: 404 })
  })

  it("fails validation with line-numbered errors and runs nothing", async () => {
    const before = up.total
    const input = await upload(a, [
      chatLine("ok-1", "x"),
      "not json",
      chatLine("ok-1", "dup"),
      JSON.stringify({ custom_id: "u", method: "POST", url: "/v1/embeddings", body: { model: "fake/m1" } })
    ])
    const created = await a.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    const done = await until(a, created.id, (s) => s !== "validating")
    expect(done.status).toBe("failed")
    expect(done.failed_at).not.toBeNull()
    const errors = done.errors!.data!
    expect(errors.map((e) => e.line)).toEqual([2, 3, 4])
    expect(errors[0]!.message).toContain("line 2")
    expect(errors[1]!.code).toBe("duplicate_custom_id")
    expect(errors[2]!.param).toBe("url")
    expect(up.total).toBe(before)
  })

  it("refuses bad create parameters with a 400 naming them; another key's input file is 404", async () => {
    const input = await upload(a, [chatLine("x", "x")])
    await expect(
      a.batches.create({ input_file_id: input.id, endpoint: "/v1/nope" as never, completion_window: "24h" })
    ).rejects.toMatchObject({ status: 400, param: "endpoint" })
    await expect(
      a.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "1h" as never })
    ).rejects.toMatchObject({
      status: 400,
      param: "completion_window"
    })
    await expect(
      b.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    ).rejects.toMatchObject({ status: 404 })
  })

  it("cancels a running batch: cancelled, with what was answered in the output and the rest in the error file", async () => {
    up.delayMs = 100
    try {
      const input = await upload(
        a,
        Array.from({ length: 40 }, (_, i) => chatLine(`c-${i}`, `cancel ${i}`))
      )
      const created = await a.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
      await until(a, created.id, (s) => s === "in_progress")
      await new Promise((r) => setTimeout(r, 250))
      const cancelling = await a.batches.cancel(created.id)
      expect(["cancelling", "cancelled"]).toContain(cancelling.status)
      const done = await until(a, created.id, (s) => s === "cancelled")
      expect(done.status).toBe("cancelled")
      expect(done.cancelled_at).not.toBeNull()
      expect(done.request_counts!.completed).toBeGreaterThan(0)
      expect(done.request_counts!.completed).toBeLessThan(40)
      const errors = (await (await a.files.content(done.error_file_id!)).text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l))
      expect(errors.length).toBe(40 - done.request_counts!.completed)
      expect(errors[0].error.code).toBe("batch_cancelled")
      // Cancelling a cancelled batch answers it as it is; a finished one cannot be cancelled twice into another state.
      expect((await a.batches.cancel(created.id)).status).toBe("cancelled")
    } finally {
      up.delayMs = 0
    }
  })

  it("a line refused with 429 is tried again later, not failed", async () => {
    up.refuseNext = 2
    const input = await upload(a, [chatLine("r-1", "retry one"), chatLine("r-2", "retry two")])
    const created = await a.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    const done = await until(a, created.id, (s) => s === "completed" || s === "failed", 60_000)
    expect(done.status).toBe("completed")
    expect(done.request_counts).toEqual({ total: 2, completed: 2, failed: 0 })
  }, 70_000)
})

describe("completion window", () => {
  it("a batch past its window is expired with partial results; lines never run are in the error file", async () => {
    const g2 = await startGateway({
      env: { GATEWAY_BATCH_POLL_MS: "50", GATEWAY_BATCH_CONCURRENCY: "2", GATEWAY_BATCH_WINDOW_SECONDS: "1" }
    })
    up.delayMs = 200
    try {
      await g2.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      await call(`${g2.url}/api/providers`, {
        body: { provider: "openai-compatible", name: "fake", apiKey: "sk-up", baseUrl: up.baseUrl, models: ["m1"] },
        headers: { authorization: `Bearer ${ADMIN}` }
      })
      const c = new OpenAI({ apiKey: ADMIN, baseURL: `${g2.url}/v1`, maxRetries: 0 })
      const input = await upload(
        c,
        Array.from({ length: 30 }, (_, i) => chatLine(`e-${i}`, `expire ${i}`))
      )
      const created = await c.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
      const done = await until(c, created.id, (s) => s === "expired", 10_000)
      expect(done.status).toBe("expired")
      expect(done.expired_at).not.toBeNull()
      const answered = done.request_counts!.completed
      expect(answered).toBeGreaterThan(0)
      expect(answered).toBeLessThan(30)
      const out = (await (await c.files.content(done.output_file_id!)).text()).trim().split("\n")
      expect(out).toHaveLength(answered)
      const errors = (await (await c.files.content(done.error_file_id!)).text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l))
      expect(errors).toHaveLength(30 - answered)
      expect(errors.every((e) => e.error.code === "batch_expired" && e.response === null)).toBe(true)
    } finally {
      up.delayMs = 0
      await g2.close()
    }
  }, 20_000)
})
