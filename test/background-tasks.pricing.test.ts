import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * PRICING_SYNC_ENABLED (docs/accounting.md, "Pricing sync"): a fake price list on 127.0.0.1 in
 * LiteLLM's model_prices_and_context_window.json shape; the sync runs only when the flag resolves on
 * AND the same-named environment variable is true.
 */
const ADMIN = "gwk_pricing_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

/** A slice of LiteLLM's real file, as it is shaped (per-token USD, provider in litellm_provider, prefixed keys). */
const LITELLM = {
  sample_spec: {
    max_tokens: "LEGACY parameter",
    input_cost_per_token: 0,
    output_cost_per_token: 0,
    litellm_provider: "one of https://docs.litellm.ai/docs/providers",
    mode: "one of: chat, embedding, completion, image_generation"
  },
  "gpt-4o": {
    max_tokens: 16384,
    max_input_tokens: 128000,
    max_output_tokens: 16384,
    input_cost_per_token: 3e-6,
    output_cost_per_token: 1.2e-5,
    cache_read_input_token_cost: 1.5e-6,
    litellm_provider: "openai",
    mode: "chat",
    supports_function_calling: true
  },
  "claude-haiku-4-5": {
    max_tokens: 64000,
    input_cost_per_token: 2e-6,
    output_cost_per_token: 9e-6,
    cache_read_input_token_cost: 2e-7,
    cache_creation_input_token_cost: 2.5e-6,
    litellm_provider: "anthropic",
    mode: "chat"
  },
  "gemini/gemini-2.5-flash": {
    max_tokens: 65535,
    input_cost_per_token: 4e-7,
    output_cost_per_token: 3e-6,
    litellm_provider: "gemini",
    mode: "chat"
  },
  "some-unknown-provider/model": { input_cost_per_token: 1e-6, output_cost_per_token: 1e-6, litellm_provider: "nobody-knows", mode: "chat" }
}

let served = 0
let server: http.Server
let priceUrl = ""
let up: FakeUpstream
const gateways: Array<TestGateway> = []

const start = async (env: Record<string, string>) => {
  const gw = await startGateway({ env: { GATEWAY_PRICING_SYNC_URL: priceUrl, GATEWAY_PRICING_SYNC_INTERVAL_SECONDS: "0.3", ...env } })
  gateways.push(gw)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  return gw
}
const api = (gw: TestGateway, p: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${gw.url}${p}`, { ...init, headers: admin })
const row = async (gw: TestGateway, provider: string, model: string) =>
  ((await api(gw, "/api/pricing")).body.prices as Array<any>).find((r) => r.provider === provider && r.model === model)

beforeAll(async () => {
  server = http.createServer((_req, res) => {
    served++
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify(LITELLM))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  priceUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/model_prices_and_context_window.json`
  up = await FakeUpstream.start()
  up.always({ content: "priced", usage: { input: 1000, output: 500 } })
})
afterAll(async () => {
  for (const gw of gateways) await gw.close()
  await up?.close()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

describe("PRICING_SYNC_ENABLED", () => {
  it("flag and environment variable on: synced prices sit between the catalog and the overrides, and custom-model prices win", async () => {
    const gw = await start({ PRICING_SYNC_ENABLED: "true" })
    const synced = await until("the synced price of gpt-4o", async () => {
      const r = await row(gw, "openai", "gpt-4o")
      return r?.source === "synced" ? r : undefined
    })
    expect(synced).toMatchObject({ input: 3, output: 12, cachedInput: 1.5 })
    expect(await row(gw, "gemini", "gemini-2.5-flash")).toMatchObject({ source: "synced", input: 0.4, output: 3 })
    // A model the list does not price keeps the catalog's.
    expect((await row(gw, "openai", "gpt-4o-mini")).source).toBe("catalog")

    // Requests are costed at the synced price: 1000 in, 500 out at $3 / $12 per 1M.
    expect(
      (
        await api(gw, "/api/providers", {
          body: { provider: "openai", name: "oa", baseUrl: up.baseUrl("openai-chat"), apiKey: "sk-test-openai-0000000000" }
        })
      ).status
    ).toBe(201)
    const chat = () => call(`${gw.url}/v1/chat/completions`, { body: { model: "oa/gpt-4o", messages: [{ role: "user", content: "hi" }] } })
    expect((await chat()).headers.get("x-gateway-response-cost")).toBe(((1000 * 3) / 1e6 + (500 * 12) / 1e6).toFixed(10))

    // An override still wins, field by field.
    expect((await api(gw, "/api/pricing", { method: "PUT", body: { provider: "openai", model: "gpt-4o", input: 5 } })).status).toBe(200)
    expect(await row(gw, "openai", "gpt-4o")).toMatchObject({ source: "synced+override", input: 5, output: 12 })
    expect((await chat()).headers.get("x-gateway-response-cost")).toBe(((1000 * 5) / 1e6 + (500 * 12) / 1e6).toFixed(10))

    // A custom model price (/api/provider-models) wins over the synced one.
    expect(
      (
        await api(gw, "/api/providers", {
          body: { provider: "anthropic", name: "an", baseUrl: up.baseUrl("anthropic"), apiKey: "sk-ant-test-000000000000" }
        })
      ).status
    ).toBe(201)
    const haiku = () =>
      call(`${gw.url}/v1/chat/completions`, { body: { model: "an/claude-haiku-4-5", messages: [{ role: "user", content: "hi" }] } })
    expect((await haiku()).headers.get("x-gateway-response-cost")).toBe(((1000 * 2) / 1e6 + (500 * 9) / 1e6).toFixed(10))
    const custom = await api(gw, "/api/provider-models", {
      method: "PATCH",
      body: { provider: "anthropic", model: "claude-haiku-4-5", price: { input: 7, output: 70 } }
    })
    expect([200, 201]).toContain(custom.status)
    expect((await haiku()).headers.get("x-gateway-response-cost")).toBe(((1000 * 7) / 1e6 + (500 * 70) / 1e6).toFixed(10))
  })

  it("the flag on without the environment variable, or the variable set and the flag overridden off: no download", async () => {
    const dbOnly = await start({})
    expect(
      (await api(dbOnly, "/api/settings/feature-flags", { method: "PUT", body: { key: "PRICING_SYNC_ENABLED", value: "true" } })).status
    ).toBe(200)
    const envOnly = await start({ PRICING_SYNC_ENABLED: "true" })
    expect(
      (await api(envOnly, "/api/settings/feature-flags", { method: "PUT", body: { key: "PRICING_SYNC_ENABLED", value: "false" } })).status
    ).toBe(200)
    const clock = await start({ PRICING_SYNC_ENABLED: "true" })
    // Each gateway's own requests are not told apart by the fake, so: the control gateway's rounds
    // come in while the other two stay on the catalog's prices.
    const before = served
    await until("four rounds of the control gateway", () => served >= before + 4)
    expect((await row(clock, "openai", "gpt-4o")).source).toBe("synced")
    expect(await row(dbOnly, "openai", "gpt-4o")).toMatchObject({ source: "catalog", input: 2.5 })
    // envOnly may have synced once at start, before its override; from then on it has no synced layer
    // to gain, so what is asserted is the log: no round ran after the override.
    expect(dbOnly.logs.some((l) => l.message.startsWith("pricing sync:"))).toBe(false)
    const envLogs = envOnly.logs.filter((l) => l.message.startsWith("pricing sync:")).length
    const seen = served
    await until("two more rounds", () => served >= seen + 2)
    expect(envOnly.logs.filter((l) => l.message.startsWith("pricing sync:")).length).toBe(envLogs)
  })

  it("GATEWAY_DISABLE_BACKGROUND_SERVICES stops it", async () => {
    const gw = await start({ PRICING_SYNC_ENABLED: "true", GATEWAY_DISABLE_BACKGROUND_SERVICES: "true" })
    expect(gw.logs.map((l) => l.message)).toContain("pricing sync off: GATEWAY_DISABLE_BACKGROUND_SERVICES is on")
    expect((await row(gw, "openai", "gpt-4o")).source).toBe("catalog")
  })
})
