import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import WebSocket from "ws"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runCli, startServerProcess, type ServerProcess } from "../support/cli.js"
import { FakeOAuth } from "../support/fakeOAuth.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import * as Effect from "effect/Effect"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { call, startGateway } from "../support/gateway.js"
import { until } from "../support/until.js"
import { createDatabase, required } from "./support/servers.js"

/**
 * State that lived in one process although several gateways share a database and Redis
 * (docs/scale-out.md, "What is shared"): the failed-login throttle, the half-open probe slot,
 * OAuth flows in progress and the live feed, each now on the shared-state seam; and the
 * compression and context configuration, now in configuration bundles. Two gateway processes on
 * one PostgreSQL database and one Redis, asked directly (each case goes through one, then the other).
 */
const ADMIN_KEY = "sk-gateway-sharedstate-admin-0123456789"
const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const PASSWORD = "the admin password of both gateways"

let up: FakeUpstream
let a: ServerProcess
let b: ServerProcess
let database: ReturnType<typeof createDatabase> | undefined

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "gw-sharedstate-"))

beforeAll(async () => {
  database = createDatabase(required("GATEWAY_TEST_DATABASE_URL"), "sharedstate")
  const redis = `${required("GATEWAY_TEST_REDIS_URL").replace(/\/\d*$/, "")}/10`
  up = await FakeUpstream.start()
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: redis,
    STORAGE_ENCRYPTION_KEY: "shared-state storage key, the same on both",
    INITIAL_PASSWORD: PASSWORD
  }
  const setup = await runCli(["setup", "--non-interactive"], {
    ...env,
    DATA_DIR: tmp(),
    GATEWAY_ENV_FILE: path.join(tmp(), ".env"),
    GATEWAY_API_KEY: ADMIN_KEY
  })
  expect(setup.code, setup.stderr).toBe(0)
  const start = () => startServerProcess({ DATA_DIR: tmp(), GATEWAY_ENV_FILE: path.join(tmp(), ".env"), ...env })
  a = await start()
  b = await start()
}, 180_000)

afterAll(async () => {
  for (const gw of [a, b]) await gw?.stop()
  await up?.close()
  database?.drop()
})

const chat = (base: string, model: string) =>
  call(`${base}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }] } })
const addConnection = async (body: Record<string, unknown>) => {
  const added = await call(`${a.url}/api/providers`, { body, headers: admin })
  expect(added.status, JSON.stringify(added.body)).toBe(201)
  await until(
    "B knows the new connection",
    async () =>
      (await call(`${b.url}/api/providers`, { headers: admin })).body.connections.some((c: { name: string }) => c.name === body["name"]),
    2_000
  )
}

describe("state shared by two gateways on PostgreSQL and Redis", () => {
  it("failed logins through one gateway count on the other: guesses spread over both are throttled as one", async () => {
    const login = (base: string, password: string) => call(`${base}/api/auth/login`, { body: { password } })
    // Five free failures in all, alternating between the two gateways.
    for (let i = 0; i < 5; i++) expect((await login(i % 2 === 0 ? a.url : b.url, "wrong guess")).status).toBe(401)
    for (const base of [a.url, b.url]) {
      const refused = await login(base, "wrong guess")
      expect(refused.status).toBe(429)
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    }
    // Even the right password waits out the delay, on either.
    expect((await login(b.url, PASSWORD)).status).toBe(429)
  })

  it("the half-open probe slot is one between them: while one gateway's probe is out, the other sends none", async () => {
    const flaky = await FakeUpstream.start()
    try {
      flaky.always({ status: 503 })
      const patched = await call(`${a.url}/api/resilience`, {
        method: "PATCH",
        body: {
          providerBreaker: { apikey: { degradationThreshold: 1, failureThreshold: 2, resetTimeoutMs: 1_000 } },
          connectionCooldown: { apiKeyBaseMs: 1, maxCooldownMs: 1 }
        },
        headers: admin
      })
      expect(patched.status, JSON.stringify(patched.body)).toBe(200)
      await addConnection({ provider: "openai-compatible", name: "flaky", baseUrl: flaky.baseUrl("openai-chat"), models: ["m1"] })
      const breaker = async (base: string) =>
        (
          (await call(`${base}/api/resilience`, { headers: admin })).body.breakers as Array<{
            origin: string
            state: string
            probing: boolean
          }>
        ).find((x) => x.origin === new URL(flaky.url).origin)
      await until(
        "B has the new thresholds",
        async () => (await call(`${b.url}/api/resilience`, { headers: admin })).body.settings.providerBreaker.apikey.failureThreshold === 2,
        2_000
      )
      for (let i = 0; i < 10 && (await breaker(a.url))?.state !== "OPEN"; i++) {
        await chat(a.url, "flaky/m1")
        await new Promise((r) => setTimeout(r, 5))
      }
      await until(
        "the breaker is open on both",
        async () => (await breaker(a.url))?.state === "OPEN" && (await breaker(b.url))?.state === "OPEN",
        2_000
      )
      await until("the reset timeout has passed", async () => (await breaker(a.url))?.state === "HALF_OPEN", 3_000)
      // The probe through A is slow to answer: its slot is taken meanwhile.
      flaky.always({ content: "recovered", delayMs: 2_000 })
      const seen = flaky.requests.length
      const probe = chat(a.url, "flaky/m1")
      await until("A's probe reached the upstream", async () => flaky.requests.length === seen + 1, 2_000)
      await until("B was told a probe is out", async () => (await breaker(b.url))?.probing === true, 1_000)
      const refused = await chat(b.url, "flaky/m1")
      expect(refused.status).toBe(503)
      expect(flaky.requests.length).toBe(seen + 1)
      expect((await probe).status).toBe(200)
      await until(
        "the breaker is closed on B",
        async () => (await breaker(b.url)) === undefined || (await breaker(b.url))?.state === "CLOSED",
        2_000
      )
      expect((await chat(b.url, "flaky/m1")).status).toBe(200)
    } finally {
      await flaky.close()
    }
  })

  it("an OAuth sign-in started on one gateway is completed on the other", async () => {
    const auth = await FakeOAuth.start()
    try {
      const callback = `${b.url}/api/oauth/claude-code/callback`
      const started = await call(`${a.url}/api/oauth/claude-code/authorize`, {
        body: {
          name: "claude-shared",
          authorizeUrl: `${auth.url}/authorize`,
          tokenUrl: `${auth.url}/token`,
          redirectUri: callback,
          baseUrl: up.baseUrl("anthropic")
        },
        headers: admin
      })
      expect(started.status, JSON.stringify(started.body)).toBe(200)
      const approved = await fetch(started.body.authorizeUrl, { redirect: "manual" })
      const location = new URL(approved.headers.get("location")!)
      expect(location.origin).toBe(new URL(b.url).origin)
      const done = await call(location.toString())
      expect(done.status, JSON.stringify(done.body)).toBe(200)
      expect(done.body).toMatchObject({ created: true, connection: { name: "claude-shared", authType: "oauth" } })
      expect(auth.verified).toBe(1)
      // Used once, whichever gateway is asked again.
      expect((await call(location.toString().replace(b.url, a.url))).status).toBe(400)
    } finally {
      await auth.close()
    }
  })

  it("a dashboard's live feed on one gateway shows the requests the other serves", async () => {
    await addConnection({ provider: "openai-compatible", name: "live", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] })
    const ws = new WebSocket(`${a.url.replace(/^http/, "ws")}/api/live/ws`, { headers: admin })
    const frames: Array<any> = []
    ws.on("message", (d) => frames.push(JSON.parse(String(d))))
    try {
      await until("the feed says hello", async () => frames.some((f) => f.type === "hello"), 5_000)
      const res = await chat(b.url, "live/m1")
      expect(res.status).toBe(200)
      const id = res.headers.get("x-gateway-request-id")
      await until(
        "A's feed has B's request",
        async () =>
          frames.some((f) => f.type === "event" && f.event.event === "request.completed" && JSON.stringify(f.event.data).includes(id!)),
        2_000
      )
    } finally {
      ws.close()
    }
  })
})

describe("configuration bundles carry compression and context", () => {
  it("a bundle pulled through one gateway brings its skills, memory and compression combos, and both serve them", async () => {
    // Another gateway (its own SQLite) holds the configuration, and is the sync server too.
    const source = await startGateway()
    try {
      const SERVER_KEY = "gwk_sharedstate_sync_server_key_012345"
      await source.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: SERVER_KEY })))
      const on =
        (base: string, key: string) =>
        (p: string, init: { method?: string; body?: unknown } = {}) =>
          call(`${base}${p}`, { ...init, headers: { authorization: `Bearer ${key}` } })
      const src = on(source.url, SERVER_KEY)
      const cluster = on(a.url, ADMIN_KEY)
      expect(
        (
          await src("/api/providers", {
            body: { provider: "openai-compatible", name: "ctx", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }
          })
        ).status
      ).toBe(201)
      const combo = await src("/api/context/combos", { body: { name: "tight", engines: [{ engine: "json" }] } })
      expect(combo.status, JSON.stringify(combo.body)).toBe(201)
      expect((await src(`/api/context/combos/${combo.body.id}/assignments`, { method: "PUT", body: { models: ["ctx/m1"] } })).status).toBe(
        200
      )
      expect((await src("/api/context/memory", { body: { text: "The repository uses pnpm." } })).status).toBe(201)
      expect(
        (await src("/api/context/skills", { body: { name: "style", text: "Answer in short sentences.", trigger: { always: true } } }))
          .status
      ).toBe(201)
      const init = { serverUrl: source.url, apiKey: SERVER_KEY, space: "cluster", passphrase: "a passphrase for the cluster" }
      expect((await src("/api/sync/initialize", { body: init })).status).toBe(200)
      expect((await src("/api/sync/cloud", { body: { action: "push" } })).status).toBe(200)

      // The cluster pulls through A; B, on the same database, serves what A imported.
      expect((await cluster("/api/sync/initialize", { body: init })).status).toBe(200)
      const pulled = await cluster("/api/sync/cloud", { body: { action: "pull", force: true } })
      expect(pulled.status, JSON.stringify(pulled.body)).toBe(200)
      // The bundle carries the source's API keys too: the cluster's admin key is now the source's.
      await until(
        "B has the skills, memory and combos",
        async () => {
          const get = on(b.url, SERVER_KEY)
          const [skills, memory, combos] = await Promise.all([
            get("/api/context/skills"),
            get("/api/context/memory"),
            get("/api/context/combos")
          ])
          return (
            skills.body.skills?.some((x: { name: string }) => x.name === "style") &&
            memory.body.entries?.length === 1 &&
            combos.body.combos?.some((x: { name: string }) => x.name === "tight")
          )
        },
        3_000
      )
      up.requests.length = 0
      const res = await chat(b.url, "ctx/m1")
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      const sent = JSON.stringify(up.requests.at(-1)!.body.messages)
      expect(sent).toContain("Answer in short sentences.")
      expect(sent).toContain("The repository uses pnpm.")
    } finally {
      await source.close()
    }
  })
})
