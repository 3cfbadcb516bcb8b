import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, runCli, startServerProcess } from "./support/cli.js"
import { FakeBatchUpstream } from "./support/fakeBatchUpstream.js"
import { tempDir } from "./support/gateway.js"

/** A batch of 1,000 lines survives a kill -9 of the gateway mid-run: every line answered exactly once in the output file. */
let up: FakeBatchUpstream
beforeAll(async () => {
  up = await FakeBatchUpstream.start()
})
afterAll(() => up?.close())

const ENV = { GATEWAY_BATCH_POLL_MS: "100", GATEWAY_BATCH_CONCURRENCY: "8" }

describe("a 1,000-line batch across a kill and restart", () => {
  it("resumes where it stopped without repeating finished lines; the output has each line once", async () => {
    const dataDir = tempDir()
    const setup = await runCli(
      [
        "setup",
        "--non-interactive",
        "--add-provider",
        "--provider",
        "openai-compatible",
        "--provider-base-url",
        up.baseUrl,
        "--api-key",
        "sk-up",
        "--default-model",
        "m1"
      ],
      { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY }
    )
    expect(setup.code).toBe(0)
    up.delayMs = 5
    let server = await startServerProcess({ DATA_DIR: dataDir, ...ENV })
    const client = (url: string) => new OpenAI({ apiKey: ADMIN_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
    const N = 1000
    const lines = Array.from({ length: N }, (_, i) =>
      JSON.stringify({
        custom_id: `line-${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: "openai-compatible/m1", messages: [{ role: "user", content: `n${i}` }] }
      })
    )
    let c = client(server.url)
    const input = await c.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "big.jsonl"), purpose: "batch" })
    const batch = await c.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    // Killed once a good part ran.
    for (;;) {
      const b = await c.batches.retrieve(batch.id)
      if (b.request_counts && b.request_counts.completed >= 300) break
      await new Promise((r) => setTimeout(r, 20))
    }
    await server.stop("SIGKILL")
    const atKill = up.total
    expect(atKill).toBeLessThan(N)

    server = await startServerProcess({ DATA_DIR: dataDir, ...ENV })
    try {
      c = client(server.url)
      let done = await c.batches.retrieve(batch.id)
      const end = Date.now() + 60_000
      while (done.status !== "completed" && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 100))
        done = await c.batches.retrieve(batch.id)
      }
      expect(done.status).toBe("completed")
      expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 })
      const out = (await (await c.files.content(done.output_file_id!)).text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l))
      expect(out).toHaveLength(N)
      const ids = out.map((l) => l.custom_id)
      expect(new Set(ids).size).toBe(N)
      for (const l of out) expect(l.response.body.choices[0].message.content).toBe(`echo: n${l.custom_id.slice(5)}`)
      // Finished lines were not run again: at most the lines in flight at the kill ran twice.
      expect(up.total - N).toBeLessThanOrEqual(8)
    } finally {
      await server.stop()
    }
  }, 120_000)
})
