import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Provider nodes (docs/operations.md, "Provider nodes"): custom providers defined over HTTP that
 * then work as providers, against fake upstreams on 127.0.0.1 speaking each family's wire shape.
 */
const ADMIN = "gwk_nodes_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let multi: TestGateway
let oai: FakeUpstream
let anth: FakeUpstream

const api = (g: TestGateway, path: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${g.url}${path}`, { ...init, headers: admin })
const sdk = (g: TestGateway) => new OpenAI({ baseURL: `${g.url}/v1`, apiKey: ADMIN, maxRetries: 0 })
const usageRow = async (g: TestGateway, requestId: string | null) => {
  await g.usageWritten()
  return queryDb(g.dataDir, "SELECT provider, model, cost_usd, tokens_in, tokens_out, status FROM usage WHERE request_id = ?", requestId)[0]
}
const withAdmin = async (g: TestGateway) => {
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
}
const labNode = (baseUrl: string, extra: Record<string, unknown> = {}) => ({
  id: "mylab",
  name: "My lab",
  baseUrl,
  family: "openai-chat",
  headers: { "X-Lab-Tenant": "team-7" },
  models: [
    { id: "lab-large", contextLength: 32000, maxOutput: 4000, capabilities: ["tools", "vision"], price: { input: 2, output: 8 } },
    { id: "lab-free" }
  ],
  ...extra
})

beforeAll(async () => {
  oai = await FakeUpstream.start()
  anth = await FakeUpstream.start()
  gw = await startGateway()
  multi = await startGateway({ env: { ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE: "true" } })
  await withAdmin(gw)
  await withAdmin(multi)
})
afterAll(async () => {
  await gw?.close()
  await multi?.close()
  await oai?.close()
  await anth?.close()
})
beforeEach(async () => {
  oai.always({ content: "from the lab", usage: { input: 1000, output: 500 } })
  anth.always({ content: "from claude-ish", usage: { input: 2000, output: 1000 } })
  oai.requests.length = 0
  anth.requests.length = 0
  for (const g of [gw, multi]) {
    await g.resetResilience()
    for (const c of (await api(g, "/api/providers")).body.connections) await api(g, `/api/providers/${c.id}`, { method: "DELETE" })
    for (const n of (await api(g, "/api/provider-nodes")).body.nodes) await api(g, `/api/provider-nodes/${n.id}`, { method: "DELETE" })
  }
})

describe("an OpenAI-chat node", () => {
  it("works as a provider: connection, /v1/models, the catalog, routing by prefix with its headers, cost from its price", async () => {
    const created = await api(gw, "/api/provider-nodes", { body: labNode(oai.baseUrl("openai-chat"), { prefix: "lab/" }) })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({
      id: "mylab",
      name: "My lab",
      prefix: "lab",
      family: "openai-chat",
      authStyle: "bearer",
      connections: []
    })
    // Header values are stored encrypted and listed masked.
    expect(created.body.headers["X-Lab-Tenant"]).not.toBe("team-7")
    expect(JSON.stringify((await api(gw, "/api/provider-nodes")).body)).not.toContain("team-7")
    expect(created.body.models[0]).toEqual({
      id: "lab-large",
      name: "lab-large",
      contextLength: 32000,
      maxOutput: 4000,
      capabilities: ["tools", "vision"],
      price: { input: 2, output: 8, cachedInput: null }
    })

    const conn = await api(gw, "/api/providers", { body: { provider: "mylab", apiKey: "sk-lab-secret-0123456789" } })
    expect(conn.status).toBe(201)
    expect(conn.body).toMatchObject({ provider: "mylab", name: "lab", effectiveBaseUrl: oai.baseUrl("openai-chat") })
    expect(JSON.stringify(conn.body)).not.toContain("sk-lab-secret-0123456789")
    expect((await api(gw, "/api/provider-nodes/mylab")).body.connections).toEqual(["lab"])

    const client = sdk(gw)
    const ids = (await client.models.list()).data.map((m) => m.id)
    expect(ids).toEqual(expect.arrayContaining(["lab/lab-large", "lab/lab-free"]))
    const catalog = await api(gw, "/api/models/catalog?provider=mylab")
    expect(catalog.body.models.map((m: any) => m.id)).toEqual(["lab/lab-large", "lab/lab-free"])
    expect(catalog.body.models[0]).toMatchObject({
      provider: "mylab",
      contextWindow: 32000,
      maxOutput: 4000,
      capabilities: { tools: true, vision: true },
      price: { input: 2, output: 8 }
    })

    const { data, response } = await client.chat.completions
      .create({ model: "lab/lab-large", messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(data.choices[0]!.message.content).toBe("from the lab")
    const seen = oai.requests.find((r) => r.path === "/v1/chat/completions")!
    expect(seen.body.model).toBe("lab-large")
    expect(seen.headers["authorization"]).toBe("Bearer sk-lab-secret-0123456789")
    expect(seen.headers["x-lab-tenant"]).toBe("team-7")
    // 1000 in at $2/1M + 500 out at $8/1M = $0.006.
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0060000000")
    const row = await usageRow(gw, response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ provider: "mylab", model: "lab-large", tokens_in: 1000, tokens_out: 500, status: 200 })
    expect(row!["cost_usd"]).toBeCloseTo(0.006, 12)

    // Streamed, through the same pipeline.
    const stream = await client.chat.completions.create({
      model: "lab/lab-free",
      stream: true,
      messages: [{ role: "user", content: "hi" }]
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("from the lab")
  })

  it("custom models can be added to a node, with a price that the usage row's cost uses", async () => {
    await api(gw, "/api/provider-nodes", { body: labNode(oai.baseUrl("openai-chat")) })
    await api(gw, "/api/providers", { body: { provider: "mylab", apiKey: "sk-lab" } })
    const added = await api(gw, "/api/provider-models", {
      body: { provider: "mylab", model: "lab-extra", contextLength: 64000, price: { input: 1, output: 1 } }
    })
    expect(added.status).toBe(201)
    expect(added.body).toMatchObject({ provider: "mylab", scope: "provider", model: "lab-extra" })
    expect((await sdk(gw).models.list()).data.map((m) => m.id)).toContain("mylab/lab-extra")
    const { response } = await sdk(gw)
      .chat.completions.create({ model: "mylab/lab-extra", messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    // 1000 + 500 tokens at $1/1M.
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0015000000")
    expect((await usageRow(gw, response.headers.get("x-gateway-request-id")))!["cost_usd"]).toBeCloseTo(0.0015, 12)
  })

  it("test lists the upstream's models with the connection's key and imports them on request", async () => {
    await api(gw, "/api/provider-nodes", { body: labNode(oai.baseUrl("openai-chat")) })
    await api(gw, "/api/providers", { body: { provider: "mylab", apiKey: "sk-lab-probe" } })
    const probed = await api(gw, "/api/provider-nodes/mylab/test", { body: { importModels: true } })
    expect(probed.status).toBe(200)
    expect(probed.body).toMatchObject({ id: "mylab", ok: true, status: 200, models: ["m1", "m2"], imported: ["m1", "m2"] })
    expect(oai.requests.find((r) => r.path === "/v1/models")!.headers["authorization"]).toBe("Bearer sk-lab-probe")
    expect((await api(gw, "/api/provider-nodes/mylab")).body.models.map((m: any) => m.id)).toEqual(["lab-large", "lab-free", "m1", "m2"])
    expect((await sdk(gw).models.list()).data.map((m) => m.id)).toContain("mylab/m1")
  })

  it("PUT replaces, PATCH changes the given fields, DELETE refuses while connections use the node", async () => {
    await api(gw, "/api/provider-nodes", { body: labNode(oai.baseUrl("openai-chat")) })
    const patched = await api(gw, "/api/provider-nodes/mylab", { method: "PATCH", body: { name: "Renamed" } })
    expect(patched.status).toBe(200)
    expect(patched.body).toMatchObject({ name: "Renamed", prefix: "mylab", family: "openai-chat" })
    expect(Object.keys(patched.body.headers)).toEqual(["X-Lab-Tenant"])
    const put = await api(gw, "/api/provider-nodes/mylab", {
      method: "PUT",
      body: { baseUrl: oai.baseUrl("openai-chat"), family: "openai-responses", models: [{ id: "r1" }] }
    })
    expect(put.status).toBe(200)
    expect(put.body).toMatchObject({ name: "Renamed", family: "openai-responses", headers: {}, models: [{ id: "r1" }] })

    const conn = await api(gw, "/api/providers", { body: { provider: "mylab" } })
    const blocked = await api(gw, "/api/provider-nodes/mylab", { method: "DELETE" })
    expect(blocked.status).toBe(409)
    expect(blocked.body.message).toContain(`mylab (${conn.body.id})`)
    expect((await api(gw, `/api/providers/${conn.body.id}`, { method: "DELETE" })).status).toBe(200)
    const removed = await api(gw, "/api/provider-nodes/mylab", { method: "DELETE" })
    expect(removed.status).toBe(200)
    expect(removed.body.removed.id).toBe("mylab")
    expect((await api(gw, "/api/provider-nodes/mylab")).status).toBe(404)
  })
})

describe("an Anthropic node", () => {
  it("is called in the messages wire shape with x-api-key, translated for an OpenAI client, priced from its models", async () => {
    const created = await api(gw, "/api/provider-nodes", {
      body: {
        id: "claudeish",
        baseUrl: anth.baseUrl("anthropic"),
        family: "anthropic",
        models: [{ id: "ci-1", capabilities: ["tools", "reasoning"], price: { input: 3, output: 15 } }]
      }
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ authStyle: "x-api-key", prefix: "claudeish" })
    expect((await api(gw, "/api/providers", { body: { provider: "claudeish", apiKey: "sk-ant-node" } })).status).toBe(201)
    const { data, response } = await sdk(gw)
      .chat.completions.create({ model: "claudeish/ci-1", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
      .withResponse()
    expect(data.choices[0]!.message.content).toBe("from claude-ish")
    const seen = anth.requests.find((r) => r.path === "/v1/messages")!
    expect(seen.headers["x-api-key"]).toBe("sk-ant-node")
    expect(seen.headers["anthropic-version"]).toBeDefined()
    expect(seen.body.model).toBe("ci-1")
    // 2000 in at $3/1M + 1000 out at $15/1M = $0.021.
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0210000000")
    expect((await usageRow(gw, response.headers.get("x-gateway-request-id")))!["cost_usd"]).toBeCloseTo(0.021, 12)
  })
})

describe("ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE", () => {
  it("off: a second connection for a node is 409 naming the flag", async () => {
    await api(gw, "/api/provider-nodes", { body: labNode(oai.baseUrl("openai-chat")) })
    expect((await api(gw, "/api/providers", { body: { provider: "mylab", apiKey: "k1" } })).status).toBe(201)
    const second = await api(gw, "/api/providers", { body: { provider: "mylab", name: "lab-b", apiKey: "k2" } })
    expect(second.status).toBe(409)
    expect(second.body.message).toContain("ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE")
  })

  it("on: several connections share the node's prefix and fall back to each other", async () => {
    await api(multi, "/api/provider-nodes", { body: labNode(oai.baseUrl("openai-chat")) })
    expect((await api(multi, "/api/providers", { body: { provider: "mylab", apiKey: "k-first", priority: 1 } })).status).toBe(201)
    expect(
      (await api(multi, "/api/providers", { body: { provider: "mylab", name: "lab-b", apiKey: "k-second", priority: 2 } })).status
    ).toBe(201)
    expect((await api(multi, "/api/provider-nodes/mylab")).body.connections).toEqual(["mylab", "lab-b"])
    // The first connection is rate limited upstream: the request falls back to the second.
    oai.next({ status: 429, body: { error: { message: "slow down", type: "rate_limit" } } })
    const res = await sdk(multi).chat.completions.create({ model: "mylab/lab-large", messages: [{ role: "user", content: "hi" }] })
    expect(res.choices[0]!.message.content).toBe("from the lab")
    const keys = oai.requests.filter((r) => r.path === "/v1/chat/completions").map((r) => r.headers["authorization"])
    expect(keys).toEqual(["Bearer k-first", "Bearer k-second"])
  })
})

describe("bad input", () => {
  it("400s name the field", async () => {
    const bad = async (body: unknown) => {
      const res = await api(gw, "/api/provider-nodes", { body })
      expect(res.status).toBe(400)
      return res.body.message as string
    }
    const base = labNode(oai.baseUrl("openai-chat"))
    expect(await bad({ ...base, family: "smoke-signals" })).toMatch(
      /^invalid request: family: family must be one of: openai-chat, openai-responses, anthropic, gemini, ollama/
    )
    expect(await bad({ ...base, baseUrl: "ftp://x" })).toMatch(/^invalid request: baseUrl: /)
    expect(await bad({ ...base, id: "My Lab" })).toMatch(/^invalid request: id: /)
    expect(await bad({ ...base, prefix: "a/b" })).toMatch(/^invalid request: prefix: /)
    expect(await bad({ ...base, authStyle: "magic" })).toMatch(/^invalid request: authStyle: /)
    expect(await bad({ ...base, headers: { "X-A": "line\nbreak" } })).toContain("headers")
    expect(await bad({ ...base, headers: { Host: "evil" } })).toContain("headers: 'Host' is set by the gateway")
    expect(await bad({ ...base, models: [{ id: "m", contextLength: -1 }] })).toMatch(/^invalid request: models\.0\.contextLength: /)
    expect(await bad({ ...base, models: [{ id: "m", price: { input: "cheap" } }] })).toMatch(/^invalid request: models\.0\.price\.input: /)
    expect(await bad({ ...base, models: [{ id: "m" }, { id: "m" }] })).toBe("models: 'm' is listed twice")
    expect(await bad({ ...base, colour: "blue" })).toMatch(/colour/)
    expect(await bad({ baseUrl: oai.baseUrl("openai-chat"), family: "openai-chat" })).toMatch(/^invalid request: id: /)
    // The provider URL policy: cloud metadata addresses are refused.
    expect(await bad({ ...base, baseUrl: "http://169.254.169.254/v1" })).toMatch(/^baseUrl rejected: /)
    const patch = await api(gw, "/api/provider-nodes/mylab", { method: "PATCH", body: { family: "x" } })
    expect(patch.status).toBe(400)
    expect(patch.body.message).toContain("family: family must be one of")
    expect((await api(gw, "/api/provider-nodes/nope", { method: "PATCH", body: { name: "x" } })).status).toBe(404)
  })

  it("409s: an existing node, a catalog provider's id, a prefix in use", async () => {
    const base = labNode(oai.baseUrl("openai-chat"))
    expect((await api(gw, "/api/provider-nodes", { body: base })).status).toBe(201)
    const again = await api(gw, "/api/provider-nodes", { body: base })
    expect(again.status).toBe(409)
    expect(again.body.message).toContain("provider node 'mylab' already exists")
    const catalogId = await api(gw, "/api/provider-nodes", { body: { ...base, id: "openai" } })
    expect(catalogId.status).toBe(409)
    expect(catalogId.body.message).toContain("catalog provider")
    const samePrefix = await api(gw, "/api/provider-nodes", { body: { ...base, id: "other", prefix: "mylab" } })
    expect(samePrefix.status).toBe(409)
    expect(samePrefix.body.message).toContain("prefix 'mylab'")
  })

  it("401 without management authentication", async () => {
    expect((await call(`${gw.url}/api/provider-nodes`)).status).toBe(401)
  })
})
