import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, tempDir } from "./support/gateway.js"

/** The gateway as its own process: usage rows across a SIGTERM, and the accounting CLI commands. */
let up: FakeUpstream
beforeAll(async () => {
  up = await FakeUpstream.start()
})
afterAll(() => up?.close())

const admin = { authorization: `Bearer ${ADMIN_KEY}` }

describe("usage rows survive a SIGTERM during a burst", () => {
  it("every request the server answered has exactly one row, counted again after a restart", async () => {
    const dataDir = tempDir()
    expect((await setupWithProvider(dataDir, up.baseUrl("openai-chat"))).code).toBe(0)
    up.always({ content: "slow answer", delayMs: 400 })
    const server = await startServerProcess({ DATA_DIR: dataDir })
    const before = up.requests.length
    const burst = Array.from({ length: 40 }, (_, i) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "openai-compatible/m1", stream: i % 2 === 0, messages: [{ role: "user", content: `request ${i}` }] })
      })
        .then(async (r) => ({ status: r.status, id: r.headers.get("x-gateway-request-id"), text: await r.text() }))
        .catch(() => undefined)
    )
    // Every request is in flight (the upstream has it, its answer 400 ms away) when SIGTERM comes:
    // on a busy machine a fixed pause could signal before some had even connected.
    await expect.poll(() => up.requests.length - before, { timeout: 15_000 }).toBe(40)
    const code = await server.stop("SIGTERM")
    expect(code).toBe(0)
    const answered = (await Promise.all(burst)).filter(
      (r): r is { status: number; id: string; text: string } => r !== undefined && r.id !== null
    )
    // The requests in flight when SIGTERM came were drained, not cut.
    expect(answered.length).toBe(40)
    expect(answered.every((r) => r.status === 200 && !r.text.includes('"error"'))).toBe(true)
    const ids = answered.map((r) => r.id)
    const rows = queryDb(dataDir, `SELECT request_id, status FROM usage WHERE request_id IN (${ids.map(() => "?").join(",")})`, ...ids)
    expect(rows).toHaveLength(40)
    expect(new Set(rows.map((r: any) => r.request_id)).size).toBe(40)

    // After a restart the API sees the same rows.
    up.always({ content: "ok" })
    const again = await startServerProcess({ DATA_DIR: dataDir })
    try {
      const logs = await call(`${again.url}/api/usage/request-logs?limit=1000`, { headers: admin })
      const seen = new Set(logs.body.requests.map((r: any) => r.requestId))
      expect(ids.every((id) => seen.has(id))).toBe(true)
    } finally {
      await again.stop()
    }
  })
})

describe("requests in flight at a kill -9", () => {
  // docs/accounting.md: a request that has run for ~100 ms is written ahead; the next start turns
  // what a dead process left into usage rows (status 0), so a crash loses no long request.
  it("are usage rows after the restart, marked interrupted; a clean stop leaves nothing to recover", async () => {
    const dataDir = tempDir()
    expect((await setupWithProvider(dataDir, up.baseUrl("openai-chat"))).code).toBe(0)
    up.always({ content: "too late", delayMs: 5000 })
    const server = await startServerProcess({ DATA_DIR: dataDir })
    const before = up.requests.length
    const send = (stream: boolean) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "openai-compatible/m1", stream, messages: [{ role: "user", content: "hi" }] })
      }).then(
        (r) => r.text(),
        () => "gone"
      )
    const pending = [
      send(false),
      send(true),
      send(false),
      send(true),
      fetch(`${server.url}/v1/embeddings`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "openai-compatible/e1", input: "hi" })
      }).catch(() => "gone")
    ]
    // All five reached the upstream (so they are running), then well past the write-ahead's ~100 ms.
    await expect.poll(() => up.requests.length - before, { timeout: 15_000 }).toBe(5)
    // Each is written ahead (about 100 ms after it began): on disk before the kill.
    await expect.poll(() => queryDb<{ n: number }>(dataDir, "SELECT count(*) AS n FROM usage_inflight")[0]!.n, { timeout: 5_000 }).toBe(5)
    server.child.kill("SIGKILL")
    await Promise.all(pending)
    expect(queryDb<{ n: number }>(dataDir, "SELECT count(*) AS n FROM usage")[0]!.n).toBe(0)

    up.always({ content: "ok" })
    const again = await startServerProcess({ DATA_DIR: dataDir })
    try {
      const rows = queryDb<{ endpoint: string; status: number; error: string }>(
        dataDir,
        "SELECT endpoint, status, error FROM usage ORDER BY endpoint"
      )
      expect(rows.map((r) => r.endpoint)).toEqual([
        "chat.completions",
        "chat.completions",
        "chat.completions",
        "chat.completions",
        "embeddings"
      ])
      for (const r of rows) {
        expect(r.status).toBe(0)
        expect(r.error).toContain("interrupted")
      }
      // A request of the new process is written as usual; the recovered ones are not recovered twice.
      const ok = await call(`${again.url}/v1/chat/completions`, {
        body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] }
      })
      expect(ok.status).toBe(200)
    } finally {
      await again.stop()
    }
    expect(queryDb<{ n: number }>(dataDir, "SELECT count(*) AS n FROM usage_inflight")[0]!.n).toBe(0)
    const third = await startServerProcess({ DATA_DIR: dataDir })
    await third.stop()
    expect(queryDb<{ n: number }>(dataDir, "SELECT count(*) AS n FROM usage WHERE status = 0")[0]!.n).toBe(5)
    expect(queryDb<{ n: number }>(dataDir, "SELECT count(*) AS n FROM usage")[0]!.n).toBe(6)
  })
})

describe("usage rows across a kill -9 under load", () => {
  // docs/accounting.md: a crash loses the requests in flight and those answered in about the last
  // 20 ms (the writer's linger plus its write), never one answered 100 ms before. The kill comes
  // 250 ms after the cut-off to leave room for a loaded machine; no other timing is asserted.
  it("every request answered well before the SIGKILL has its row", async () => {
    const dataDir = tempDir()
    expect((await setupWithProvider(dataDir, up.baseUrl("openai-chat"))).code).toBe(0)
    up.always({ content: "steady" })
    const server = await startServerProcess({ DATA_DIR: dataDir })
    const answered: Array<{ id: string; at: number }> = []
    let running = true
    const client = async (c: number) => {
      for (let i = 0; running; i++) {
        try {
          const r = await fetch(`${server.url}/v1/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              model: "openai-compatible/m1",
              stream: i % 2 === 0,
              messages: [{ role: "user", content: `client ${c} request ${i}` }]
            })
          })
          const text = await r.text()
          const id = r.headers.get("x-gateway-request-id")
          if (r.status === 200 && id !== null && text.includes("steady")) answered.push({ id, at: performance.now() })
        } catch {
          return // the process is gone
        }
      }
    }
    const clients = Array.from({ length: 8 }, (_, c) => client(c))
    // Steady load first (however slow this machine is today), then the cut-off.
    for (let waited = 0; answered.length < 40 && waited < 20_000; waited += 20) await new Promise((r) => setTimeout(r, 20))
    const cutoff = performance.now()
    const before = answered.filter((a) => a.at <= cutoff).map((a) => a.id)
    // The load goes on until the kill: requests in flight, rows queued and a batch being written.
    await new Promise((r) => setTimeout(r, 250))
    server.child.kill("SIGKILL")
    running = false
    await Promise.all(clients)
    expect(before.length).toBeGreaterThanOrEqual(40)
    const rows = new Set(queryDb<{ request_id: string }>(dataDir, "SELECT request_id FROM usage").map((r) => r.request_id))
    expect(before.filter((id) => !rows.has(id))).toEqual([])
    // Committed transactions are in the WAL, which outlives the process.
    expect(queryDb<{ journal_mode: string }>(dataDir, "PRAGMA journal_mode")[0]!.journal_mode).toBe("wal")
  })
})

describe("gateway quota and gateway cache", () => {
  it("show and clear the running server's budgets, limits and cache", async () => {
    const dataDir = tempDir()
    expect((await setupWithProvider(dataDir, up.baseUrl("openai-chat"))).code).toBe(0)
    up.always({ content: "cached answer" })
    const server = await startServerProcess({ DATA_DIR: dataDir })
    try {
      const env = { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY }
      const port = new URL(server.url).port
      const keys = (await call(`${server.url}/api/keys`, { headers: admin })).body.keys
      const keyId = keys[0].id
      expect(
        (await call(`${server.url}/api/usage/budget`, { body: { apiKeyId: keyId, dailyLimitUsd: 5, monthlyLimitUsd: 50 }, headers: admin }))
          .status
      ).toBe(200)
      expect(
        (
          await call(`${server.url}/api/usage/token-limits`, {
            body: { apiKeyId: keyId, scope: "global", maxTokens: 100000 },
            headers: admin
          })
        ).status
      ).toBe(201)
      const quota = await runCli(["--port", port, "quota"], env)
      expect(quota.code, quota.stderr).toBe(0)
      expect(quota.stdout).toContain("daily")
      expect(quota.stdout).toContain("$5.0000")
      expect(quota.stdout).toContain("100000")
      const quotaJson = JSON.parse((await runCli(["--port", port, "quota", "--json"], env)).stdout)
      expect(quotaJson.budgets[0]).toMatchObject({ apiKeyId: keyId })
      expect(quotaJson.tokenLimits[0]).toMatchObject({ scope: "global", maxTokens: 100000 })

      const body = { model: "openai-compatible/m1", temperature: 0, messages: [{ role: "user", content: "same question" }] }
      await call(`${server.url}/v1/chat/completions`, { body })
      await new Promise((r) => setTimeout(r, 100))
      expect((await call(`${server.url}/v1/chat/completions`, { body })).headers.get("x-gateway-cache")).toBe("HIT")
      const cache = await runCli(["--port", port, "cache"], env)
      expect(cache.code, cache.stderr).toBe(0)
      expect(cache.stdout).toMatch(/response cache: 1 of 1000 in memory/)
      expect(cache.stdout).toContain("hits 1")
      const cleared = await runCli(["--port", port, "cache", "clear"], env)
      expect(cleared.stdout).toContain("cleared 1 cached answers in memory")
      expect((await call(`${server.url}/v1/chat/completions`, { body })).headers.get("x-gateway-cache")).toBe("MISS")

      const noKey = await runCli(["--port", port, "cache"], { DATA_DIR: dataDir })
      expect(noKey.code).toBe(1)
      expect(noKey.stderr).toContain("admin API key")
      const down = await runCli(["--port", "1", "quota"], env)
      expect(down.code).toBe(1)
      expect(down.stderr).toContain("no gateway answers")
    } finally {
      await server.stop()
    }
  })
})
