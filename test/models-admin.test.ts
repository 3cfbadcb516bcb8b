import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/** The catalog, model aliases and custom models (docs/operations.md), over HTTP. */
const ADMIN = "gwk_models_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream

const api = (path: string, init: { method?: string; body?: unknown } = {}) => call(`${gw.url}${path}`, { ...init, headers: admin })
const chat = (model: string) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }] }, headers: admin })
const listedIds = async () => ((await api("/v1/models")).body.data as Array<{ id: string }>).map((m) => m.id)
const setFlag = (key: string, value: boolean) => api("/api/settings/feature-flags", { method: "PUT", body: { key, value: String(value) } })

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const res = await api("/api/providers", {
    body: { provider: "openai-compatible", name: "local", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1", models: ["m1"] }
  })
  expect(res.status).toBe(201)
  // An Anthropic connection (pointed at the fake) whose catalog models the compat aliases can reach.
  const anth = await api("/api/providers", {
    body: { provider: "anthropic", name: "claude-acct", apiKey: "sk-ant-test", baseUrl: up.baseUrl("anthropic"), priority: 5 }
  })
  expect(anth.status).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.always({ content: "ok" })
  up.requests.length = 0
  await gw.resetResilience()
  for (const a of (await api("/api/models/alias")).body.aliases)
    if (a.source === "user") await api(`/api/models/alias?alias=${encodeURIComponent(a.alias)}`, { method: "DELETE" })
  for (const m of (await api("/api/provider-models")).body.models)
    await api(`/api/provider-models?provider=${encodeURIComponent(m.provider)}&model=${encodeURIComponent(m.model)}`, { method: "DELETE" })
  await setFlag("MODEL_ALIAS_COMPAT_ENABLED", false)
})

describe("GET /api/models/catalog", () => {
  it("lists every catalog model with provider, kind, context window, max output, capabilities, tier and price", async () => {
    const res = await api("/api/models/catalog")
    expect(res.status).toBe(200)
    const sonnet = res.body.models.find((m: any) => m.provider === "anthropic" && m.model.startsWith("claude-sonnet"))
    expect(sonnet).toMatchObject({
      id: expect.stringMatching(/^anthropic\/claude-sonnet/),
      name: expect.any(String),
      kind: "chat",
      contextWindow: expect.any(Number),
      maxOutput: expect.any(Number),
      capabilities: { tools: true, vision: expect.any(Boolean), reasoning: expect.any(Boolean), audio: false },
      tier: expect.any(String),
      price: { input: expect.any(Number), output: expect.any(Number) }
    })
    expect(res.body.models.length).toBeGreaterThan(20)
  })

  it("filters by provider, and scope=connected lists what the connections serve", async () => {
    const only = await api("/api/models/catalog?provider=anthropic")
    expect(only.body.models.every((m: any) => m.provider === "anthropic")).toBe(true)
    const connected = await api("/api/models/catalog?scope=connected&provider=local")
    expect(connected.body.models.map((m: any) => m.id)).toEqual(["local/m1"])
    expect((await api("/api/models/catalog?scope=everything")).status).toBe(400)
  })

  it("answers 401 without management authentication", async () => {
    expect((await call(`${gw.url}/api/models/catalog`)).status).toBe(401)
    expect((await call(`${gw.url}/api/models/alias`, { body: { alias: "a", target: "b" } })).status).toBe(401)
    expect((await call(`${gw.url}/api/provider-models`)).status).toBe(401)
  })
})

describe("model aliases", () => {
  it("round trip: an inference request by alias reaches the target model upstream", async () => {
    const set = await api("/api/models/alias", { body: { alias: "my-fast", target: "local/m1" } })
    expect(set.status).toBe(200)
    expect(set.body).toEqual({ alias: "my-fast", target: "local/m1", source: "user" })
    expect((await api("/api/models/alias")).body.aliases).toContainEqual({ alias: "my-fast", target: "local/m1", source: "user" })
    const res = await chat("my-fast")
    expect(res.status).toBe(200)
    expect(up.requests.at(-1)?.body.model).toBe("m1")
    // A chain: alias → alias → model.
    await api("/api/models/alias", { body: { alias: "fastest", target: "my-fast" } })
    expect((await chat("fastest")).status).toBe(200)
    expect(up.requests.at(-1)?.body.model).toBe("m1")
    const del = await api("/api/models/alias?alias=my-fast", { method: "DELETE" })
    expect(del.status).toBe(200)
    expect(del.body.removed.alias).toBe("my-fast")
    expect((await api("/api/models/alias?alias=my-fast", { method: "DELETE" })).status).toBe(404)
  })

  it("an alias may shadow a served model id and point at a combo", async () => {
    expect((await api("/api/combos", { body: { name: "pair", strategy: "priority", targets: [{ model: "local/m1" }] } })).status).toBe(201)
    await api("/api/models/alias", { body: { alias: "gpt-4o", target: "pair" } })
    expect((await chat("gpt-4o")).status).toBe(200)
    expect(up.requests.at(-1)?.body.model).toBe("m1")
    const list = await api("/api/combos")
    for (const c of list.body.combos) await api(`/api/combos/${c.id}`, { method: "DELETE" })
  })

  it("refuses an alias to itself or a loop with 400 naming target", async () => {
    const self = await api("/api/models/alias", { body: { alias: "x", target: "x" } })
    expect(self.status).toBe(400)
    expect(self.body.message).toMatch(/^target: /)
    await api("/api/models/alias", { body: { alias: "a1", target: "a2" } })
    await api("/api/models/alias", { body: { alias: "a2", target: "a3" } })
    const loop = await api("/api/models/alias", { body: { alias: "a3", target: "a1" } })
    expect(loop.status).toBe(400)
    expect(loop.body.message).toContain("loop")
  })

  it("refuses bad input with 400 naming the field", async () => {
    const missing = await api("/api/models/alias", { body: { alias: "a" } })
    expect(missing.status).toBe(400)
    expect(missing.body.message).toContain("target")
    const spaced = await api("/api/models/alias", { body: { alias: "a b", target: "local/m1" } })
    expect(spaced.status).toBe(400)
    expect(spaced.body.message).toContain("alias")
    const extra = await api("/api/models/alias", { body: { alias: "a", target: "local/m1", weight: 1 } })
    expect(extra.status).toBe(400)
    expect(extra.body.message).toContain("weight")
  })

  it("MODEL_ALIAS_COMPAT_ENABLED routes the ids coding agents send to a connected model of their family", async () => {
    // Off: gpt-5-codex is no model any connection serves.
    expect((await chat("gpt-5-codex")).status).toBe(404)
    expect((await api("/api/models/alias")).body.compat).toBe(false)
    await setFlag("MODEL_ALIAS_COMPAT_ENABLED", true)
    // A custom gpt-5 model on the local connection is the first of the family.
    expect(
      (
        await api("/api/provider-models", {
          body: { provider: "local", model: "gpt-5-mini", contextLength: 400000, capabilities: ["tools"] }
        })
      ).status
    ).toBe(201)
    const list = await api("/api/models/alias")
    expect(list.body.compat).toBe(true)
    expect(list.body.aliases).toContainEqual({ alias: "gpt-5-codex", target: "local/gpt-5-mini", source: "compat" })
    // claude-sonnet-4-5 is served by the Anthropic connection under its own name: no compat alias.
    const res = await chat("gpt-5-codex")
    expect(res.status).toBe(200)
    expect(up.requests.at(-1)?.body.model).toBe("gpt-5-mini")
    // An operator's alias wins over the compat table.
    await api("/api/models/alias", { body: { alias: "gpt-5-codex", target: "local/m1" } })
    await chat("gpt-5-codex")
    expect(up.requests.at(-1)?.body.model).toBe("m1")
    await setFlag("MODEL_ALIAS_COMPAT_ENABLED", false)
    expect((await api("/api/models/alias")).body.aliases.some((a: any) => a.source === "compat")).toBe(false)
  })
})

describe("custom models (/api/provider-models)", () => {
  it("a model added to a connection appears in /v1/models and the catalog and is routable", async () => {
    const add = await api("/api/provider-models", {
      body: {
        provider: "local",
        model: "qwen3-coder",
        contextLength: 262144,
        capabilities: ["tools", "reasoning"],
        price: { input: 0.2, output: 0.8 }
      }
    })
    expect(add.status).toBe(201)
    expect(add.body).toMatchObject({
      provider: "local",
      scope: "connection",
      model: "qwen3-coder",
      inCatalog: false,
      contextLength: 262144,
      hidden: false
    })
    expect(await listedIds()).toContain("local/qwen3-coder")
    const entry = (await api("/api/models/catalog")).body.models.find((m: any) => m.id === "local/qwen3-coder")
    expect(entry).toMatchObject({
      provider: "openai-compatible",
      connection: "local",
      kind: "chat",
      contextWindow: 262144,
      custom: true,
      capabilities: { tools: true, reasoning: true, vision: false },
      price: { input: 0.2, output: 0.8 }
    })
    expect((await chat("local/qwen3-coder")).status).toBe(200)
    expect(up.requests.at(-1)?.body.model).toBe("qwen3-coder")
    // Bare id: the connection serves it now.
    expect((await chat("qwen3-coder")).status).toBe(200)
    expect((await api("/api/provider-models", { body: { provider: "local", model: "qwen3-coder" } })).status).toBe(409)
    const patched = await api("/api/provider-models", {
      method: "PATCH",
      body: { provider: "local", model: "qwen3-coder", contextLength: 131072 }
    })
    expect(patched.status).toBe(200)
    expect((await api("/api/models/catalog")).body.models.find((m: any) => m.id === "local/qwen3-coder").contextWindow).toBe(131072)
    expect((await api("/api/provider-models?provider=local&model=qwen3-coder", { method: "DELETE" })).status).toBe(200)
    expect(await listedIds()).not.toContain("local/qwen3-coder")
  })

  it("a provider-wide custom model appears for that provider's connections", async () => {
    expect(
      (
        await api("/api/provider-models", {
          body: { provider: "anthropic", model: "claude-next", contextLength: 500000, capabilities: ["tools", "vision"] }
        })
      ).status
    ).toBe(201)
    expect(await listedIds()).toContain("claude-acct/claude-next")
    expect((await api("/api/models/catalog?provider=anthropic")).body.models.map((m: any) => m.id)).toContain("anthropic/claude-next")
  })

  it("hides and shows a catalog model", async () => {
    const catalog = (await api("/api/models/catalog?provider=anthropic")).body.models
    const model = catalog[0].model as string
    expect(await listedIds()).toContain(`claude-acct/${model}`)
    const hide = await api("/api/provider-models", { method: "PATCH", body: { provider: "anthropic", model, hidden: true } })
    expect(hide.status).toBe(200)
    expect(hide.body).toMatchObject({ inCatalog: true, hidden: true })
    expect(await listedIds()).not.toContain(`claude-acct/${model}`)
    expect((await api("/api/models/catalog?provider=anthropic")).body.models.map((m: any) => m.model)).not.toContain(model)
    await api("/api/provider-models", { method: "PATCH", body: { provider: "anthropic", model, hidden: false } })
    expect(await listedIds()).toContain(`claude-acct/${model}`)
  })

  it("noThinkingAlias lists or drops the no-thinking id of a model", async () => {
    await api("/api/provider-models", { body: { provider: "local", model: "thinker", capabilities: ["reasoning"], noThinkingAlias: true } })
    expect(await listedIds()).toContain("claude-3-gateway-no-thinking/local/thinker")
    await api("/api/provider-models", { method: "PATCH", body: { provider: "local", model: "thinker", noThinkingAlias: false } })
    expect(await listedIds()).not.toContain("claude-3-gateway-no-thinking/local/thinker")
  })

  it("refuses bad input with 400 naming the field, and unknown models with 404", async () => {
    const unknownProvider = await api("/api/provider-models", { body: { provider: "nowhere", model: "x" } })
    expect(unknownProvider.status).toBe(400)
    expect(unknownProvider.body.message).toMatch(/^provider: /)
    const badContext = await api("/api/provider-models", { body: { provider: "local", model: "x", contextLength: -5 } })
    expect(badContext.status).toBe(400)
    expect(badContext.body.message).toContain("contextLength")
    const badCap = await api("/api/provider-models", { body: { provider: "local", model: "x", capabilities: ["telepathy"] } })
    expect(badCap.status).toBe(400)
    expect(badCap.body.message).toContain("capabilities")
    const badPrice = await api("/api/provider-models", { body: { provider: "local", model: "x", price: { input: "cheap" } } })
    expect(badPrice.status).toBe(400)
    expect(badPrice.body.message).toContain("price.input")
    expect(
      (await api("/api/provider-models", { method: "PATCH", body: { provider: "local", model: "never-added", contextLength: 1 } })).status
    ).toBe(404)
  })
})
