import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli } from "./support/cli.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * Inbound rate limits per gateway key (docs/guardrails.md "Rate limits"): set through the keys
 * API and the CLI, enforced on the inference routes with 429 in the client's format, the
 * RateLimit-* headers on every answer of a limited key, shown by /api/rate-limits and
 * /api/rate-limit. The official OpenAI SDK (retries off) is the client for the 429.
 */
const ADMIN = "gwk_ratelimit_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

/** Limits count in fixed minutes: a test that needs one window starts early in a minute. */
const freshWindow = async () => {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 20_000) await new Promise((r) => setTimeout(r, left + 50))
}

/** Polls `probe` until it holds (each try a real request), failing after `ms`. */
const until = async (probe: () => Promise<boolean>, ms = 5000) => {
  const end = Date.now() + ms
  while (!(await probe())) {
    if (Date.now() > end) throw new Error("condition not reached")
    await new Promise((r) => setImmediate(r))
  }
}

let up: FakeOpenAI
let gw: TestGateway

const createKey = async (body: Record<string, unknown>) => {
  const res = await call(`${gw.url}/api/keys`, { body, headers: admin })
  expect(res.status, res.text).toBe(201)
  return res.body as { id: string; secret: string; rpm: number | null; tpm: number | null }
}
const sdk = (apiKey: string) => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey, maxRetries: 0 })
const inboundOf = async (id: string) =>
  ((await call(`${gw.url}/api/rate-limits`, { headers: admin })).body.inbound as Array<any>).find((k) => k.apiKeyId === id)

beforeAll(async () => {
  up = await FakeOpenAI.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const res = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl, defaultModel: "m1" },
    headers: admin
  })
  expect(res.status).toBe(201)
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

describe("requests per minute", () => {
  it("answers 429 in the OpenAI format with Retry-After and RateLimit-* once the key's rpm is used; the SDK sees the headers", async () => {
    await freshWindow()
    const key = await createKey({ name: "rpm2", rpm: 2 })
    expect(key.rpm).toBe(2)
    const client = sdk(key.secret)
    const first = await client.chat.completions.create({ model: "up/m1", messages: [{ role: "user", content: "hi" }] }).withResponse()
    expect(first.response.headers.get("ratelimit-limit")).toBe("2")
    expect(first.response.headers.get("ratelimit-remaining")).toBe("1")
    const reset = Number(first.response.headers.get("ratelimit-reset"))
    expect(reset).toBeGreaterThan(0)
    expect(reset).toBeLessThanOrEqual(60)
    const second = await client.chat.completions.create({ model: "up/m1", messages: [{ role: "user", content: "hi" }] }).withResponse()
    expect(second.response.headers.get("ratelimit-remaining")).toBe("0")

    const upstreamCalls = up.requests.length
    const refused = await client.chat.completions
      .create({ model: "up/m1", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError)
    const e = refused as InstanceType<typeof OpenAI.RateLimitError>
    expect(e.status).toBe(429)
    expect(e.code).toBe("rate_limit_exceeded")
    expect(e.message).toContain("2 requests per minute")
    expect(Number(e.headers?.get("retry-after"))).toBeGreaterThan(0)
    expect(e.headers?.get("ratelimit-limit")).toBe("2")
    expect(e.headers?.get("ratelimit-remaining")).toBe("0")
    expect(Number(e.headers?.get("ratelimit-reset"))).toBeGreaterThan(0)
    expect(up.requests.length).toBe(upstreamCalls)

    // Another key is not affected.
    const other = await createKey({ name: "rpm-other", rpm: 5 })
    expect(
      (await sdk(other.secret).chat.completions.create({ model: "up/m1", messages: [{ role: "user", content: "hi" }] })).choices.length
    ).toBe(1)
  })

  it("answers the 429 in the Anthropic format on /v1/messages", async () => {
    await freshWindow()
    const key = await createKey({ name: "rpm1-anth", rpm: 1 })
    const body = { model: "up/m1", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }
    const headers = { "x-api-key": key.secret, "anthropic-version": "2023-06-01" }
    expect((await call(`${gw.url}/v1/messages`, { body, headers })).status).toBe(200)
    const res = await call(`${gw.url}/v1/messages`, { body, headers })
    expect(res.status).toBe(429)
    expect(res.body).toMatchObject({ type: "error", error: { type: "rate_limit_error" } })
    expect(res.headers.get("retry-after")).not.toBeNull()
    expect(res.headers.get("ratelimit-remaining")).toBe("0")
  })

  it("leaves keys without limits alone: no RateLimit headers", async () => {
    const key = await createKey({ name: "unlimited" })
    const res = await sdk(key.secret)
      .chat.completions.create({ model: "up/m1", messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(res.response.headers.get("ratelimit-limit")).toBeNull()
  })
})

describe("tokens per minute", () => {
  it("counts the estimate up front and corrects it by the usage at the end; a request that does not fit waits", async () => {
    await freshWindow()
    const key = await createKey({ name: "tpm", tpm: 120 })
    up.always({ usage: { prompt_tokens: 11, completion_tokens: 7 } })
    const client = sdk(key.secret)
    const ok = await client.chat.completions.create({ model: "up/m1", messages: [{ role: "user", content: "hi" }] }).withResponse()
    expect(ok.response.headers.get("ratelimit-limit")).toBe("120")
    expect(ok.response.headers.get("x-ratelimit-limit-tokens")).toBe("120")
    // After the answer the window holds what the upstream reported (18), not the estimate.
    await until(async () => (await inboundOf(key.id))?.tokens?.used === 18)
    const status = await inboundOf(key.id)
    expect(status).toMatchObject({ name: "tpm", requests: null, tokens: { limit: 120, used: 18, remaining: 102, source: "key" } })

    // About 4 bytes a token: this body's estimate (~250 tokens) does not fit in what is left.
    const refused = await client.chat.completions
      .create({ model: "up/m1", messages: [{ role: "user", content: "x".repeat(1000) }] })
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError)
    expect((refused as Error).message).toContain("120 tokens per minute")
    expect((await inboundOf(key.id)).tokens.used).toBe(18)
  })
})

describe("the keys API", () => {
  it("changes and removes limits with PATCH /api/keys/{id}; bad values are 400 naming the problem", async () => {
    const key = await createKey({ name: "patchme", rpm: 10 })
    const patched = await call(`${gw.url}/api/keys/${key.id}`, { method: "PATCH", body: { rpm: null, tpm: 500 }, headers: admin })
    expect(patched.status, patched.text).toBe(200)
    expect(patched.body).toMatchObject({ id: key.id, rpm: null, tpm: 500 })
    const listed = (await call(`${gw.url}/api/keys`, { headers: admin })).body.keys.find((k: any) => k.id === key.id)
    expect(listed).toMatchObject({ rpm: null, tpm: 500 })

    for (const body of [{ rpm: 0 }, { rpm: 1.5 }, { tpm: "many" }, { rpm: -1 }]) {
      const bad = await call(`${gw.url}/api/keys/${key.id}`, { method: "PATCH", body, headers: admin })
      expect(bad.status, JSON.stringify(body)).toBe(400)
      expect(bad.text).toMatch(/rpm|tpm|rate limit/)
    }
    expect((await call(`${gw.url}/api/keys`, { body: { rpm: 0 }, headers: admin })).status).toBe(400)
    expect((await call(`${gw.url}/api/keys/key_nope`, { method: "PATCH", body: { rpm: 5 }, headers: admin })).status).toBe(404)
  })

  it("disables, enables and re-dates a key with PATCH /api/keys/{id}; a disabled or expired key is refused at once", async () => {
    // An admin key: the management API refuses a key that does not verify (inference may run without one).
    const key = await createKey({ name: "switchme", scopes: ["admin"] })
    const models = async () => (await call(`${gw.url}/api/keys`, { headers: { authorization: `Bearer ${key.secret}` } })).status
    const patch = (body: unknown) => call(`${gw.url}/api/keys/${key.id}`, { method: "PATCH", body, headers: admin })
    expect(await models()).toBe(200)
    const off = await patch({ enabled: false })
    expect(off.status, off.text).toBe(200)
    expect(off.body).toMatchObject({ id: key.id, enabled: false })
    expect(await models()).toBe(401)
    expect((await patch({ enabled: true })).body.enabled).toBe(true)
    expect(await models()).toBe(200)
    const past = await patch({ expiresAt: "2001-01-01T00:00:00Z" })
    expect(past.body.expiresAt).toBe("2001-01-01T00:00:00.000Z")
    expect(await models()).toBe(401)
    const never = await patch({ expiresAt: null })
    expect(never.body.expiresAt).toBeNull()
    expect(await models()).toBe(200)
    const listed = (await call(`${gw.url}/api/keys`, { headers: admin })).body.keys.find((k: any) => k.id === key.id)
    expect(listed).toMatchObject({ enabled: true, expiresAt: null })
    for (const body of [{ enabled: "no" }, { expiresAt: "soon" }]) {
      const bad = await patch(body)
      expect(bad.status, JSON.stringify(body)).toBe(400)
      expect(bad.text).toMatch(/enabled|expiresAt/)
    }
  })
})

describe("/api/rate-limits and /api/rate-limit", () => {
  it("keep their upstream fields and add the inbound limits", async () => {
    const limits = await call(`${gw.url}/api/rate-limits`, { headers: admin })
    expect(limits.status).toBe(200)
    expect(Array.isArray(limits.body.accounts)).toBe(true)
    expect(limits.body.accounts[0]).toHaveProperty("rateLimitedUntil")
    expect(limits.body.inbound.find((k: any) => k.name === "rpm2")).toMatchObject({ requests: { limit: 2, source: "key" }, tokens: null })
    const config = await call(`${gw.url}/api/rate-limit`, { headers: admin })
    expect(config.body).toMatchObject({
      perKeyRequestLimit: null,
      inbound: { autoEnabled: false, defaultRpm: 60, defaultTpm: 100000, windowSeconds: 60 }
    })
    expect(config.body).toHaveProperty("connectionCooldown")
  })
})

describe("RATE_LIMIT_AUTO_ENABLE", () => {
  it("gives keys without limits the default limits; a key's own limit wins", async () => {
    await freshWindow()
    const auto = await startGateway({
      env: { RATE_LIMIT_AUTO_ENABLE: "true", GATEWAY_RATE_LIMIT_DEFAULT_RPM: "1", GATEWAY_RATE_LIMIT_DEFAULT_TPM: "5000" }
    })
    try {
      await auto.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      expect(
        (
          await call(`${auto.url}/api/providers`, {
            body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl, defaultModel: "m1" },
            headers: admin
          })
        ).status
      ).toBe(201)
      const plain = (await call(`${auto.url}/api/keys`, { body: { name: "plain" }, headers: admin })).body
      const own = (await call(`${auto.url}/api/keys`, { body: { name: "own", rpm: 3 }, headers: admin })).body
      const ask = (secret: string) =>
        call(`${auto.url}/v1/chat/completions`, {
          body: { model: "up/m1", messages: [{ role: "user", content: "hi" }] },
          headers: { authorization: `Bearer ${secret}` }
        })
      const first = await ask(plain.secret)
      expect(first.status).toBe(200)
      expect(first.headers.get("ratelimit-limit")).toBe("1")
      expect(first.headers.get("x-ratelimit-limit-tokens")).toBe("5000")
      expect((await ask(plain.secret)).status).toBe(429)
      expect((await ask(own.secret)).status).toBe(200)
      expect((await ask(own.secret)).headers.get("ratelimit-limit")).toBe("3")
      const config = await call(`${auto.url}/api/rate-limit`, { headers: admin })
      expect(config.body).toMatchObject({ perKeyRequestLimit: { rpm: 1, tpm: 5000 }, inbound: { autoEnabled: true, defaultRpm: 1 } })
      const inbound = (await call(`${auto.url}/api/rate-limits`, { headers: admin })).body.inbound
      expect(inbound.find((k: any) => k.name === "plain")).toMatchObject({
        requests: { limit: 1, used: 1, source: "auto" },
        tokens: { limit: 5000, source: "auto" }
      })
      expect(inbound.find((k: any) => k.name === "own")).toMatchObject({ requests: { limit: 3, used: 2, source: "key" } })
    } finally {
      await auto.close()
    }
  })
})

describe("gateway keys (CLI)", () => {
  it("sets limits with `keys add --rpm --tpm` and changes them with `keys limits`", async () => {
    const dataDir = tempDir()
    const env = { DATA_DIR: dataDir }
    const added = await runCli(["keys", "add", "--name", "cli-limited", "--rpm", "30", "--tpm", "9000", "--json"], env)
    expect(added.code, added.stderr).toBe(0)
    const created = JSON.parse(added.stdout)
    expect(created).toMatchObject({ name: "cli-limited", rpm: 30, tpm: 9000 })
    const changed = await runCli(["keys", "limits", created.id, "--rpm", "0", "--tpm", "100", "--json"], env)
    expect(changed.code, changed.stderr).toBe(0)
    expect(JSON.parse(changed.stdout)).toMatchObject({ id: created.id, rpm: null, tpm: 100 })
    const listed = await runCli(["keys", "list"], env)
    expect(listed.stdout).toMatch(/cli-limited.*-\s+100/)
    const bad = await runCli(["keys", "limits", created.id, "--rpm", "-5"], env)
    expect(bad.code).not.toBe(0)
    expect(bad.stderr + bad.stdout).toMatch(/rate limit|rpm/)
  })
})
