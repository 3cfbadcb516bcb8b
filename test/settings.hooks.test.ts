import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { RequestHooks } from "../src/kernel/RequestHooks.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { connectFamilies, FAMILIES } from "./support/families.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * The global system prompt and thinking-budget policy (docs/operations.md, "Settings"), observed
 * in the body each upstream got, one client format per upstream family of the same format (the
 * pass-through path), plus translated requests.
 */
const ADMIN = "gwk_settings_hooks_admin_0123456789abcdef"
const CLIENT = "gwk_settings_hooks_client_0123456789abcd"
const admin = { authorization: `Bearer ${ADMIN}` }
const client = { authorization: `Bearer ${CLIENT}` }

let gw: TestGateway
let up: FakeUpstream
let clientKeyId = ""

/** One request per client format, to the upstream of the same family, with its own system prompt and a large reasoning budget. */
const REQUESTS: Record<Family, { path: string; body: Record<string, unknown> }> = {
  "openai-chat": {
    path: "/v1/chat/completions",
    body: {
      model: "up-chat/m1",
      messages: [
        { role: "system", content: "own" },
        { role: "user", content: "hi" }
      ],
      reasoning_effort: "high"
    }
  },
  "openai-responses": {
    path: "/v1/responses",
    body: { model: "up-resp/m1", input: "hi", instructions: "own", reasoning: { effort: "high" } }
  },
  anthropic: {
    path: "/v1/messages",
    body: {
      model: "up-anth/m1",
      max_tokens: 40000,
      system: "own",
      messages: [{ role: "user", content: "hi" }],
      thinking: { type: "enabled", budget_tokens: 32000 }
    }
  },
  gemini: {
    path: "/v1beta/models/up-gem/m1:generateContent",
    body: {
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      systemInstruction: { parts: [{ text: "own" }] },
      generationConfig: { thinkingConfig: { thinkingBudget: 30000 } }
    }
  },
  ollama: {
    path: "/api/chat",
    body: {
      model: "up-oll/m1",
      stream: false,
      messages: [
        { role: "system", content: "own" },
        { role: "user", content: "hi" }
      ],
      think: "high"
    }
  }
}

const send = async (family: Family, headers = admin, override: Record<string, unknown> = {}) => {
  up.requests.length = 0
  const { path, body } = REQUESTS[family]
  const res = await call(`${gw.url}${path}`, { body: { ...body, ...override }, headers })
  expect(res.status, res.text).toBe(200)
  expect(up.requests.map((r) => r.family)).toEqual([family])
  return up.requests[0]!.body
}

const put = async (path: string, body: unknown) => {
  const res = await call(`${gw.url}${path}`, { method: "PUT", body, headers: admin })
  expect(res.status, res.text).toBe(200)
}

/** The system text the upstream got, in its family's field. */
const systemOf = (family: Family, body: any): unknown => {
  switch (family) {
    case "openai-chat":
    case "ollama":
      return body.messages.filter((m: any) => m.role === "system").map((m: any) => m.content)
    case "openai-responses":
      return body.instructions
    case "anthropic":
      return body.system
    case "gemini":
      return (body.systemInstruction ?? body.system_instruction).parts.map((p: any) => p.text)
  }
}

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  clientKeyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "opted-out" }, { secret: CLIENT })))).id
  await connectFamilies(gw.url, up, ADMIN)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.always({})
  await put("/api/settings", {})
})

/** The settings' own hooks (compression's, context.compression, is registered while compression is on). */
const hookNames = () =>
  gw.run(
    Effect.map(RequestHooks, (h) =>
      h
        .registered()
        .map((r) => r.name)
        .filter((n) => n.startsWith("settings."))
    )
  )

describe("global system prompt", () => {
  it("is registered as a hook only while enabled with text", async () => {
    expect(await hookNames()).toEqual([])
    await put("/api/settings/system-prompt", { enabled: true, text: "GLOBAL" })
    expect(await hookNames()).toEqual(["settings.system-prompt"])
    await put("/api/settings/system-prompt", { enabled: false, text: "GLOBAL" })
    expect(await hookNames()).toEqual([])
  })

  it("prepend: before the client's own system prompt, in each format's own field", async () => {
    await put("/api/settings/system-prompt", { enabled: true, text: "GLOBAL", position: "prepend" })
    const expected: Record<Family, unknown> = {
      "openai-chat": ["GLOBAL", "own"],
      "openai-responses": "GLOBAL\n\nown",
      anthropic: "GLOBAL\n\nown",
      gemini: ["GLOBAL", "own"],
      ollama: ["GLOBAL", "own"]
    }
    for (const { family } of FAMILIES) expect(systemOf(family, await send(family)), family).toEqual(expected[family])
  })

  it("append: after the client's own system prompt; Anthropic system blocks get a block", async () => {
    await put("/api/settings/system-prompt", { enabled: true, text: "GLOBAL", position: "append" })
    const expected: Record<Family, unknown> = {
      "openai-chat": ["own", "GLOBAL"],
      "openai-responses": "own\n\nGLOBAL",
      anthropic: "own\n\nGLOBAL",
      gemini: ["own", "GLOBAL"],
      ollama: ["own", "GLOBAL"]
    }
    for (const { family } of FAMILIES) expect(systemOf(family, await send(family)), family).toEqual(expected[family])
    const blocks = await send("anthropic", admin, { system: [{ type: "text", text: "own" }] })
    expect(blocks.system).toEqual([
      { type: "text", text: "own" },
      { type: "text", text: "GLOBAL" }
    ])
  })

  it("reaches a translated request too (OpenAI client → Anthropic upstream)", async () => {
    await put("/api/settings/system-prompt", { enabled: true, text: "GLOBAL" })
    up.requests.length = 0
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "up-anth/m1", messages: [{ role: "user", content: "hi" }] },
      headers: admin
    })
    expect(res.status).toBe(200)
    expect(JSON.stringify(up.requests[0]!.body.system)).toContain("GLOBAL")
  })

  it("a key listed in skipKeyIds opts out", async () => {
    await put("/api/settings/system-prompt", { enabled: true, text: "GLOBAL", skipKeyIds: [clientKeyId] })
    for (const { family } of FAMILIES) {
      expect(JSON.stringify(systemOf(family, await send(family, client))), family).not.toContain("GLOBAL")
      expect(JSON.stringify(systemOf(family, await send(family, admin))), family).toContain("GLOBAL")
    }
  })
})

describe("thinking budget", () => {
  it("passthrough (the default) registers nothing and changes nothing", async () => {
    expect(await hookNames()).toEqual([])
    const body = await send("anthropic")
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 32000 })
  })

  it("cap: budgets and levels above the cap are lowered in every format", async () => {
    await put("/api/settings/thinking-budget", { mode: "cap", maxTokens: 2048 })
    expect(await hookNames()).toEqual(["settings.thinking-budget"])
    expect((await send("openai-chat")).reasoning_effort).toBe("low")
    expect((await send("openai-responses")).reasoning.effort).toBe("low")
    expect((await send("anthropic")).thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
    expect((await send("gemini")).generationConfig.thinkingConfig.thinkingBudget).toBe(2048)
    expect((await send("ollama")).think).toBe("low")
    // Within the cap: left as sent.
    expect((await send("anthropic", admin, { thinking: { type: "enabled", budget_tokens: 1500 } })).thinking).toEqual({
      type: "enabled",
      budget_tokens: 1500
    })
    expect((await send("openai-chat", admin, { reasoning_effort: "minimal" })).reasoning_effort).toBe("minimal")
  })

  it("force: every request at the set level or budget, also when the client asked for none", async () => {
    await put("/api/settings/thinking-budget", { mode: "force", effort: "low", budgetTokens: 4096 })
    expect((await send("openai-chat", admin, { reasoning_effort: undefined })).reasoning_effort).toBe("low")
    expect((await send("openai-responses", admin, { reasoning: undefined })).reasoning).toMatchObject({ effort: "low" })
    const anth = await send("anthropic", admin, { thinking: undefined, max_tokens: 1000 })
    expect(anth.thinking).toEqual({ type: "enabled", budget_tokens: 4096 })
    expect(anth.max_tokens).toBeGreaterThan(4096)
    expect((await send("gemini")).generationConfig.thinkingConfig.thinkingBudget).toBe(4096)
    expect((await send("ollama", admin, { think: undefined })).think).toBe("low")
    await put("/api/settings/thinking-budget", { mode: "force", effort: "none", budgetTokens: 0 })
    expect((await send("anthropic")).thinking).toEqual({ type: "disabled" })
    expect((await send("ollama")).think).toBe(false)
  })
})
