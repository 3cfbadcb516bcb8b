import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runCli, startServerProcess, type ServerProcess } from "../support/cli.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { call } from "../support/gateway.js"
import { OtlpReceiver } from "../support/otlpReceiver.js"
import { until } from "../support/until.js"
import { createDatabase, required, startNginx, type Server } from "./support/servers.js"

/**
 * The scale-out suite (issue: "two gateways on PostgreSQL and Redis behind nginx round-robin"):
 * two gateway processes, each started as a user starts one (`gateway` with DATABASE_URL and
 * REDIS_URL), on one fresh PostgreSQL database and one Redis, behind nginx; a fake upstream on
 * 127.0.0.1 that counts what reaches it; a small OTLP receiver for their traces.
 */
// Through nginx the management API needs credentials (a forwarded request is not a local
// caller): the admin key `gateway setup` makes. Inference needs no key until REQUIRE_API_KEY is on.
const ADMIN_KEY = "sk-gateway-scaleout-admin-0123456789"
const admin: Record<string, string> = {}

let up: FakeUpstream
let otlp: OtlpReceiver
let nginx: Server
let a: ServerProcess
let b: ServerProcess
let database: ReturnType<typeof createDatabase> | undefined
let sharedEnv: Record<string, string> = {}
const STORAGE_KEY = "scale-out storage key, the same on every instance"

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "gw-scaleout-"))

const startOne = (name: string, env: Record<string, string>) =>
  startServerProcess({
    DATA_DIR: tmp(),
    GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SERVICE_NAME: "gateway",
    OTEL_RESOURCE_ATTRIBUTES: `service.instance.id=${name}`,
    OTEL_BSP_SCHEDULE_DELAY: "50",
    ...env
  })

beforeAll(async () => {
  const maintenanceUrl = required("GATEWAY_TEST_DATABASE_URL")
  const redisUrl = required("GATEWAY_TEST_REDIS_URL")
  database = createDatabase(maintenanceUrl, "scaleout")
  // Redis database 9 for this file, emptied first: nothing of an earlier run leaks in.
  const redis = `${redisUrl.replace(/\/\d*$/, "")}/9`
  up = await FakeUpstream.start()
  otlp = await OtlpReceiver.start()
  // Every gateway on one database encrypts provider secrets with the same key.
  const env = { DATABASE_URL: database.url, REDIS_URL: redis, STORAGE_ENCRYPTION_KEY: STORAGE_KEY }
  sharedEnv = env
  // The README's first step, on the shared database: `gateway setup` makes the admin key.
  const setup = await runCli(["setup", "--non-interactive"], {
    ...env,
    DATA_DIR: tmp(),
    GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
    GATEWAY_API_KEY: ADMIN_KEY
  })
  expect(setup.code, setup.stderr).toBe(0)
  admin["authorization"] = `Bearer ${ADMIN_KEY}`
  // One after the other: the first migrates the new database, the second finds it migrated.
  a = await startOne("gw-a", env)
  b = await startOne("gw-b", env)
  nginx = await startNginx([new URL(a.url).host, new URL(b.url).host])
  const provider = await call(`${nginx.url}/api/providers`, {
    body: { provider: "openai", name: "oai", apiKey: "sk-upstream", baseUrl: up.baseUrl("openai-chat"), models: ["gpt-4o"] },
    headers: admin
  })
  expect(provider.status, JSON.stringify(provider.body)).toBe(201)
}, 180_000)

afterAll(async () => {
  await nginx?.stop()
  for (const gw of [a, b]) await gw?.stop()
  await up?.close()
  await otlp?.close()
  database?.drop()
})

const chat = (base: string, headers: Record<string, string> = {}, body: Record<string, unknown> = {}) =>
  call(`${base}/v1/chat/completions`, {
    body: { model: "oai/gpt-4o", messages: [{ role: "user", content: "hi" }], ...body },
    headers: { ...admin, ...headers }
  })

const upstreamCalls = () => up.requests.filter((r) => r.path.endsWith("/chat/completions")).length

describe("two gateways on PostgreSQL and Redis behind nginx", () => {
  it("nginx spreads requests over both, and each sees what the other configured", async () => {
    for (let i = 0; i < 6; i++) {
      const res = await chat(nginx.url)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
    }
    // A connection added through nginx (on either) is listed by both.
    for (const gw of [a, b]) {
      const list = await call(`${gw.url}/api/providers`, { headers: admin })
      expect(list.body.connections.map((c: any) => c.name)).toContain("oai")
    }
    const counts = await Promise.all([a, b].map(async (gw) => requestsCounted(gw.url)))
    expect(
      counts.every((n) => n > 0),
      `requests counted by each: ${counts}`
    ).toBe(true)
  })

  it("a budget spent through one is enforced by the other", async () => {
    const key = await call(`${nginx.url}/api/keys`, { body: { name: "budgeted", scopes: ["inference"] }, headers: admin })
    expect(key.status, JSON.stringify(key.body)).toBe(201)
    const secret = key.body.secret as string
    const asKey = { authorization: `Bearer ${secret}` }
    const first = await chat(a.url, asKey)
    expect(first.status).toBe(200)
    const cost = Number(first.headers.get("x-gateway-response-cost"))
    expect(cost).toBeGreaterThan(0)
    await call(`${nginx.url}/api/settings/feature-flags`, {
      method: "PUT",
      body: { key: "GATEWAY_EMERGENCY_FALLBACK", value: "false" },
      headers: admin
    })
    // Room for two more answers: the budget counts what the key already spent today.
    const set = await call(`${nginx.url}/api/usage/budget`, { body: { apiKeyId: key.body.id, dailyLimitUsd: cost * 2.5 }, headers: admin })
    expect(set.status, JSON.stringify(set.body)).toBe(200)
    expect((await chat(a.url, asKey)).status).toBe(200)
    expect((await chat(a.url, asKey)).status).toBe(200)
    // Spent on A: B refuses, within a second.
    await until("B refuses the spent key", async () => (await chat(b.url, asKey)).status === 429, 2_000)
    const refused = await chat(b.url, asKey)
    expect(refused.body.error.code).toBe("budget_exhausted")
  })

  it("a budget raced from both sides is not over-spent", async () => {
    const key = await call(`${nginx.url}/api/keys`, { body: { name: "raced", scopes: ["inference"] }, headers: admin })
    const asKey = { authorization: `Bearer ${key.body.secret}` }
    const probe = await chat(a.url, asKey)
    const cost = Number(probe.headers.get("x-gateway-response-cost"))
    // A budget starts from the usage rows in the database, which a request's row reaches within
    // ~20 ms of its end (docs/scale-out.md, "Redis"): the budget is set once the probe's row is there.
    const probeId = probe.headers.get("x-gateway-request-id")
    await until(
      "the probe's usage row is written",
      async () =>
        ((await call(`${b.url}/api/usage/request-logs?limit=50`, { headers: admin })).body.requests ?? []).some(
          (r: any) => r.requestId === probeId
        ),
      2_000
    )
    await call(`${nginx.url}/api/usage/budget`, { body: { apiKeyId: key.body.id, dailyLimitUsd: cost * 4.5 }, headers: admin })
    // Both know the budget (a configuration change reaches the other within a second).
    for (const gw of [a, b]) {
      await until(
        "the budget is known",
        async () => ((await call(`${gw.url}/api/usage/budget?apiKeyId=${key.body.id}`, { headers: admin })).body.budgets ?? []).length > 0,
        2_000
      )
    }
    // 16 requests at once, half to each: the budget has room for 3 more. B has never served this
    // key: it holds what its requests cost on average (any key's) against the shared totals.
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => chat(i % 2 === 0 ? a.url : b.url, asKey)))
    const answered = results.filter((r) => r.status === 200).length
    expect(results.every((r) => r.status === 200 || r.status === 429)).toBe(true)
    // Exact holds across instances (docs/scale-out.md, "Redis"): at most the three that fit, plus
    // one whose real cost came out above what was held for it.
    expect(answered, `answers: ${answered}`).toBeLessThanOrEqual(4)
    expect(answered).toBeGreaterThanOrEqual(1)
  })

  it("an idempotent burst split across both makes one upstream call", async () => {
    up.always({ content: "only once", delayMs: 300 })
    try {
      const before = upstreamCalls()
      const key = `burst-${randomBytes(4).toString("hex")}`
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => chat(i % 2 === 0 ? a.url : b.url, { "idempotency-key": key })))
      for (const r of results) expect(r.status, JSON.stringify(r.body)).toBe(200)
      expect(new Set(results.map((r) => r.body.id)).size).toBe(1)
      expect(results.every((r) => r.body.choices[0].message.content === "only once")).toBe(true)
      expect(upstreamCalls() - before).toBe(1)
    } finally {
      up.always({})
    }
  })

  it("a breaker opened by failures seen on one is open on the other", async () => {
    const flaky = await FakeUpstream.start()
    try {
      flaky.always({ status: 500 })
      // Cooldowns of 1 ms: a failing connection is asked again at once, so its breaker counts every failure.
      const short = await call(`${nginx.url}/api/resilience`, {
        method: "PATCH",
        body: { connectionCooldown: { apiKeyBaseMs: 1, maxCooldownMs: 1 } },
        headers: admin
      })
      expect(short.status, JSON.stringify(short.body)).toBe(200)
      const added = await call(`${nginx.url}/api/providers`, {
        body: { provider: "openai-compatible", name: "flaky", baseUrl: flaky.baseUrl("openai-chat"), models: ["m1"] },
        headers: admin
      })
      expect(added.status, JSON.stringify(added.body)).toBe(201)
      await until(
        "B knows the new connection",
        async () => (await call(`${b.url}/api/providers`, { headers: admin })).body.connections.some((c: any) => c.name === "flaky"),
        2_000
      )
      const open = async (base: string) =>
        ((await call(`${base}/api/resilience`, { headers: admin })).body.breakers as Array<any>).some(
          (x) => x.origin === new URL(flaky.url).origin && x.state === "OPEN"
        )
      // An API-key provider's breaker opens after 12 failures in a row (docs/resilience.md).
      for (let i = 0; i < 16 && !(await open(a.url)); i++) await chat(a.url, {}, { model: "flaky/m1" })
      expect(await open(a.url)).toBe(true)
      await until("the breaker is open on B", () => open(b.url), 1_500)
      const before = flaky.requests.length
      const res = await chat(b.url, {}, { model: "flaky/m1" })
      expect(res.status).toBeGreaterThanOrEqual(500)
      expect(flaky.requests.length).toBe(before)
    } finally {
      await flaky.close()
    }
  })

  it("/metrics of each counts its own requests", async () => {
    const [a0, b0] = [await requestsCounted(a.url), await requestsCounted(b.url)]
    for (let i = 0; i < 3; i++) expect((await chat(a.url)).status).toBe(200)
    for (let i = 0; i < 5; i++) expect((await chat(b.url)).status).toBe(200)
    expect((await requestsCounted(a.url)) - a0).toBe(3)
    expect((await requestsCounted(b.url)) - b0).toBe(5)
  })

  it("each exports its traces over OTLP, named by its instance", async () => {
    await until(
      "spans from both instances",
      () => {
        const instances = new Set(
          otlp.spans.filter((s) => s.attributes["gen_ai.operation.name"] === "chat").map((s) => s.resource["service.instance.id"])
        )
        return instances.has("gw-a") && instances.has("gw-b")
      },
      10_000
    )
    const attempt = otlp.spans.find(
      (s) => s.attributes["gen_ai.request.model"] === "gpt-4o" && s.attributes["gen_ai.provider.name"] !== undefined
    )
    expect(attempt?.attributes["gen_ai.usage.input_tokens"]).toBe(11)
  })
})

describe("a gateway joining with another storage key", () => {
  it("refuses to start, saying every gateway on the database needs the same STORAGE_ENCRYPTION_KEY", async () => {
    const r = await runCli(["--port", "0"], {
      ...sharedEnv,
      DATA_DIR: tmp(),
      GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
      STORAGE_ENCRYPTION_KEY: "a different key"
    })
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/encrypted with another storage key than this STORAGE_ENCRYPTION_KEY/)
    expect(r.stderr).not.toContain("a different key")
  })
})

/** `gateway_requests_total` summed over the chat route, as the instance's /metrics says. */
const requestsCounted = async (base: string): Promise<number> => {
  const res = await fetch(`${base}/metrics`, { headers: admin })
  const text = await res.text()
  let total = 0
  for (const line of text.split("\n")) {
    if (line.startsWith("gateway_requests_total{") && line.includes("chat")) total += Number(line.slice(line.lastIndexOf(" ") + 1))
  }
  return total
}
