import { execFileSync } from "node:child_process"
import * as http from "node:http"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, setupWithProvider, startServerProcess, type ServerProcess } from "./support/cli.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { tempDir } from "./support/gateway.js"
import { alive, childrenOf, firstCpu } from "./support/processes.js"
import { until } from "./support/until.js"

/**
 * `gateway --workers 2` started under `taskset -c <one cpu>` (docs/scale-out.md, "Cores"): two workers on
 * one core would take turns there and serve less than one process, so worker 1 serves and worker 2
 * stands by, a whole gateway that does not listen. When the serving worker dies, the standby (the
 * process already running, not a new one) listens in its place at once, and the dead one comes back
 * as the standby. `GET /api/health/ping` says which worker answered; each ping is a new connection,
 * which node's cluster hands to a listening worker.
 */

const ping = (url: string): Promise<{ pid: number; worker: number }> =>
  new Promise((resolve, reject) => {
    const req = http.get(`${url}/api/health/ping`, { agent: false }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (text += c))
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`ping: ${res.statusCode} ${text}`))))
    })
    req.on("error", reject)
    req.setTimeout(5_000, () => req.destroy(new Error("no answer to the ping within 5 s")))
  })

/** A keep-alive connection held by worker `n`: new ones until the cluster hands one to it. */
const connectionTo = (url: string, n: number) =>
  until(
    `a connection to worker ${n}`,
    async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      const answer = await new Promise<{ worker: number }>((resolve, reject) =>
        http
          .get(`${url}/api/health/ping`, { agent }, (res) => {
            let text = ""
            res.setEncoding("utf8")
            res.on("data", (c: string) => (text += c))
            res.on("end", () => resolve(JSON.parse(text)))
          })
          .on("error", reject)
      )
      if (answer.worker === n) return agent
      agent.destroy()
      return undefined
    },
    30_000
  )

const standingBy = (gw: ServerProcess) => gw.output().match(/standing by for http/g)?.length ?? 0

let up: FakeUpstream
let gw: ServerProcess
beforeAll(async () => {
  try {
    execFileSync("taskset", ["-c", String(firstCpu()), "true"])
  } catch (e) {
    throw new Error(`this suite needs taskset (Debian: apt-get install util-linux): ${String(e)}`)
  }
  up = await FakeUpstream.start()
  const dataDir = tempDir("gw-standby-")
  const r = await setupWithProvider(dataDir, up.baseUrl("openai-chat"))
  expect(r.code, r.stderr).toBe(0)
  // REQUIRE_API_KEY: a batch line (an own-route call) that a worker does not take as internal is refused.
  gw = await startServerProcess(
    { DATA_DIR: dataDir, LOG_LEVEL: "info", REQUIRE_API_KEY: "true", GATEWAY_BATCH_POLL_MS: "200" },
    ["--workers", "2"],
    {
      prefix: ["taskset", "-c", String(firstCpu())]
    }
  )
  await until("worker 2 stands by", async () => (standingBy(gw) >= 1 ? true : undefined), 30_000)
}, 60_000)
afterAll(async () => {
  // The workers first: one left stopped by a failed case would not notice its primary go.
  if (gw && gw.child.exitCode === null) {
    for (const pid of childrenOf(gw.child.pid!)) process.kill(pid, "SIGKILL")
    await gw.stop("SIGKILL")
  }
  await up?.close()
})

describe("gateway --workers 2 on one core", () => {
  it("worker 1 serves every connection and worker 2 stands by; the primary says so at start", async () => {
    expect(gw.output()).toContain(
      "workers: 2 workers may use 1 core only (this process's CPU affinity, which they inherit): 1 serves and 1 stands by, to take a serving worker's place at once if it stops"
    )
    expect(gw.output()).toContain("1 serving and 1 standing by")
    expect(childrenOf(gw.child.pid!)).toHaveLength(2)
    const answered = new Set<number>()
    for (let i = 0; i < 16; i++) answered.add((await ping(gw.url)).worker)
    expect([...answered]).toEqual([1])
    const chat = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_KEY}` },
      body: JSON.stringify({ model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] })
    })
    expect(chat.status).toBe(200)
  })

  it("the serving worker killed with -9: the standby, already running, serves in its place, and the killed one comes back as the standby", async () => {
    const victim = (await ping(gw.url)).pid
    const standby = childrenOf(gw.child.pid!).find((pid) => pid !== victim)!
    expect(standby).toBeDefined()
    process.kill(victim, "SIGKILL")
    const back = await until(
      "worker 2 answers",
      async () => {
        try {
          const p = await ping(gw.url)
          return p.worker === 2 ? p : undefined
        } catch {
          return undefined
        }
      },
      30_000
    )
    // The process that stood by, not a worker started after the death.
    expect(back.pid).toBe(standby)
    expect(alive(victim)).toBe(false)
    expect(gw.output()).toMatch(/worker 1 exited \(SIGKILL\); worker 2, standing by, serves in its place/)
    await until("worker 1 stands by again", async () => (standingBy(gw) >= 2 ? true : undefined), 30_000)
    expect(gw.output()).toMatch(/worker 1 exited \(SIGKILL\); starting it again as a standby in/)
    const restarted = childrenOf(gw.child.pid!).find((pid) => pid !== standby)
    expect(restarted).toBeDefined()
    expect(restarted).not.toBe(victim)
    const answered = new Set<number>()
    for (let i = 0; i < 16; i++) answered.add((await ping(gw.url)).pid)
    expect([...answered]).toEqual([standby])
  }, 60_000)

  it("worker 1, now the standby, still runs the batch sweep, and its lines sent to the port are taken as its own by worker 2", async () => {
    // After the hand-over above: worker 2 serves, worker 1 (which runs the sweep) stands by.
    expect((await ping(gw.url)).worker).toBe(2)
    const client = new OpenAI({ apiKey: ADMIN_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 })
    const lines = Array.from({ length: 4 }, (_, i) =>
      JSON.stringify({
        custom_id: `line-${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: "openai-compatible/m1", messages: [{ role: "user", content: `hello ${i}` }] }
      })
    )
    const input = await client.files.create({ file: await toFile(Buffer.from(`${lines.join("\n")}\n`), "batch.jsonl"), purpose: "batch" })
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    const done = await until(
      "the batch ends",
      async () => {
        const b = await client.batches.retrieve(created.id)
        return b.status === "completed" || b.status === "failed" ? b : undefined
      },
      30_000
    )
    expect(done.request_counts).toEqual({ total: 4, completed: 4, failed: 0 })
  }, 45_000)

  it("a standby told to serve that does not listen (stopped) is killed after 10 s, and the next ready standby serves in its place", async () => {
    const serving = (await ping(gw.url)).pid
    const standby = childrenOf(gw.child.pid!).find((pid) => pid !== serving)!
    await until("worker 1 stands by, ready", async () => (standingBy(gw) >= 2 ? true : undefined), 30_000)
    const stood = standingBy(gw)
    process.kill(standby, "SIGSTOP")
    try {
      process.kill(serving, "SIGKILL")
      await until(
        "the primary kills the stuck standby",
        async () => (/worker 1 was told to serve and did not listen within 10 s; killing it/.test(gw.output()) ? true : undefined),
        30_000
      )
      const back = await until(
        "the port answers again",
        async () => {
          try {
            return await ping(gw.url)
          } catch {
            return undefined
          }
        },
        45_000
      )
      // The killed serving worker's slot, started again as a standby, took the port: a new process.
      expect([serving, standby]).not.toContain(back.pid)
      expect(back.worker).toBe(2)
      expect(alive(standby)).toBe(false)
      // Both slots started again as standbys (worker 2 before it took the port, worker 1 after its kill), each ready.
      await until("worker 1 back, standing by", async () => (standingBy(gw) >= stood + 2 ? true : undefined), 30_000)
      expect(childrenOf(gw.child.pid!)).toHaveLength(2)
    } finally {
      // A stopped process outlives a failed case otherwise (it never sees its primary go).
      if (alive(standby)) process.kill(standby, "SIGKILL")
    }
  }, 90_000)

  it("SIGTERM to the primary stops the serving worker and the standby, and exits 0", async () => {
    const workers = childrenOf(gw.child.pid!)
    expect(workers).toHaveLength(2)
    expect(await gw.stop("SIGTERM")).toBe(0)
    for (const pid of workers) expect(alive(pid)).toBe(false)
    expect(gw.output().match(/server stopped/g)?.length).toBeGreaterThanOrEqual(2)
  }, 30_000)
})

describe("gateway --workers 2 on one core, GATEWAY_WORKERS_STANDBY=false", () => {
  it("both workers serve, and the primary warns that they take turns", async () => {
    const dataDir = tempDir("gw-standby-off-")
    const r = await setupWithProvider(dataDir, up.baseUrl("openai-chat"))
    expect(r.code, r.stderr).toBe(0)
    const off = await startServerProcess({ DATA_DIR: dataDir, LOG_LEVEL: "info", GATEWAY_WORKERS_STANDBY: "false" }, ["--workers", "2"], {
      prefix: ["taskset", "-c", String(firstCpu())]
    })
    try {
      const agents = [await connectionTo(off.url, 1), await connectionTo(off.url, 2)]
      for (const a of agents) a.destroy()
      expect(off.output()).toContain("and every one serves (GATEWAY_WORKERS_STANDBY=false): they take turns there")
    } finally {
      await off.stop("SIGKILL")
    }
  }, 60_000)
})
