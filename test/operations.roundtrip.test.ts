import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * The operations plane's round trip, as an operator scripts it over HTTP: configure every kind of
 * state, back up, change all of it, restore, and find everything as it was; the same through a
 * downloaded export uploaded again; and an upload of a corrupt file that changes nothing.
 */
const ADMIN = "gwk_roundtrip_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream

const api = async (p: string, init: { method?: string; body?: unknown } = {}) => {
  const res = await call(`${gw.url}${p}`, { ...init, headers: admin })
  return res
}
const ok = async (p: string, init: { method?: string; body?: unknown } = {}) => {
  const res = await api(p, init)
  expect(res.status, `${init.method ?? (init.body === undefined ? "GET" : "POST")} ${p}: ${JSON.stringify(res.body)}`).toBeLessThan(300)
  return res.body
}

/** Times that move with every look (last use, last seen) are left out of the comparison. */
const stripVolatile = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(stripVolatile)
  if (value === null || typeof value !== "object") return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) {
    if (k === "lastUsedAt" || k === "uptimeSeconds" || k === "time") continue
    out[k] = stripVolatile(v)
  }
  return out
}

/** Every piece of configuration an operator sets, as the management API shows it. */
const configuration = async (): Promise<Record<string, unknown>> =>
  stripVolatile({
    settings: await ok("/api/settings"),
    providers: await ok("/api/providers"),
    nodes: await ok("/api/provider-nodes"),
    keys: await ok("/api/keys"),
    combos: await ok("/api/combos"),
    flags: (await ok("/api/settings/feature-flags")).flags,
    aliases: await ok("/api/models/alias"),
    customModels: await ok("/api/provider-models"),
    pricing: await ok("/api/pricing"),
    budgets: (await ok("/api/usage/budget")).budgets.map((b: any) => ({
      apiKeyId: b.apiKeyId,
      daily: b.dailyLimitUsd,
      weekly: b.weeklyLimitUsd,
      monthly: b.monthlyLimitUsd
    })),
    policies: (await ok("/api/policies")).policies
  }) as Record<string, unknown>

const chat = (model: string, key: string) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model, messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${key}` }
  })

let clientKey = ""
let clientKeyId = ""

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "configured upstream" })
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))

  // Configure one of everything.
  await ok("/api/providers", {
    body: {
      provider: "openai-compatible",
      name: "lab",
      baseUrl: up.baseUrl("openai-chat"),
      apiKey: "sk-lab-secret-0123456789",
      defaultModel: "m1",
      models: ["m1"]
    }
  })
  await ok("/api/provider-nodes", {
    body: {
      id: "mynode",
      prefix: "mynode",
      baseUrl: up.baseUrl("openai-chat"),
      family: "openai-chat",
      models: [{ id: "n1", contextLength: 8192, price: { input: 1, output: 2 } }]
    }
  })
  await ok("/api/providers", { body: { provider: "mynode", apiKey: "sk-node-secret-0123456789" } })
  const key = await ok("/api/keys", { body: { name: "client" } })
  clientKey = key.secret
  clientKeyId = key.id
  await ok("/api/combos", { body: { name: "pair", strategy: "priority", targets: [{ model: "lab/m1" }, { model: "mynode/n1" }] } })
  await ok("/api/settings/feature-flags", { method: "PUT", body: { key: "TOOL_POLICY_MODE", value: "warn" } })
  await ok("/api/settings/feature-flags", { method: "PUT", body: { key: "MODEL_ALIAS_COMPAT_ENABLED", value: "true" } })
  await ok("/api/models/alias", { body: { alias: "house-model", target: "pair" } })
  await ok("/api/provider-models", {
    body: { provider: "lab", model: "m2", contextLength: 32000, capabilities: ["tools"], price: { input: 0.5, output: 1.5 } }
  })
  await ok("/api/pricing", { method: "PUT", body: { provider: "openai", model: "gpt-4o-mini", input: 0.1, output: 0.4 } })
  await ok("/api/usage/budget", { body: { apiKeyId: clientKeyId, monthlyLimitUsd: 25 } })
  await ok("/api/policies", { body: { name: "house", tools: { deny: ["shell_*"] }, blockedTerms: ["forbidden-word"] } })
  await ok("/api/settings", {
    method: "PATCH",
    body: {
      systemPrompt: { enabled: true, text: "Answer briefly.", position: "prepend" },
      thinkingBudget: { mode: "cap", maxTokens: 4096 },
      ipFilter: { allow: [], deny: ["203.0.113.0/24"] },
      compression: { enabled: true, activeProfile: "engine:json" },
      backups: { intervalHours: 12, keep: 4 }
    }
  })
}, 60_000)

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

describe("operations round trip: configure, back up, change everything, restore", () => {
  it("a restore brings back every setting, provider, node, key, combo, flag, alias, custom model, price, budget and policy", async () => {
    expect((await chat("house-model", clientKey)).body.choices[0].message.content).toBe("configured upstream")
    const before = await configuration()
    const backup = await ok("/api/db-backups", { method: "PUT" })
    expect(backup.id).toMatch(/-manual$/)

    // Change everything.
    const providers = (await ok("/api/providers")).connections as Array<any>
    for (const c of providers) await ok(`/api/providers/${c.id}`, { method: "DELETE" })
    await ok("/api/provider-nodes/mynode", { method: "DELETE" })
    await ok(`/api/keys/${clientKeyId}`, { method: "DELETE" })
    const combo = (await ok("/api/combos")).combos.find((c: any) => c.name === "pair")
    await ok(`/api/combos/${combo.id}`, { method: "DELETE" })
    await ok("/api/settings/feature-flags", { method: "PUT", body: { key: "TOOL_POLICY_MODE", value: "block" } })
    await ok("/api/settings/feature-flags", { method: "PUT", body: { key: "INJECTION_GUARD_MODE", value: "block" } })
    await ok("/api/models/alias?alias=house-model", { method: "DELETE" })
    await ok("/api/models/alias", { body: { alias: "other-model", target: "openai/gpt-4o-mini" } })
    await ok("/api/pricing", { method: "DELETE", body: { provider: "openai", model: "gpt-4o-mini" } })
    await ok("/api/policies/house", { method: "DELETE" })
    await ok("/api/settings", { method: "PUT", body: {} })
    const changed = await configuration()
    for (const part of Object.keys(before)) {
      if (part === "budgets" || part === "customModels") continue // removed with their key / provider, or kept: compared after the restore
      expect(changed[part], `${part} should differ after the changes`).not.toEqual(before[part])
    }

    const restored = await ok("/api/db-backups", { body: { id: backup.id } })
    expect(restored).toMatchObject({ restored: backup.id, safetyBackup: { kind: "pre-restore" } })
    const after = await configuration()
    expect(after).toEqual(before)
    // And it works as it did: the key, the alias, the combo and the provider's stored secret.
    const answer = await chat("house-model", clientKey)
    expect(answer.status).toBe(200)
    expect(answer.body.choices[0].message.content).toBe("configured upstream")
    expect(up.requests.at(-1)!.headers["authorization"]).toBe("Bearer sk-lab-secret-0123456789")
    // The restore kept a safety backup of the state it replaced.
    const kinds = (await ok("/api/db-backups")).backups.map((b: any) => b.kind)
    expect(kinds).toEqual(expect.arrayContaining(["manual", "pre-restore"]))
  }, 60_000)

  it("the same through a downloaded export uploaded again; a corrupt upload is a 400 and changes nothing", async () => {
    const before = await configuration()
    const exported = await fetch(`${gw.url}/api/db-backups/export`, { headers: admin })
    expect(exported.status).toBe(200)
    const bytes = new Uint8Array(await exported.arrayBuffer())
    const dir = tempDir("gw-roundtrip-")
    fs.writeFileSync(path.join(dir, "gateway.db"), bytes)

    await ok("/api/settings", { method: "PATCH", body: { systemPrompt: { enabled: false, text: "" } } })
    await ok("/api/settings/feature-flags", { method: "DELETE" })
    expect(await configuration()).not.toEqual(before)

    // A corrupt file: the header of a database and garbage after it.
    const corrupt = new Uint8Array(bytes.slice(0, 4096))
    corrupt.fill(0x5a, 100)
    const changedState = await configuration()
    const bad = await fetch(`${gw.url}/api/db-backups/import`, {
      method: "POST",
      headers: { ...admin, "content-type": "application/octet-stream" },
      body: corrupt
    })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as any).message).toBeTruthy()
    expect(await configuration()).toEqual(changedState)

    const form = new FormData()
    form.append("file", new Blob([fs.readFileSync(path.join(dir, "gateway.db"))]), "gateway.db")
    const good = await fetch(`${gw.url}/api/db-backups/import`, { method: "POST", headers: admin, body: form })
    expect(good.status, await good.clone().text()).toBe(200)
    expect(await configuration()).toEqual(before)
  }, 60_000)
})
