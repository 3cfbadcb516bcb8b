import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { KeyValue } from "../src/platform/store/KeyValue.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Compression and context on the request path (docs/compression.md), observed in what the
 * upstream got and in `X-Gateway-Compression`: the precedence table of `x-gateway-compression`
 * (spec document 1) one row per test, every client format streamed and not, prompt-cache
 * determinism, rtk's raw outputs, memory and skill injection, analytics.
 */
const ADMIN = "gwk_compression_admin_0123456789abcdefgh"
const CLIENT = "gwk_compression_client_0123456789abcdefg"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
let clientKeyId = ""

const PRETTY = JSON.stringify(
  {
    files: [
      { name: "a.ts", size: 120 },
      { name: "b.ts", size: 98 }
    ],
    total: 2
  },
  null,
  2
)
const MINIFIED = JSON.stringify(JSON.parse(PRETTY))

/** A chat request whose tool result is pretty JSON (json and whitespace shrink it; rtk leaves it). */
const chatBody = (model = "up/m1", extra: Record<string, unknown> = {}) => ({
  model,
  messages: [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: "List the files." },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "list_files", arguments: "{}" } }]
    },
    { role: "tool", tool_call_id: "call_1", content: PRETTY },
    { role: "user", content: "Thanks. Which is larger?" }
  ],
  ...extra
})

const send = async (headers: Record<string, string> = {}, body: Record<string, unknown> = chatBody(), path = "/v1/chat/completions") => {
  up.requests.length = 0
  const res = await call(`${gw.url}${path}`, { body, headers: { ...admin, ...headers } })
  expect(res.status, res.text).toBe(200)
  return { res, upstream: up.requests[0]!.body as any, mode: res.headers.get("x-gateway-compression") }
}
const toolText = (upstream: any) => upstream.messages.find((m: any) => m.role === "tool").content

const api = async (path: string, init: { method?: string; body?: unknown } = {}) => call(`${gw.url}${path}`, { ...init, headers: admin })
const put = async (path: string, body: unknown) => {
  const res = await api(path, { method: "PUT", body })
  expect(res.status, res.text).toBe(200)
  return res.body
}
const createCombo = async (name: string, engines: Array<Record<string, unknown>>) => {
  const res = await api("/api/context/combos", { method: "POST", body: { name, engines } })
  expect(res.status, res.text).toBe(201)
  return res.body
}

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  clientKeyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: CLIENT })))).id
  const res = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
    headers: admin
  })
  expect(res.status, res.text).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.always({})
  await put("/api/settings/compression", {})
  await put("/api/context/summarize/config", {})
  for (const c of (await api("/api/context/combos")).body.combos) await api(`/api/context/combos/${c.id}`, { method: "DELETE" })
  for (const m of (await api("/api/context/memory")).body.entries) await api(`/api/context/memory/${m.id}`, { method: "DELETE" })
  for (const s of (await api("/api/context/skills")).body.skills) await api(`/api/context/skills/${s.id}`, { method: "DELETE" })
  for (const c of (await api("/api/combos")).body.combos ?? []) await api(`/api/combos/${c.id}`, { method: "DELETE" })
})

describe("x-gateway-compression precedence (spec document 1), one row each", () => {
  it("nothing chose: not compressed, `off; source=default`", async () => {
    const { upstream, mode } = await send()
    expect(toolText(upstream)).toBe(PRETTY)
    expect(mode).toBe("off; source=default")
  })

  it("`off` in the header wins over an active profile", async () => {
    await put("/api/settings/compression", { activeProfile: "engine:json" })
    const { upstream, mode } = await send({ "x-gateway-compression": "off" })
    expect(toolText(upstream)).toBe(PRETTY)
    expect(mode).toBe("off; source=request-header")
  })

  it("`default`: the default combo (built in: json, rtk, whitespace)", async () => {
    const { upstream, mode } = await send({ "x-gateway-compression": "default" })
    expect(toolText(upstream)).toBe(MINIFIED)
    expect(mode).toBe("default; source=request-header")
  })

  it("`default` follows the settings' defaultCombo", async () => {
    const c = await createCombo("Only Whitespace", [{ engine: "whitespace" }])
    await put("/api/settings/compression", { defaultCombo: c.id })
    const { upstream, mode } = await send({ "x-gateway-compression": "default" })
    // Whitespace keeps JSON's indentation in a tool result (leading indentation is never touched).
    expect(toolText(upstream)).toBe(PRETTY)
    expect(mode).toBe("default; source=request-header")
  })

  it("`engine:<id>`: that engine alone", async () => {
    const { upstream, mode } = await send({ "x-gateway-compression": "engine:json" })
    expect(toolText(upstream)).toBe(MINIFIED)
    expect(mode).toBe("engine:json; source=request-header")
  })

  it("a combo by name, without case", async () => {
    await createCombo("Tight", [{ engine: "json" }])
    const { upstream, mode } = await send({ "x-gateway-compression": "tIGHT" })
    expect(toolText(upstream)).toBe(MINIFIED)
    expect(mode).toBe("Tight; source=request-header")
  })

  it("a combo by id", async () => {
    const c = await createCombo("by-id", [{ engine: "json" }])
    const { upstream, mode } = await send({ "x-gateway-compression": c.id })
    expect(toolText(upstream)).toBe(MINIFIED)
    expect(mode).toBe("by-id; source=request-header")
  })

  it("a combo named `off` or `default` only by id", async () => {
    const off = await createCombo("off", [{ engine: "json" }])
    const byName = await send({ "x-gateway-compression": "off" })
    expect(toolText(byName.upstream)).toBe(PRETTY)
    expect(byName.mode).toBe("off; source=request-header")
    const byId = await send({ "x-gateway-compression": off.id })
    expect(toolText(byId.upstream)).toBe(MINIFIED)
    expect(byId.mode).toBe("off; source=request-header") // the mode is the combo's name
    const def = await createCombo("Default", [{ engine: "whitespace" }])
    const defaultByName = await send({ "x-gateway-compression": "default" })
    expect(toolText(defaultByName.upstream)).toBe(MINIFIED) // the built-in default, not the combo
    const defaultById = await send({ "x-gateway-compression": def.id })
    expect(toolText(defaultById.upstream)).toBe(PRETTY)
    expect(defaultById.mode).toBe("Default; source=request-header")
  })

  it("an unknown value is ignored, never an error: the next rule decides", async () => {
    await put("/api/settings/compression", { activeProfile: "engine:json" })
    for (const value of ["no-such-combo", "engine:nope", "   "]) {
      const { upstream, mode } = await send({ "x-gateway-compression": value })
      expect(toolText(upstream)).toBe(MINIFIED)
      expect(mode).toBe("engine:json; source=active-profile")
    }
  })

  it("globally disabled: the header cannot turn it on", async () => {
    await put("/api/settings/compression", { enabled: false })
    const { upstream, mode } = await send({ "x-gateway-compression": "engine:json" })
    expect(toolText(upstream)).toBe(PRETTY)
    expect(mode).toBe("off; source=off")
  })

  it("a routing combo's assignment, below the header", async () => {
    const routing = await api("/api/combos", {
      method: "POST",
      body: { name: "coder", strategy: "priority", targets: [{ model: "up/m1" }] }
    })
    expect(routing.status, routing.text).toBe(201)
    const c = await createCombo("for-coder", [{ engine: "json" }])
    expect((await put(`/api/context/combos/${c.id}/assignments`, { routingCombos: ["coder"] })).routingCombos).toEqual(["coder"])
    const assigned = await send({}, chatBody("coder"))
    expect(toolText(assigned.upstream)).toBe(MINIFIED)
    expect(assigned.mode).toBe("for-coder; source=routing-override")
    const overridden = await send({ "x-gateway-compression": "off" }, chatBody("coder"))
    expect(toolText(overridden.upstream)).toBe(PRETTY)
    // Another model is not assigned.
    expect((await send()).mode).toBe("off; source=default")
  })

  it("a model's assignment counts as a routing override, above the active profile", async () => {
    const c = await createCombo("for-m1", [{ engine: "json" }])
    await put(`/api/context/combos/${c.id}/assignments`, { models: ["up/m1"] })
    await put("/api/settings/compression", { activeProfile: "engine:whitespace" })
    const { upstream, mode } = await send()
    expect(toolText(upstream)).toBe(MINIFIED)
    expect(mode).toBe("for-m1; source=routing-override")
  })

  it("the active profile, when nothing above chose", async () => {
    const c = await createCombo("active", [{ engine: "json" }])
    await put("/api/settings/compression", { activeProfile: "ACTIVE" })
    const { upstream, mode } = await send()
    expect(toolText(upstream)).toBe(MINIFIED)
    expect(mode).toBe("active; source=active-profile")
    void c
  })

  it("the auto-trigger: past the threshold, the default combo; below it, nothing", async () => {
    await put("/api/settings/compression", { autoTrigger: { enabled: true, thresholdTokens: 50, windowShare: null } })
    const big = await send()
    expect(toolText(big.upstream)).toBe(MINIFIED)
    expect(big.mode).toBe("default; source=auto-trigger")
    await put("/api/settings/compression", { autoTrigger: { enabled: true, thresholdTokens: 100_000, windowShare: null } })
    const small = await send()
    expect(toolText(small.upstream)).toBe(PRETTY)
    expect(small.mode).toBe("off; source=default")
  })

  it("the panel default (compressByDefault)", async () => {
    await put("/api/settings/compression", { compressByDefault: true })
    const { upstream, mode } = await send()
    expect(toolText(upstream)).toBe(MINIFIED)
    expect(mode).toBe("default; source=default")
  })
})

describe("every client format, streamed and not", () => {
  // Each format's tool result carries the pretty JSON; the upstream (OpenAI chat) gets it minified.
  const requests: ReadonlyArray<{ name: string; path: string; body: (stream: boolean) => Record<string, unknown> }> = [
    { name: "openai-chat", path: "/v1/chat/completions", body: (stream) => chatBody("up/m1", { stream }) },
    {
      name: "openai-responses",
      path: "/v1/responses",
      body: (stream) => ({
        model: "up/m1",
        stream,
        input: [
          { type: "message", role: "user", content: "List the files." },
          { type: "function_call", call_id: "call_1", name: "list_files", arguments: "{}" },
          { type: "function_call_output", call_id: "call_1", output: PRETTY }
        ]
      })
    },
    {
      name: "anthropic",
      path: "/v1/messages",
      body: (stream) => ({
        model: "up/m1",
        max_tokens: 100,
        stream,
        messages: [
          { role: "user", content: "List the files." },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "list_files", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: PRETTY }] }
        ]
      })
    },
    {
      name: "gemini",
      path: "/v1beta/models/up/m1:generateContent",
      body: () => ({
        contents: [
          { role: "user", parts: [{ text: "List the files." }] },
          { role: "model", parts: [{ functionCall: { name: "list_files", args: {} } }] },
          { role: "user", parts: [{ functionResponse: { name: "list_files", response: { output: PRETTY } } }] }
        ]
      })
    },
    {
      name: "ollama",
      path: "/api/chat",
      body: (stream) => ({
        model: "up/m1",
        stream,
        messages: [
          { role: "user", content: "List the files." },
          { role: "assistant", content: "", tool_calls: [{ function: { name: "list_files", arguments: {} } }] },
          { role: "tool", content: PRETTY }
        ]
      })
    }
  ]

  for (const r of requests) {
    for (const stream of [false, true]) {
      it(`${r.name}${stream ? " (streamed)" : ""}: the tool result arrives compressed`, async () => {
        up.requests.length = 0
        const path = r.name === "gemini" && stream ? r.path.replace(":generateContent", ":streamGenerateContent?alt=sse") : r.path
        const res = await call(`${gw.url}${path}`, { body: r.body(stream), headers: { ...admin, "x-gateway-compression": "engine:json" } })
        expect(res.status, res.text).toBe(200)
        expect(res.headers.get("x-gateway-compression")).toBe("engine:json; source=request-header")
        const sent = JSON.stringify(up.requests[0]!.body)
        expect(sent).toContain(JSON.stringify(MINIFIED))
        expect(sent).not.toContain(JSON.stringify(PRETTY))
      })
    }
  }
})

describe("prompt caches still hit", () => {
  it("the same conversation compresses to the same bytes, and a longer one keeps the prefix", async () => {
    const big = Array.from({ length: 400 }, (_, i) => `\u001b[32mPASS\u001b[0m test/file${i % 7}.test.ts > case ${i}`).join("\n")
    const body = (extra: Array<Record<string, unknown>>) => ({
      model: "up/m1",
      messages: [
        { role: "user", content: "Run the tests." },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "bash", arguments: JSON.stringify({ command: "npx vitest run" }) } }
          ]
        },
        { role: "tool", tool_call_id: "call_1", content: big },
        ...extra
      ]
    })
    const h = { "x-gateway-compression": "default" }
    const a = (await send(h, body([]))).upstream
    const b = (await send(h, body([]))).upstream
    expect(JSON.stringify(b)).toBe(JSON.stringify(a))
    expect(toolText(a).length).toBeLessThan(big.length)
    const longer = (
      await send(
        h,
        body([
          { role: "assistant", content: "All pass." },
          { role: "user", content: "Good." }
        ])
      )
    ).upstream
    expect(longer.messages.slice(0, a.messages.length)).toEqual(a.messages)
  })
})

describe("rtk's raw outputs", () => {
  it("a long tool output is cut with a marker naming an id; GET /api/context/rtk/raw-output/{id} gives it whole", async () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i}: ${"x".repeat((i * 7) % 40)} value=${i * 13}`)
    const output = lines.join("\n")
    const body = {
      model: "up/m1",
      messages: [
        { role: "user", content: "Dump it." },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: JSON.stringify({ command: "cat big.log" }) } }]
        },
        { role: "tool", tool_call_id: "c1", content: output }
      ]
    }
    const { upstream } = await send({ "x-gateway-compression": "engine:rtk" }, body)
    const sent = toolText(upstream) as string
    expect(sent.length).toBeLessThan(output.length / 4)
    const id = /raw-output\/([A-Za-z0-9_-]+)/.exec(sent)?.[1]
    expect(id, sent.slice(0, 2000)).toBeDefined()
    const raw = await api(`/api/context/rtk/raw-output/${id}`)
    expect(raw.status, raw.text).toBe(200)
    expect(raw.body.text).toBe(output)
    expect((await api("/api/context/rtk/raw-output/raw_nope")).status).toBe(404)
  })
})

describe("memory and skill injection", () => {
  const systemText = (upstream: any) =>
    upstream.messages
      .filter((m: any) => m.role === "system")
      .map((m: any) => m.content)
      .join("\n---\n")
  const asClient = { authorization: `Bearer ${CLIENT}` }

  it("global, per key and per session entries join the system prompt after the client's own; x-gateway-no-memory skips them", async () => {
    const global = await api("/api/context/memory", { method: "POST", body: { text: "The repository uses pnpm.", tags: ["repo"] } })
    expect(global.status, global.text).toBe(201)
    expect(global.body).toMatchObject({ scope: "global", scopeId: null, tags: ["repo"], enabled: true })
    expect(global.body.tokens).toBeGreaterThan(0)
    await api("/api/context/memory", {
      method: "POST",
      body: { text: "This key's owner prefers tabs.", scope: "key", scopeId: clientKeyId }
    })
    await api("/api/context/memory", {
      method: "POST",
      body: { text: "Session s-1 works on the parser.", scope: "session", scopeId: "s-1" }
    })

    const asAdmin = systemText((await send()).upstream)
    expect(asAdmin.startsWith("You are a coding agent.")).toBe(true)
    expect(asAdmin).toContain("The repository uses pnpm.")
    expect(asAdmin).not.toContain("prefers tabs")
    expect(asAdmin).not.toContain("parser")

    up.requests.length = 0
    const res = await call(`${gw.url}/v1/chat/completions`, { body: chatBody(), headers: { ...asClient, "x-session-id": "s-1" } })
    expect(res.status, res.text).toBe(200)
    const asKey = systemText(up.requests[0]!.body)
    expect(asKey).toContain("The repository uses pnpm.")
    expect(asKey).toContain("This key's owner prefers tabs.")
    expect(asKey).toContain("Session s-1 works on the parser.")
    // Global, then the key's, then the session's.
    expect(asKey.indexOf("pnpm")).toBeLessThan(asKey.indexOf("tabs"))
    expect(asKey.indexOf("tabs")).toBeLessThan(asKey.indexOf("parser"))

    const skipped = systemText((await send({ "x-gateway-no-memory": "true" })).upstream)
    expect(skipped).toBe("You are a coding agent.")
  })

  it("the token budget bounds what is injected", async () => {
    await api("/api/context/memory", { method: "POST", body: { text: "short fact one" } })
    await api("/api/context/memory", { method: "POST", body: { text: "long ".repeat(400) } })
    await put("/api/settings/compression", { injectionMaxTokens: 50 })
    const text = systemText((await send()).upstream)
    expect(text).toContain("short fact one")
    expect(text).not.toContain("long long")
    await put("/api/settings/compression", { injectionMaxTokens: 0 })
    expect(systemText((await send()).upstream)).toBe("You are a coding agent.")
  })

  it("skills: always, by keyword in a user turn, by model; a catalog skill's text is its file", async () => {
    const always = await api("/api/context/skills", {
      method: "POST",
      body: { name: "style", text: "Answer in short sentences.", trigger: { always: true } }
    })
    expect(always.status, always.text).toBe(201)
    await api("/api/context/skills", {
      method: "POST",
      body: { name: "docker", text: "Prefer docker compose v2.", trigger: { keywords: ["Docker"] } }
    })
    await api("/api/context/skills", { method: "POST", body: { name: "for-m1", text: "You run on m1.", trigger: { models: ["up/*"] } } })
    // A small catalog skill, well inside the default injection budget (2,000 tokens) whatever the catalog grows to.
    const catalog = await api("/api/context/skills", {
      method: "POST",
      body: { name: "cache-docs", catalogId: "gw-cache", trigger: { keywords: ["response cache"] } }
    })
    expect(catalog.status, catalog.text).toBe(201)
    expect(catalog.body.source).toBe("catalog")
    expect(catalog.body.text).toContain("# Response cache (REST)")

    const plain = systemText((await send()).upstream)
    expect(plain).toContain("Answer in short sentences.")
    expect(plain).toContain("You run on m1.")
    expect(plain).not.toContain("docker compose")
    const withKeyword = chatBody()
    ;(withKeyword.messages as any[])[1].content = "Set up docker for this."
    const docker = systemText((await send({}, withKeyword)).upstream)
    expect(docker).toContain("Prefer docker compose v2.")
    expect(docker).not.toContain("# Response cache (REST)")
    ;(withKeyword.messages as any[])[1].content = "How long does the Response Cache keep answers?"
    expect(systemText((await send({}, withKeyword)).upstream)).toContain("# Response cache (REST)")

    expect((await api("/api/context/skills", { method: "POST", body: { name: "x", catalogId: "gw-nope" } })).status).toBe(400)
    expect((await api("/api/context/skills", { method: "POST", body: { name: "y" } })).status).toBe(400)
    expect((await api("/api/context/skills", { method: "POST", body: { name: "style", text: "again" } })).status).toBe(409)
  })

  it("the same request gets the same injected text (deterministic)", async () => {
    await api("/api/context/memory", { method: "POST", body: { text: "Fact A." } })
    await api("/api/context/memory", { method: "POST", body: { text: "Fact B." } })
    const a = JSON.stringify((await send()).upstream)
    const b = JSON.stringify((await send()).upstream)
    expect(b).toBe(a)
    expect(a.indexOf("Fact A.")).toBeLessThan(a.indexOf("Fact B."))
  })
})

describe("management", () => {
  it("analytics count tokens and cost saved per engine, combo, model and day, and injected tokens", async () => {
    await send({ "x-gateway-compression": "engine:json" })
    await api("/api/context/memory", { method: "POST", body: { text: "Remember this." } })
    await send()
    const res = await api("/api/context/analytics")
    expect(res.status, res.text).toBe(200)
    const today = new Date().toISOString().slice(0, 10)
    const json = res.body.rows.find((r: any) => r.engine === "json" && r.combo === "engine:json" && r.model === "up/m1" && r.day === today)
    expect(json, JSON.stringify(res.body.rows)).toBeDefined()
    expect(json.requests).toBeGreaterThanOrEqual(1)
    expect(json.tokensSaved).toBeGreaterThan(0)
    expect(json.tokensSaved).toBe(json.tokensBefore - json.tokensAfter)
    const memory = res.body.byEngine.find((r: any) => r.engine === "memory")
    expect(memory.injectedTokens).toBeGreaterThan(0)
    expect(res.body.totals.tokensSaved).toBeGreaterThan(0)
    expect((await api("/api/context/analytics?from=2026-13-01")).status).toBe(400)
    expect((await api("/api/context/analytics?from=2026-02-01&to=2026-01-01")).status).toBe(400)
  })

  it("the preview: a body in any format, tokens before and after per engine", async () => {
    const res = await api("/api/compression/preview", {
      method: "POST",
      body: { format: "openai-chat", body: chatBody(), mode: "default", model: "openai/gpt-4o" }
    })
    expect(res.status, res.text).toBe(200)
    expect(res.body.mode).toBe("default")
    expect(res.body.tokensAfter).toBeLessThan(res.body.tokensBefore)
    expect(res.body.engines.map((e: any) => e.engine)).toContain("json")
    expect(res.body.tokenizer).toMatch(/o200k/)
    expect(res.body.body.messages[3].content).toBe(MINIFIED)
    const anth = await api("/api/compression/preview", {
      method: "POST",
      body: {
        format: "anthropic",
        mode: "engine:json",
        body: {
          model: "x",
          max_tokens: 5,
          messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: PRETTY }] }]
        }
      }
    })
    expect(anth.status, anth.text).toBe(200)
    expect(anth.body.body.messages[0].content[0].content).toBe(MINIFIED)
    const bad = await api("/api/compression/preview", { method: "POST", body: { body: chatBody(), mode: "no-such" } })
    expect(bad.status).toBe(400)
    expect(bad.body.error ?? bad.body.message ?? bad.text).toBeDefined()
    expect((await api("/api/compression/preview", { method: "POST", body: { format: "klingon", body: {} } })).status).toBe(400)
  })

  it("engines' settings, rules, language packs, rtk filters and test", async () => {
    const packs = await api("/api/compression/language-packs")
    expect(packs.status).toBe(200)
    expect(packs.body.packs.map((p: any) => p.id)).toContain("en")
    const rules = await api("/api/compression/rules")
    expect(new Set(rules.body.rules.map((r: any) => r.engine))).toEqual(new Set(["caveman", "rtk", "whitespace", "json"]))
    const caveman = await api("/api/context/caveman/config")
    expect(caveman.status).toBe(200)
    expect(caveman.body.language).toBe("en")
    const changed = await put("/api/context/caveman/config", { ...caveman.body, language: "es" })
    expect(changed.language).toBe("es")
    expect((await api("/api/context/caveman/config")).body.language).toBe("es")
    const wrong = await api("/api/context/caveman/config", { method: "PUT", body: { language: "xx" } })
    expect(wrong.status).toBe(400)
    expect(JSON.stringify(wrong.body)).toMatch(/language/)
    expect((await api("/api/context/caveman/config", { method: "PUT", body: { nope: 1 } })).status).toBe(400)
    await put("/api/context/caveman/config", {})
    const filters = await api("/api/context/rtk/filters")
    expect(filters.body.filters.length).toBeGreaterThan(5)
    const test = await api("/api/context/rtk/test", { method: "POST", body: { text: "\u001b[31merror\u001b[0m: boom\n", command: "make" } })
    expect(test.status, test.text).toBe(200)
    expect(test.body.output).not.toContain("\u001b[")
    expect(test.body.output).toContain("error")
  })

  it("an engine's settings written by another process (the kv row) are picked up within seconds", async () => {
    await gw.run(Effect.flatMap(KeyValue, (kv) => kv.set("compression.engines", "caveman", JSON.stringify({ language: "de" }))))
    await expect.poll(async () => (await api("/api/context/caveman/config")).body.language, { timeout: 8_000, interval: 250 }).toBe("de")
    await put("/api/context/caveman/config", {})
  })

  it("combos: validation, conflicts, assignments held by one combo", async () => {
    expect((await api("/api/context/combos", { method: "POST", body: { name: "e", engines: [] } })).status).toBe(400)
    expect((await api("/api/context/combos", { method: "POST", body: { name: "e", engines: [{ engine: "zip" }] } })).status).toBe(400)
    const badConfig = await api("/api/context/combos", {
      method: "POST",
      body: { name: "e", engines: [{ engine: "caveman", config: { language: "xx" } }] }
    })
    expect(badConfig.status).toBe(400)
    expect(JSON.stringify(badConfig.body)).toMatch(/engines\[0\]\.config/)
    expect(
      (await api("/api/context/combos", { method: "POST", body: { name: "engine:json", engines: [{ engine: "json" }] } })).status
    ).toBe(400)
    const a = await createCombo("A", [{ engine: "json" }])
    expect((await api("/api/context/combos", { method: "POST", body: { name: "a", engines: [{ engine: "json" }] } })).status).toBe(409)
    const b = await createCombo("B", [{ engine: "rtk" }, { engine: "caveman", config: { level: "lite" } }])
    await put(`/api/context/combos/${a.id}/assignments`, { models: ["up/m1"] })
    const taken = await api(`/api/context/combos/${b.id}/assignments`, { method: "PUT", body: { models: ["up/m1"] } })
    expect(taken.status).toBe(409)
    expect(JSON.stringify(taken.body)).toMatch(/'A'/)
    expect((await api(`/api/context/combos/${a.id}`)).body.assignments.models).toEqual(["up/m1"])
    const renamed = await put(`/api/context/combos/${b.id}`, { name: "B2" })
    expect(renamed.engines).toEqual([{ engine: "rtk" }, { engine: "caveman", config: { level: "lite" } }])
    expect((await api(`/api/context/combos/${a.id}`, { method: "DELETE" })).status).toBe(200)
    expect((await api(`/api/context/combos/${a.id}`)).status).toBe(404)
    expect((await api("/api/context/combos/nope/assignments")).status).toBe(404)
  })

  it("memory: validation of scopes", async () => {
    expect((await api("/api/context/memory", { method: "POST", body: { text: "  " } })).status).toBe(400)
    expect((await api("/api/context/memory", { method: "POST", body: { text: "x", scope: "key" } })).status).toBe(400)
    expect((await api("/api/context/memory", { method: "POST", body: { text: "x", scopeId: "k" } })).status).toBe(400)
    expect((await api("/api/context/memory", { method: "POST", body: { text: "x", scope: "team" } })).status).toBe(400)
    const m = await api("/api/context/memory", { method: "POST", body: { text: "x", tags: ["t1"] } })
    const updated = await put(`/api/context/memory/${m.body.id}`, { enabled: false })
    expect(updated.enabled).toBe(false)
    expect((await api("/api/context/memory?tag=t1")).body.entries).toHaveLength(1)
    expect((await api("/api/context/memory?tag=t2")).body.entries).toHaveLength(0)
    expect((await api("/api/context/memory/nope")).status).toBe(404)
  })
})

describe("summarize", () => {
  /** A conversation of `n` user/assistant turns, then a last question. */
  const long = (n: number, tag: string) => ({
    model: "up/m1",
    messages: [
      { role: "system", content: "You are a coding agent." },
      ...Array.from({ length: n }, (_, i) =>
        i % 2 === 0
          ? { role: "user", content: `${tag} step ${i}: change file${i}.ts` }
          : { role: "assistant", content: `Done with step ${i - 1}.` }
      ),
      { role: "user", content: `${tag}: what is left?` }
    ]
  })
  const summaryCalls = () => up.requests.filter((r) => JSON.stringify(r.body).includes("<conversation>"))

  it("needs a model: without one a combo cannot name it and engine:summarize is ignored", async () => {
    await put("/api/context/summarize/config", {})
    const refused = await api("/api/context/combos", { method: "POST", body: { name: "s", engines: [{ engine: "summarize" }] } })
    expect(refused.status).toBe(400)
    expect(refused.body.message).toMatch(/summarize needs a model/)
    const { mode } = await send({ "x-gateway-compression": "engine:summarize" }, long(20, "a"))
    expect(mode).toBe("off; source=default")
    expect((await api("/api/context/summarize/config", { method: "PUT", body: { keepLastTurns: 1 } })).status).toBe(400)
  })

  it("wait: older turns become the model's summary, made once per older part; the newest turns stay whole", async () => {
    await put("/api/context/summarize/config", { model: "up/m1", minTurns: 6, keepLastTurns: 4, mode: "wait" })
    const c = await createCombo("sum", [{ engine: "summarize" }, { engine: "whitespace" }])
    up.always({ content: "SUMMARY: files 0 to 7 changed." })
    up.requests.length = 0
    const rowsOfClient = async () =>
      (await api(`/api/usage/request-logs?limit=1000`)).body.requests.filter((r: any) => r.apiKeyId === clientKeyId).length
    const before = await rowsOfClient()
    const first = await call(`${gw.url}/v1/chat/completions`, {
      body: long(12, "w"),
      headers: { authorization: `Bearer ${CLIENT}`, "x-gateway-compression": c.id }
    })
    expect(first.status, first.text).toBe(200)
    // The summary is charged to the key whose conversation it is: two usage rows of that key.
    await expect.poll(rowsOfClient, { timeout: 3_000 }).toBe(before + 2)
    expect(first.headers.get("x-gateway-compression")).toBe("sum; source=request-header")
    expect(summaryCalls()).toHaveLength(1)
    // The summary call is never compressed itself, and carries the older turns.
    expect(JSON.stringify(summaryCalls()[0]!.body)).toContain("w step 0: change file0.ts")
    const sent = up.requests.find((r) => !JSON.stringify(r.body).includes("<conversation>"))!.body as any
    expect(sent.messages[0]).toEqual({ role: "system", content: "You are a coding agent." })
    expect(sent.messages[1].role).toBe("user")
    expect(sent.messages[1].content).toContain("SUMMARY: files 0 to 7 changed.")
    expect(sent.messages[2].role).toBe("assistant")
    // 12 turns + the question: 8 summarised (the cut moves in steps of 4, before a user turn), 5 kept.
    expect(sent.messages.slice(3).map((m: any) => m.content)).toEqual([
      "w step 8: change file8.ts",
      "Done with step 8.",
      "w step 10: change file10.ts",
      "Done with step 10.",
      "w: what is left?"
    ])
    // The next turn (same older part): the same summary, no new call, the same prefix.
    up.requests.length = 0
    const next = long(12, "w")
    next.messages.push({ role: "assistant", content: "Nothing." }, { role: "user", content: "Thanks." })
    expect(
      (await call(`${gw.url}/v1/chat/completions`, { body: next, headers: { ...admin, "x-gateway-compression": "sum" } })).status
    ).toBe(200)
    expect(summaryCalls()).toHaveLength(0)
    expect((up.requests[0]!.body as any).messages.slice(0, 3)).toEqual(sent.messages.slice(0, 3))
    const stats = await api("/api/context/analytics")
    expect(stats.body.byEngine.find((r: any) => r.engine === "summarize")?.tokensSaved).toBeGreaterThan(0)
  })

  it("background: the first request goes whole while the summary is made; later turns use it", async () => {
    await put("/api/context/summarize/config", { model: "up/m1", minTurns: 6, keepLastTurns: 4 })
    await createCombo("bg", [{ engine: "summarize" }])
    up.always({ content: "SUMMARY B." })
    up.requests.length = 0
    const first = await call(`${gw.url}/v1/chat/completions`, { body: long(12, "b"), headers: { ...admin, "x-gateway-compression": "bg" } })
    expect(first.status).toBe(200)
    const whole = up.requests.find((r) => !JSON.stringify(r.body).includes("<conversation>"))!.body as any
    expect(whole.messages).toHaveLength(14)
    await expect.poll(() => summaryCalls().length, { timeout: 5_000 }).toBe(1)
    await expect
      .poll(async () => (await send({ "x-gateway-compression": "bg" }, long(12, "b"))).upstream.messages[1].content, { timeout: 5_000 })
      .toContain("SUMMARY B.")
  })
})

describe("rtk project filter files", () => {
  const rtkRequest = (command: string, output: string) => ({
    model: "up/m1",
    messages: [
      { role: "user", content: "Run it." },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: JSON.stringify({ command }) } }]
      },
      { role: "tool", tool_call_id: "c1", content: output }
    ]
  })
  const output = ["deploy: start", "debug: x=1", "debug: y=2", "deploy: done"].join("\n")

  it("a valid file's filters run; a file with an unsafe regex is refused until GATEWAY_RTK_TRUST_PROJECT_FILTERS", async () => {
    const dir = path.join(gw.dataDir, "rtk-filters")
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(
      path.join(dir, "deploy.json"),
      JSON.stringify({
        filters: [{ id: "deploy-tool", description: "our deploy script", match: { command: "deploy\\.sh" }, drop: ["^debug: "] }]
      })
    )
    fs.writeFileSync(
      path.join(dir, "risky.json"),
      JSON.stringify([{ id: "risky", description: "nested quantifier", match: { command: "risky" }, drop: ["^(a+)+$"] }])
    )
    try {
      const listed = await api("/api/context/rtk/filters")
      expect(listed.status).toBe(200)
      expect(listed.body.project.trusted).toBe(false)
      const files = Object.fromEntries(listed.body.project.files.map((f: any) => [f.file, f]))
      expect(files["deploy.json"]).toEqual({ file: "deploy.json", filters: 1, errors: [] })
      expect(files["risky.json"].filters).toBe(0)
      expect(files["risky.json"].errors.join(" ")).toMatch(/nested quantifier/)
      expect(listed.body.filters.find((f: any) => f.id === "deploy-tool")).toMatchObject({ source: "project", enabled: true })
      expect(listed.body.filters.some((f: any) => f.id === "risky")).toBe(false)

      const { upstream } = await send({ "x-gateway-compression": "engine:rtk" }, rtkRequest("./deploy.sh prod", output))
      expect(toolText(upstream)).toBe("deploy: start\ndeploy: done")

      expect(
        (await api("/api/settings/feature-flags", { method: "PUT", body: { key: "GATEWAY_RTK_TRUST_PROJECT_FILTERS", value: "true" } }))
          .status
      ).toBe(200)
      const trusted = await api("/api/context/rtk/filters")
      expect(trusted.body.project.trusted).toBe(true)
      expect(trusted.body.project.files.find((f: any) => f.file === "risky.json")).toMatchObject({ filters: 1, errors: [] })
    } finally {
      await api("/api/settings/feature-flags", { method: "PUT", body: { key: "GATEWAY_RTK_TRUST_PROJECT_FILTERS", value: "false" } })
      fs.rmSync(dir, { recursive: true, force: true })
      await api("/api/context/rtk/filters")
    }
  })
})
