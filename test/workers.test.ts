import * as http from "node:http"
import WebSocket from "ws"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, runCli, setupWithProvider, startServerProcess, type ServerProcess } from "./support/cli.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { tempDir } from "./support/gateway.js"
import { alive } from "./support/processes.js"
import { until } from "./support/until.js"

/**
 * `gateway --workers 2` (docs/scale-out.md, "Workers"): two worker processes of one node:cluster
 * on one port, no Redis. Shared state travels through the primary over IPC (src/platform/state/clusterIpc.ts):
 * a breaker opened through one worker is open on the other within a second, an inbound rate limit
 * counts the requests of both exactly. A worker killed with -9 is started again while the port
 * keeps answering; SIGTERM to the primary stops every worker, and so does POST /api/shutdown.
 *
 * Which worker answered: `GET /api/health/ping` says (`pid`, `worker`). Node's cluster hands each
 * new connection to a worker, so a keep-alive connection (an agent with one socket) stays with
 * the worker it landed on: the test keeps one per worker.
 */
const admin = { authorization: `Bearer ${ADMIN_KEY}` }
/** Every worker serves, whatever the cores this machine gives the test (docs/scale-out.md, "Cores"). */
const BOTH_SERVE = { GATEWAY_WORKERS_STANDBY: "false" }

interface Answer {
  readonly status: number
  readonly body: any
}

/** One request on `agent`'s connection (`false`: a new connection). */
const request = (
  url: string,
  agent: http.Agent | false,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const data = init.body === undefined ? undefined : JSON.stringify(init.body)
    const req = http.request(
      url,
      {
        agent,
        method: init.method ?? (data === undefined ? "GET" : "POST"),
        headers: {
          ...(data === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(data) }),
          ...init.headers
        }
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c))
        res.on("end", () => {
          let body: unknown = text
          try {
            body = JSON.parse(text)
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode ?? 0, body })
        })
      }
    )
    req.on("error", reject)
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer from ${url} within 10 s`)))
    req.end(data)
  })

const ping = async (url: string, agent: http.Agent | false) => {
  const r = await request(`${url}/api/health/ping`, agent)
  expect(r.status).toBe(200)
  return r.body as { pid: number; worker?: number }
}

/** A keep-alive connection held by worker `n`: new ones until the cluster hands one to it. */
const connectionTo = async (url: string, n: number) =>
  until(
    `a connection to worker ${n}`,
    async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      if ((await ping(url, agent)).worker === n) return agent
      agent.destroy()
      return undefined
    },
    30_000
  )

const chat = (url: string, agent: http.Agent, key = ADMIN_KEY) =>
  request(`${url}/v1/chat/completions`, agent, {
    body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${key}` }
  })

let up: FakeUpstream
beforeAll(async () => {
  up = await FakeUpstream.start()
})
afterAll(() => up?.close())

const configured = async () => {
  const dataDir = tempDir("gw-workers-")
  const r = await setupWithProvider(dataDir, up.baseUrl("openai-chat"))
  expect(r.code, r.stderr).toBe(0)
  return dataDir
}

describe("--workers: the command line", () => {
  it("GATEWAY_WORKERS_STANDBY other than true or false is refused with exit 2 and a clear message", async () => {
    const r = await runCli(["--port", "0", "--workers", "2"], { DATA_DIR: tempDir(), GATEWAY_WORKERS_STANDBY: "maybe" })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('GATEWAY_WORKERS_STANDBY must be true or false, got "maybe"')
  })

  it.each([["0"], ["65"], ["two"], ["1.5"], ["-1"]])("--workers %s is refused with exit 2 and a clear message", async (value) => {
    const r = await runCli(["--port", "0", "--workers", value], { DATA_DIR: tempDir() })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(`--workers: must be a whole number from 1 to 64 or "auto", got "${value}"`)
  })
})

describe("gateway --workers 2", () => {
  let gw: ServerProcess
  let a: http.Agent
  let b: http.Agent
  beforeAll(async () => {
    // Both workers serve on any machine: with one core the second would stand by (test/workers.standby.test.ts).
    gw = await startServerProcess({ DATA_DIR: await configured(), LOG_LEVEL: "info", INSPECTOR_HTTP_PROXY_PORT: "0", ...BOTH_SERVE }, [
      "--workers",
      "2"
    ])
    // The first "listening" line is worker 1's; worker 2 starts after it.
    a = await connectionTo(gw.url, 1)
    b = await connectionTo(gw.url, 2)
  }, 60_000)
  afterAll(async () => {
    a?.destroy()
    b?.destroy()
    if (gw && gw.child.exitCode === null) await gw.stop("SIGKILL")
  })

  it("serves from both workers, two processes other than the primary, and the primary says at start what is shared", async () => {
    const seen = new Map<number, number>()
    for (let i = 0; i < 40 && seen.size < 2; i++) {
      const p = await ping(gw.url, false)
      seen.set(p.worker!, p.pid)
    }
    expect([...seen.keys()].sort()).toEqual([1, 2])
    expect(seen.get(1)).not.toBe(seen.get(2))
    expect([...seen.values()]).not.toContain(gw.child.pid)
    const out = gw.output()
    expect(out).toContain("workers: 2 processes share the port")
    expect(out).toMatch(/workers: shared through the SQLite file [^"]*gateway\.db/)
    expect(out).toContain("shared through the primary over IPC (no REDIS_URL): circuit breakers")
    expect(out).toContain("workers: per worker:")
  })

  it("a request on a kept-alive connection costs no message between the processes while nobody looks, and the inspector still shows the node's requests", async () => {
    /** The messages worker `agent`'s process sent to the primary, by kind (gateway_node_messages_total). */
    const sent = async (agent: http.Agent) => {
      const text = (await request(`${gw.url}/metrics`, agent, { headers: admin })).body as string
      const out = new Map<string, number>()
      for (const line of String(text).split("\n")) {
        const m = /^gateway_node_messages_total\{kind="([^"]+)"\} (\d+)/.exec(line)
        if (m) out.set(m[1]!, Number(m[2]))
      }
      return out
    }
    const total = (m: Map<string, number>) => [...m.values()].reduce((x, y) => x + y, 0)
    // Warm: the first requests read caches into memory.
    for (let i = 0; i < 3; i++) expect((await chat(gw.url, b)).status).toBe(200)
    const before = await sent(b)
    const startedAt = Date.now()
    for (let i = 0; i < 50; i++) expect((await chat(gw.url, b)).status).toBe(200)
    const seconds = Math.ceil((Date.now() - startedAt) / 1000)
    const after = await sent(b)
    const grew = [...after].filter(([k, n]) => n !== (before.get(k) ?? 0)).map(([k, n]) => `${k} +${n - (before.get(k) ?? 0)}`)
    // A key's average goes to the other processes at most once a second (on a loaded machine the 50
    // requests may take several): counted apart, against the seconds they took.
    const averages = [...after].filter(([k]) => k.includes("averages")).reduce((n, [k, v]) => n + v - (before.get(k) ?? 0), 0)
    expect(averages, grew.join(", ")).toBeLessThanOrEqual(seconds + 1)
    // A few background messages may fall in the window (a heartbeat, a settings check), never one a request.
    expect(total(after) - total(before) - averages, grew.join(", ")).toBeLessThan(5)

    // Read through worker 1, worker 2's requests are listed: gathered when asked.
    const listed = (await request(`${gw.url}/api/tools/traffic-inspector/requests?source=agent-bridge&limit=1000`, a, { headers: admin }))
      .body.requests as Array<any>
    expect(listed.filter((e) => e.path === "/v1/chat/completions" && e.status === 200).length).toBeGreaterThanOrEqual(50)
  })

  it("a breaker opened by failures seen through worker 1 is open on worker 2 within 1 s; a reset through worker 2 closes it on worker 1", async () => {
    const patch = await request(`${gw.url}/api/resilience`, a, {
      method: "PATCH",
      body: {
        providerBreaker: { apikey: { degradationThreshold: 1, failureThreshold: 2, resetTimeoutMs: 60_000 } },
        connectionCooldown: { apiKeyBaseMs: 1, maxCooldownMs: 1 }
      },
      headers: admin
    })
    expect(patch.status).toBe(200)
    // The settings are in the database; worker 2 reads them when it notices the change.
    const breakerOf = async (agent: http.Agent) => {
      const r = await request(`${gw.url}/api/resilience`, agent, { headers: admin })
      expect(r.status).toBe(200)
      return r.body as { settings: any; breakers: Array<{ provider: string; state: string }> }
    }
    await until("worker 2 has the new thresholds", async () => (await breakerOf(b)).settings.providerBreaker.apikey.failureThreshold === 2)
    up.requests.length = 0
    up.always({ status: 503 })
    try {
      expect((await chat(gw.url, a)).status).toBeGreaterThanOrEqual(500)
      await new Promise((r) => setTimeout(r, 5))
      expect((await chat(gw.url, a)).status).toBeGreaterThanOrEqual(500)
      expect(up.requests.length).toBe(2)
      const state = async (agent: http.Agent) => (await breakerOf(agent)).breakers.find((x) => x.provider === "openai-compatible")?.state
      expect(await state(a)).toBe("OPEN")
      const opened = Date.now()
      await until("the breaker is open on worker 2", async () => (await state(b)) === "OPEN", 1000)
      expect(Date.now() - opened).toBeLessThan(1000)
      // Worker 2 refuses without calling the upstream: the breaker is its own read model's.
      const refused = await chat(gw.url, b)
      expect(refused.status).toBe(503)
      expect(up.requests.length).toBe(2)

      const reset = await request(`${gw.url}/api/resilience/reset`, b, { body: {}, headers: admin })
      expect(reset.status).toBe(200)
      await until("the breaker is closed on worker 1", async () => (await state(a)) !== "OPEN", 1000)
    } finally {
      up.always({ content: "hello" })
      await request(`${gw.url}/api/resilience`, a, {
        method: "PATCH",
        body: {
          providerBreaker: { apikey: { degradationThreshold: 7, failureThreshold: 12, resetTimeoutMs: 30_000 } },
          connectionCooldown: { apiKeyBaseMs: 3000, maxCooldownMs: 300_000 }
        },
        headers: admin
      })
    }
  })

  it("an inbound rate limit counts the requests of both workers exactly", { timeout: 60_000 }, async () => {
    // Limits count in fixed minutes: start early in one.
    const left = 60_000 - (Date.now() % 60_000)
    if (left < 20_000) await new Promise((r) => setTimeout(r, left + 50))
    const created = await request(`${gw.url}/api/keys`, a, { body: { name: "rpm4", rpm: 4 }, headers: admin })
    expect(created.status).toBe(201)
    const key = created.body.secret as string
    // Worker 2 learns of the new key from the database (within its store's 1 s check).
    await until("worker 2 knows the key's limit", async () => {
      const r = await request(`${gw.url}/api/rate-limits`, b, { headers: admin })
      return (r.body.inbound as Array<{ apiKeyId: string }>).some((k) => k.apiKeyId === created.body.id)
    })
    up.always({ content: "hello" })
    const statuses: Array<number> = []
    for (let i = 0; i < 8; i++) statuses.push((await chat(gw.url, i % 2 === 0 ? a : b, key)).status)
    // Each worker alone would let its own four through.
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429, 429, 429])
  })

  it("the live feed of a dashboard connected to one worker shows the requests of both", async () => {
    // Which worker the socket lands on does not matter: requests go through both.
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/api/live/ws`, { headers: admin })
    const frames: Array<any> = []
    ws.on("message", (d) => frames.push(JSON.parse(String(d))))
    try {
      await until("the feed says hello", async () => frames.some((f) => f.type === "hello") || undefined, 10_000)
      for (const agent of [a, b, a, b]) expect((await chat(gw.url, agent)).status).toBe(200)
      const completed = () => frames.filter((f) => f.type === "event" && f.event.event === "request.completed").length
      await until("all four requests are in the feed", async () => completed() >= 4 || undefined, 2_000)
    } finally {
      ws.close()
    }
  })

  it("the traffic inspector is one view: each worker lists the other's requests, a session spans both, the HTTP proxy started through worker 2 runs on worker 1", async () => {
    const T = "/api/tools/traffic-inspector"
    const list = async (agent: http.Agent) =>
      (await request(`${gw.url}${T}/requests?source=agent-bridge&limit=1000`, agent, { headers: admin })).body.requests as Array<any>
    const before = new Set((await list(a)).map((e) => e.id))
    expect((await chat(gw.url, b)).status).toBe(200)
    const served = await until(
      "worker 1 lists the request worker 2 served",
      async () => (await list(a)).find((e) => !before.has(e.id) && e.status === 200),
      5_000
    )
    expect(served).toMatchObject({ source: "agent-bridge", method: "POST", detectedKind: "llm" })
    expect((await list(b)).map((e) => e.id)).toContain(served.id)

    // A session started through worker 1 records what worker 2 serves; stopped through worker 2, saved with it.
    const started = await request(`${gw.url}${T}/sessions`, a, { body: { name: "both workers" }, headers: admin })
    expect(started.status).toBe(201)
    await until(
      "worker 2 knows the session",
      async () =>
        ((await request(`${gw.url}${T}/sessions`, b, { headers: admin })).body.sessions as Array<any>).some(
          (s) => s.id === started.body.id
        ) || undefined,
      5_000
    )
    expect((await chat(gw.url, b)).status).toBe(200)
    expect((await chat(gw.url, a)).status).toBe(200)
    await until(
      "the session holds both requests",
      async () =>
        ((await request(`${gw.url}${T}/sessions/${started.body.id}`, a, { headers: admin })).body.requests?.length ?? 0) >= 2 || undefined,
      5_000
    )
    const stopped = await request(`${gw.url}${T}/sessions/${started.body.id}`, b, {
      method: "PATCH",
      body: { action: "stop" },
      headers: admin
    })
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200)
    expect(stopped.body).toMatchObject({ state: "saved", count: 2 })
    const saved = await request(`${gw.url}${T}/sessions/${started.body.id}`, a, { headers: admin })
    expect(saved.body.session).toMatchObject({ state: "saved", count: 2 })
    expect(saved.body.requests).toHaveLength(2)

    // The HTTP proxy: started through worker 2, it runs on worker 1, and both say so.
    const on = await request(`${gw.url}${T}/capture-modes/http-proxy`, b, { body: { action: "start" }, headers: admin })
    expect(on.status, JSON.stringify(on.body)).toBe(200)
    const port = on.body.httpProxy.port as number
    expect(on.body.httpProxy).toMatchObject({ running: true })
    for (const agent of [a, b])
      expect((await request(`${gw.url}${T}/capture-modes`, agent, { headers: admin })).body.httpProxy).toMatchObject({
        running: true,
        port
      })
    const target = new URL(up.baseUrl("openai-chat"))
    const viaProxy = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { host: "127.0.0.1", port, method: "GET", path: `${target.origin}/proxied-through-worker-1`, headers: { host: target.host } },
        (res) => {
          res.resume()
          res.on("end", () => resolve(res.statusCode ?? 0))
        }
      )
      req.on("error", reject)
      req.end()
    })
    expect(viaProxy).toBeGreaterThan(0)
    await until(
      "worker 2 lists the proxied request",
      async () =>
        ((await request(`${gw.url}${T}/requests?source=http-proxy`, b, { headers: admin })).body.requests as Array<any>).find(
          (e) => e.path === "/proxied-through-worker-1"
        ),
      5_000
    )
    const off = await request(`${gw.url}${T}/capture-modes/http-proxy`, a, { body: { action: "stop" }, headers: admin })
    expect(off.body.httpProxy).toMatchObject({ running: false })
    expect((await request(`${gw.url}${T}/capture-modes`, b, { headers: admin })).body.httpProxy.running).toBe(false)
  })

  it("an idempotent burst split across both workers makes one upstream call (the claim is held by the primary)", async () => {
    up.always({ content: "only once", delayMs: 300 })
    try {
      const before = up.requests.length
      const send = (agent: http.Agent) =>
        request(`${gw.url}/v1/chat/completions`, agent, {
          body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] },
          headers: { authorization: `Bearer ${ADMIN_KEY}`, "idempotency-key": `burst-${before}` }
        })
      const answers = await Promise.all([a, b, a, b, a, b].map(send))
      for (const r of answers) expect(r.status).toBe(200)
      expect(new Set(answers.map((r) => r.body.id)).size).toBe(1)
      expect(up.requests.length - before).toBe(1)
    } finally {
      up.always({})
    }
  })

  it("a worker killed with -9 is started again and the port keeps answering", async () => {
    const victim = (await ping(gw.url, b)).pid
    b.destroy()
    process.kill(victim, "SIGKILL")
    const failures: Array<unknown> = []
    const back = await until(
      "worker 2 answers again",
      async () => {
        try {
          const p = await ping(gw.url, false)
          return p.worker === 2 && p.pid !== victim ? p : undefined
        } catch (e) {
          failures.push(e)
          return undefined
        }
      },
      30_000
    )
    expect(back.pid).not.toBe(victim)
    expect(alive(victim)).toBe(false)
    // At most the one connection the cluster handed the worker as it died.
    expect(failures.length).toBeLessThanOrEqual(1)
    for (let i = 0; i < 6; i++) await ping(gw.url, false)
    expect(gw.output()).toMatch(/worker 2 exited \(SIGKILL\); starting it again in/)
    b = await connectionTo(gw.url, 2)
  }, 45_000)

  it("SIGTERM to the primary stops every worker gracefully and exits 0", async () => {
    const pids = [(await ping(gw.url, a)).pid, (await ping(gw.url, b)).pid]
    a.destroy()
    b.destroy()
    expect(await gw.stop("SIGTERM")).toBe(0)
    for (const pid of pids) expect(alive(pid)).toBe(false)
    expect(gw.output().match(/server stopped/g)?.length).toBeGreaterThanOrEqual(2)
  }, 30_000)
})

describe("gateway --workers 2: operator stop", () => {
  it("POST /api/shutdown through one worker stops both and the primary exits 0", async () => {
    const gw = await startServerProcess({ DATA_DIR: await configured(), ...BOTH_SERVE }, ["--workers", "2"])
    try {
      const a = await connectionTo(gw.url, 1)
      const b = await connectionTo(gw.url, 2)
      const pids = [(await ping(gw.url, a)).pid, (await ping(gw.url, b)).pid]
      const stop = await request(`${gw.url}/api/shutdown`, b, { method: "POST", headers: admin })
      expect(stop.status).toBe(202)
      a.destroy()
      b.destroy()
      const code = await new Promise<number | null>((r) =>
        gw.child.exitCode !== null ? r(gw.child.exitCode) : gw.child.once("exit", (c) => r(c))
      )
      expect(code).toBe(0)
      for (const pid of pids) expect(alive(pid)).toBe(false)
    } finally {
      if (gw.child.exitCode === null) gw.child.kill("SIGKILL")
    }
  }, 60_000)
})
