import * as net from "node:net"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { VERSION } from "../src/kernel/version.js"
import { ADMIN_KEY, runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { queryDb } from "./support/db.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { tempDir } from "./support/gateway.js"

const fake = fakeOpenAIForFile()
const ADMIN = ADMIN_KEY
const setup = (dataDir: string, extra: ReadonlyArray<string> = []) => setupWithProvider(dataDir, fake.upstream.baseUrl, extra)

describe("setup, then serve, then the openai SDK (the README flow)", () => {
  it("configures a provider and an admin key, serves it, answers streamed and not, and stops cleanly on SIGTERM", async () => {
    const dataDir = tempDir()
    const r = await setup(dataDir, ["--test-provider"])
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("provider connection added: openai-compatible")
    expect(r.stdout).toContain("provider test passed")
    expect(r.stdout).not.toContain(ADMIN)

    const server = await startServerProcess({ DATA_DIR: dataDir })
    try {
      fake.upstream.next({ content: "answer from the upstream" }, { content: "streamed answer", chunks: 3 })
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: ADMIN, maxRetries: 0 })
      const completion = await client.chat.completions.create({
        model: "openai-compatible/m1",
        messages: [{ role: "user", content: "hi" }]
      })
      expect(completion.choices[0]?.message.content).toBe("answer from the upstream")
      const stream = await client.chat.completions.create({
        model: "openai-compatible/m1",
        messages: [{ role: "user", content: "hi" }],
        stream: true
      })
      let text = ""
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
      expect(text).toBe("streamed answer")

      const port = new URL(server.url).port
      const status = await runCli(["--port", port, "status"], { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN })
      expect(status.code).toBe(0)
      expect(status.stdout).toContain(`gateway ${VERSION} running at`)
      expect(status.stdout).toContain("providers: 1 (1 enabled): openai-compatible")

      const doctor = await runCli(["--port", port, "doctor", "--json"], { DATA_DIR: dataDir })
      const report = JSON.parse(doctor.stdout)
      expect(report.checks.find((c: any) => c.name === "liveness").status).toBe("ok")
      expect(report.ok).toBe(true)
      expect(doctor.code).toBe(0)
    } finally {
      expect(await server.stop("SIGTERM")).toBe(0)
    }
    expect(server.output()).toContain("server stopped")
  })

  it("re-running setup updates the connection instead of failing", async () => {
    const dataDir = tempDir()
    expect((await setup(dataDir)).code).toBe(0)
    const again = await runCli(
      [
        "setup",
        "--non-interactive",
        "--add-provider",
        "--provider",
        "openai-compatible",
        "--provider-base-url",
        fake.upstream.baseUrl,
        "--default-model",
        "m2"
      ],
      { DATA_DIR: dataDir }
    )
    expect(again.code).toBe(0)
    expect(again.stdout).toContain("provider connection updated")
    const list = JSON.parse((await runCli(["providers", "list", "--json"], { DATA_DIR: dataDir })).stdout)
    expect(list.connections).toHaveLength(1)
    expect(list.connections[0]).toMatchObject({ defaultModel: "m2", hasApiKey: true })
  })

  it("reports bad setup input clearly as a usage error (exit 2, one line naming the option)", async () => {
    const dataDir = tempDir()
    const noProvider = await runCli(["setup", "--non-interactive", "--add-provider"], { DATA_DIR: dataDir })
    expect(noProvider.code).toBe(2)
    expect(noProvider.stderr.trim()).toBe("error: --provider: --add-provider needs --provider (see `gateway providers available`)")
    const badUrl = await runCli(
      ["setup", "--non-interactive", "--add-provider", "--provider", "openai-compatible", "--provider-base-url", "ftp://x"],
      { DATA_DIR: dataDir }
    )
    expect(badUrl.code).toBe(2)
    expect(badUrl.stderr.trim()).toBe("error: --provider-base-url: baseUrl must use http or https")
    const shortPw = await runCli(["setup", "--non-interactive", "--password", "short"], { DATA_DIR: dataDir })
    expect(shortPw.code).toBe(2)
    expect(shortPw.stderr.trim()).toBe("error: --password: password must be at least 8 characters")
  })

  it("setup without a terminal and without --non-interactive says how to run it", async () => {
    const r = await runCli(["setup"], { DATA_DIR: tempDir() })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain("--non-interactive")
  })
})

describe("start-up failures", () => {
  it("a port already in use is one clear line and exit status 1, no stack trace", async () => {
    const busy = net.createServer()
    await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r))
    try {
      const port = String((busy.address() as net.AddressInfo).port)
      const r = await runCli(["--port", port], { DATA_DIR: tempDir() })
      expect(r.code).toBe(1)
      expect(r.stderr).toContain(`error: port ${port} on 127.0.0.1 is already in use`)
      expect(r.stderr + r.stdout).not.toMatch(/\n\s+at /)
    } finally {
      busy.close()
    }
  })
})

describe("logging", () => {
  it("writes JSON lines with LOG_FORMAT=json, each request line carrying its request id, no secrets", async () => {
    const dataDir = tempDir()
    expect((await setup(dataDir)).code).toBe(0)
    const server = await startServerProcess({ DATA_DIR: dataDir, LOG_FORMAT: "json" })
    let requestId = ""
    try {
      const res = await fetch(`${server.url}/v1/chat/completions?api_key=${ADMIN}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN}` },
        body: JSON.stringify({ model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] })
      })
      requestId = res.headers.get("x-gateway-request-id") ?? ""
      await res.text()
    } finally {
      await server.stop()
    }
    const lines = server
      .output()
      .trim()
      .split("\n")
      .filter((l) => l.startsWith("{"))
    expect(lines.length).toBeGreaterThan(2)
    const parsed = lines.map((l) => JSON.parse(l))
    const mine = parsed.filter((l) => l.annotations?.requestId === requestId)
    expect(mine.length).toBeGreaterThan(0)
    expect(mine.some((l) => String(l.message).includes("POST /v1/chat/completions 200"))).toBe(true)
    expect(server.output()).not.toContain(ADMIN)
    expect(server.output()).not.toContain("sk-up")
  })
})

describe("shutdown", () => {
  it("lets an in-flight management request finish before stopping", async () => {
    const dataDir = tempDir()
    expect((await setup(dataDir)).code).toBe(0)
    const server = await startServerProcess({ DATA_DIR: dataDir })
    fake.upstream.next({ delayMs: 800 })
    const before = fake.upstream.requests.length
    const test = fetch(`${server.url}/api/providers/openai-compatible/test`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` }
    }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as { ok: boolean }
    }))
    // SIGTERM once the test is under way upstream (a fixed delay races a loaded machine).
    for (let waited = 0; fake.upstream.requests.length === before && waited < 10_000; waited += 10)
      await new Promise((r) => setTimeout(r, 10))
    const code = await server.stop("SIGTERM")
    const result = await test
    expect(code).toBe(0)
    expect(result.status).toBe(200)
    expect(result.body.ok).toBe(true)
    expect(queryDb(dataDir, "SELECT test_status FROM connections")).toEqual([{ test_status: "active" }])
  })

  it("loses no usage row when SIGTERM arrives during a burst", async () => {
    const dataDir = tempDir()
    expect((await setup(dataDir)).code).toBe(0)
    const server = await startServerProcess({ DATA_DIR: dataDir })
    fake.upstream.requests.length = 0
    fake.upstream.always({ delayMs: 150 })
    const body = JSON.stringify({ model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] })
    const fire = () =>
      fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body })
        .then(async (r) => (await r.text(), r.status))
        .catch(() => 0)
    const burst = Array.from({ length: 120 }, fire)
    // SIGTERM once the burst is under way upstream (a fixed delay races a loaded machine).
    for (let waited = 0; fake.upstream.chatRequests.length === 0 && waited < 10_000; waited += 10)
      await new Promise((r) => setTimeout(r, 10))
    const code = await server.stop("SIGTERM")
    const statuses = await Promise.all(burst)
    fake.upstream.always({})
    expect(code).toBe(0)
    const served = fake.upstream.chatRequests.length
    const ok = statuses.filter((s) => s === 200).length
    expect(served).toBeGreaterThan(0)
    expect(ok).toBe(served)
    const rows = queryDb<{ n: number }>(dataDir, "SELECT count(*) AS n FROM usage")[0]!.n
    expect(rows).toBe(served)
  })
})
