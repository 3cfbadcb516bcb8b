import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runCli, startServerProcess, type ServerProcess } from "../support/cli.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { call } from "../support/gateway.js"
import { until } from "../support/until.js"
import { Receiver } from "../support/webhookReceiver.js"
import { chatOnce, failures, sample, startLoad } from "./support/load.js"
import { createDatabase, psql, type RestartableServer, startNginx, startPostgres, startRedis, type Server } from "./support/servers.js"

/**
 * The parts under two gateways fail under load (docs/scale-out.md, "Redis unreachable" and
 * "PostgreSQL unreachable"; docs/resilience.md, "When the store fails"): a private Redis and a
 * private PostgreSQL server of this file's own, each stopped for 15 s and started again while
 * four clients send chat requests (half streamed) through nginx to two gateways. Every request
 * is answered; the gauges and the log say what happened; once the part is back it is used again,
 * and no usage row, webhook delivery or audit row is lost.
 */
const ADMIN_KEY = "sk-gateway-outages-admin-0123456789"
const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const STORAGE_KEY = "outages storage key, the same on every instance"
const OUTAGE_MS = 15_000

let pg: RestartableServer
let redis: RestartableServer
let up: FakeUpstream
let receiver: Receiver
let nginx: Server
let a: ServerProcess
let b: ServerProcess
let database: ReturnType<typeof createDatabase>
let env: Record<string, string>
/** Chat requests answered 200 through the webhook's gateways: one `request.completed` delivery each. */
let completed = 0

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "gw-outages-"))
const startOne = (extra: Record<string, string> = {}) =>
  startServerProcess({
    DATA_DIR: tmp(),
    GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
    GATEWAY_WEBHOOK_QUEUE_SIZE: "100000",
    ...env,
    ...extra
  })
const metrics = async (gw: ServerProcess) => {
  const res = await fetch(`${gw.url}/metrics`, { headers: admin })
  expect(res.status).toBe(200)
  return res.text()
}
const count = (table: string, url = database.url) => Number(psql(url, `SELECT count(*) FROM ${table}`))
const warnings = (gw: ServerProcess, pattern: RegExp) =>
  gw
    .output()
    .split("\n")
    .filter((l) => pattern.test(l)).length

beforeAll(async () => {
  // Durable commits: a commit the gateway was told of survives the stop (an immediate one, as a crash).
  pg = await startPostgres({ durable: true })
  redis = await startRedis()
  database = createDatabase(pg.url, "outages")
  up = await FakeUpstream.start()
  up.always({ content: "steady" })
  receiver = await Receiver.start()
  // Deliveries stay pending (the receiver never answers): each one is a row of webhook_deliveries.
  receiver.answer = () => "hang"
  env = { DATABASE_URL: database.url, REDIS_URL: `${redis.url}/0`, STORAGE_ENCRYPTION_KEY: STORAGE_KEY }
  const setup = await runCli(["setup", "--non-interactive"], {
    ...env,
    DATA_DIR: tmp(),
    GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
    GATEWAY_API_KEY: ADMIN_KEY
  })
  expect(setup.code, setup.stderr).toBe(0)
  a = await startOne()
  const provider = await call(`${a.url}/api/providers`, {
    body: { provider: "openai", name: "oai", apiKey: "sk-upstream", baseUrl: up.baseUrl("openai-chat"), models: ["gpt-4o"] },
    headers: admin
  })
  expect(provider.status, JSON.stringify(provider.body)).toBe(201)
  const hook = await call(`${a.url}/api/webhooks`, { body: { url: receiver.url, events: ["request.completed"] }, headers: admin })
  expect(hook.status, JSON.stringify(hook.body)).toBe(201)
  // B reads the webhooks at its start: it delivers its own requests' events too.
  b = await startOne()
  nginx = await startNginx([new URL(a.url).host, new URL(b.url).host])
}, 180_000)

afterAll(async () => {
  await nginx?.stop()
  for (const gw of [a, b]) await gw?.stop()
  await up?.close()
  await receiver?.close()
  database?.drop()
  await redis?.stop()
  await pg?.stop()
})

const LOAD = { model: "oai/gpt-4o", headers: admin, timeoutMs: 10_000 }

describe("Redis stopped for 15 s under load", () => {
  it("every request is answered, the gauge says 0 with one warning, and within 5 s of its return a breaker opened through one gateway is seen by the other", async () => {
    for (const gw of [a, b]) expect(sample(await metrics(gw), "gateway_shared_state_up")).toBe(1)
    const load = startLoad(nginx.url, LOAD)
    await new Promise((r) => setTimeout(r, 1_000))
    await redis.halt()
    const haltedAt = Date.now()
    for (const gw of [a, b])
      await until("the gauge says Redis is down", async () => sample(await metrics(gw), "gateway_shared_state_up") === 0, 5_000)
    await new Promise((r) => setTimeout(r, OUTAGE_MS - (Date.now() - haltedAt)))
    await redis.resume()
    const back = Date.now()
    for (const gw of [a, b])
      await until("the gauge says Redis is back", async () => sample(await metrics(gw), "gateway_shared_state_up") === 1, 5_000)
    const outcomes = await load.stop()
    completed += outcomes.filter((o) => o.status === 200).length
    expect(failures(outcomes), `requests not answered whole while Redis was down`).toEqual([])
    expect(outcomes.length).toBeGreaterThan(100)
    expect(outcomes.filter((o) => o.startedAt > haltedAt && o.endedAt < back).length).toBeGreaterThan(50)
    for (const gw of [a, b]) {
      expect(warnings(gw, /shared state: Redis at .* is unreachable/)).toBe(1)
      expect(warnings(gw, /shared state: Redis at .* is reachable again/)).toBe(1)
    }

    // Shared again: a breaker opened by failures through A is open on B (opening at 2 failures for this check).
    const patched = await call(`${a.url}/api/resilience`, {
      method: "PATCH",
      body: {
        providerBreaker: { apikey: { degradationThreshold: 1, failureThreshold: 2, resetTimeoutMs: 60_000 } },
        connectionCooldown: { apiKeyBaseMs: 1, maxCooldownMs: 1 }
      },
      headers: admin
    })
    expect(patched.status, JSON.stringify(patched.body)).toBe(200)
    await until(
      "B has the new thresholds",
      async () => (await call(`${b.url}/api/resilience`, { headers: admin })).body.settings.providerBreaker.apikey.failureThreshold === 2,
      2_000
    )
    const broken = await FakeUpstream.start()
    try {
      broken.always({ status: 503 })
      const added = await call(`${a.url}/api/providers`, {
        body: { provider: "openai-compatible", name: "broken", baseUrl: broken.baseUrl("openai-chat"), defaultModel: "m1" },
        headers: admin
      })
      expect(added.status, JSON.stringify(added.body)).toBe(201)
      await until(
        "B knows the new connection",
        async () =>
          (await call(`${b.url}/api/providers`, { headers: admin })).body.connections.some((c: { name: string }) => c.name === "broken"),
        2_000
      )
      const state = async (gw: ServerProcess) =>
        (await call(`${gw.url}/api/resilience`, { headers: admin })).body.breakers.find(
          (x: { provider: string }) => x.provider === "openai-compatible"
        )?.state
      for (let i = 0; i < 2; i++) {
        expect((await chatOnce(a.url, { ...LOAD, model: "broken/m1" }, false)).status).toBeGreaterThanOrEqual(500)
        // Past the connection's 1 ms cooldown: the second request reaches the upstream too.
        await new Promise((r) => setTimeout(r, 5))
      }
      expect(await state(a)).toBe("OPEN")
      await until("B sees the breaker A opened", async () => (await state(b)) === "OPEN", 1_000)
      expect(Date.now() - back).toBeLessThan(5_000 + 2_000)
    } finally {
      await call(`${a.url}/api/resilience`, {
        method: "PATCH",
        body: {
          providerBreaker: { apikey: { degradationThreshold: 7, failureThreshold: 12, resetTimeoutMs: 30_000 } },
          connectionCooldown: { apiKeyBaseMs: 3_000, maxCooldownMs: 300_000 }
        },
        headers: admin
      })
      await call(`${a.url}/api/resilience/reset`, { body: {}, headers: admin })
      await broken.close()
    }
  }, 90_000)
})

describe("PostgreSQL stopped for 15 s under load", () => {
  it("requests go on; usage rows, audit rows and webhook deliveries wait in memory and are all written when it is back; management writes answer 503 naming the cause", async () => {
    const usageBefore = count("usage")
    const auditBefore = count("audit_log")
    const load = startLoad(nginx.url, LOAD)
    await new Promise((r) => setTimeout(r, 1_000))
    await pg.halt()
    const haltedAt = Date.now()
    await new Promise((r) => setTimeout(r, 1_000))
    // A management write needs the database: a 503 that says why.
    const refused = await call(`${a.url}/api/keys`, { body: { name: "during the outage", scopes: ["inference"] }, headers: admin })
    expect(refused.status, JSON.stringify(refused.body)).toBe(503)
    expect(refused.body._tag).toBe("ServiceUnavailable")
    expect(refused.body.message).toMatch(/^store_unavailable: the database server is unreachable/)
    // Reading the keys does not: they are listed from memory (their last-used times as memory holds them).
    const listed = await call(`${a.url}/api/keys`, { headers: admin })
    expect(listed.status, JSON.stringify(listed.body)).toBe(200)
    expect(listed.body.keys.length).toBeGreaterThan(0)
    // An audited action that needs no database write (the breakers are in memory): its audit row waits too.
    const reset = await call(`${b.url}/api/resilience/reset`, { body: {}, headers: admin })
    expect(reset.status, JSON.stringify(reset.body)).toBe(200)
    for (const gw of [a, b]) await until("the store's gauge says 0", async () => sample(await metrics(gw), "gateway_store_up") === 0, 5_000)
    await new Promise((r) => setTimeout(r, OUTAGE_MS - (Date.now() - haltedAt)))
    await pg.resume()
    const back = Date.now()
    await new Promise((r) => setTimeout(r, 2_000))
    const outcomes = await load.stop()
    completed += outcomes.filter((o) => o.status === 200).length
    expect(failures(outcomes), "requests not answered whole while PostgreSQL was down").toEqual([])
    expect(outcomes.filter((o) => o.startedAt > haltedAt && o.endedAt < back).length).toBeGreaterThan(50)

    // Every answered request has its row, once the rows held in memory are written.
    await until("every usage row is written", () => count("usage") - usageBefore >= outcomes.length, 15_000).catch((e) => {
      const notable = (gw: ServerProcess) =>
        gw
          .output()
          .split("\n")
          .filter((l) => /"logLevel":"(WARN|ERROR)"/.test(l) && !/batch sweep/.test(l))
          .join("\n")
          .slice(-4000)
      const ids = new Set(psql(database.url, "SELECT request_id FROM usage").split("\n"))
      const missing = outcomes
        .filter((o) => !ids.has(o.requestId ?? ""))
        .map((o) => `${o.requestId} ${o.startedAt - haltedAt} ms after the stop`)
      throw new Error(
        `${e.message}: ${count("usage") - usageBefore} rows of ${outcomes.length} requests; missing ${missing.join(", ")}\n${notable(a)}\n${notable(b)}`
      )
    })
    expect(count("usage") - usageBefore).toBe(outcomes.length)
    for (const gw of [a, b]) {
      const scrape = await metrics(gw)
      expect(sample(scrape, "gateway_store_up")).toBe(1)
      expect(scrape).not.toMatch(/gateway_store_rows_dropped_total\{[^}]*\} [1-9]/)
      // One warning when the store goes down. Its words depend on what the gateway saw first: a refused connection, or the
      // "terminating connection" (57P01) an immediate stop sends to a connection that was open then.
      expect(
        warnings(
          gw,
          /store: (the database server is (unreachable|shutting down or starting)|the connection to the database server failed)/
        ),
        gw
          .output()
          .split("\n")
          .filter((l) => /store: /.test(l))
          .join("\n")
      ).toBe(1)
    }
    expect(count("audit_log")).toBeGreaterThan(auditBefore)
    expect(
      Number(psql(database.url, "SELECT count(*) FROM audit_log WHERE action LIKE '%resilience%' OR target LIKE '%resilience%'"))
    ).toBeGreaterThan(0)
    // Each request's event is a pending delivery (the receiver never answers), or one that finally failed.
    const deliveries = () =>
      count("webhook_deliveries") + Number(psql(database.url, "SELECT COALESCE(sum(failure_count), 0) FROM webhooks"))
    await until("every webhook delivery is on disk", () => deliveries() >= completed, 15_000)
    expect(deliveries()).toBe(completed)
  }, 120_000)

  it("past GATEWAY_STORE_BACKLOG_MAX_ROWS, rows are dropped, counted per table and logged", async () => {
    const own = createDatabase(pg.url, "outages_bound")
    const ownEnv = { DATABASE_URL: own.url, STORAGE_ENCRYPTION_KEY: STORAGE_KEY }
    const setup = await runCli(["setup", "--non-interactive"], {
      ...ownEnv,
      DATA_DIR: tmp(),
      GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
      GATEWAY_API_KEY: ADMIN_KEY
    })
    expect(setup.code, setup.stderr).toBe(0)
    const small = await startServerProcess({
      DATA_DIR: tmp(),
      GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
      ...ownEnv,
      GATEWAY_STORE_BACKLOG_MAX_ROWS: "5"
    })
    try {
      const added = await call(`${small.url}/api/providers`, {
        body: { provider: "openai", name: "oai", apiKey: "sk-upstream", baseUrl: up.baseUrl("openai-chat"), models: ["gpt-4o"] },
        headers: admin
      })
      expect(added.status, JSON.stringify(added.body)).toBe(201)
      const warm = await chatOnce(small.url, LOAD, false)
      expect(warm.status, warm.body).toBe(200)
      await until("the first row is written", () => count("usage", own.url) === 1, 5_000)
      await pg.halt()
      try {
        for (let i = 0; i < 12; i++) {
          const o = await chatOnce(small.url, LOAD, i % 2 === 0)
          expect(o.status, o.body).toBe(200)
        }
        const scrape = await metrics(small)
        expect(sample(scrape, "gateway_store_rows_dropped_total", '{table="usage"}')).toBeGreaterThanOrEqual(7)
        expect(small.output()).toMatch(/store: dropped usage rows/)
      } finally {
        await pg.resume()
      }
      await until("the rows held are written", () => count("usage", own.url) === 6, 15_000)
    } finally {
      await small.stop()
      own.drop()
    }
  }, 90_000)
})

describe("a gateway killed with kill -9 under load on PostgreSQL", () => {
  it("keeps the row of every request answered more than 100 ms before the kill", async () => {
    const c = await startOne()
    const load = startLoad(c.url, { ...LOAD, clients: 4, pauseMs: 5 })
    await new Promise((r) => setTimeout(r, 3_000))
    c.child.kill("SIGKILL")
    const killedAt = Date.now()
    const outcomes = await load.stop()
    const answered = outcomes.filter((o) => o.status === 200 && o.error === undefined && o.endedAt < killedAt - 100 && o.requestId !== null)
    expect(answered.length).toBeGreaterThan(100)
    const ids = new Set(psql(database.url, `SELECT request_id FROM usage WHERE ts >= ${answered[0]!.startedAt - 1000}`).split("\n"))
    const missing = answered.filter((o) => !ids.has(o.requestId!))
    expect(missing.map((o) => `${o.requestId} answered ${killedAt - o.endedAt} ms before the kill`)).toEqual([])
  }, 60_000)
})
