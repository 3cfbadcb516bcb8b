import * as Effect from "effect/Effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { levelsReachServer, type McpAccess, refusal } from "../src/inference/mcp/access.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Limits at every level (docs/accounting.md, "Limits at every level"), through HTTP: a member's key
 * refused by its team's budget while its own has room, the organisation's token limit, a user's
 * requests per minute across two keys, a team's allowed models, a level set above the one above it,
 * and the per-key bodies of before. The fake upstream reports 11 input and 7 output tokens; gpt-4o
 * costs $2.50 in / $10 out per 1M tokens, so a request costs $0.0000975.
 */
const ADMIN = "gwk_levels_admin_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
let research: { id: string; name: string }
let ana: { id: string }
let bob: { id: string }
/** Keys: ana's (a member of research), bob's two (no team), and one nobody owns. */
const keys: Record<string, { id: string; secret: string }> = {}
/** Limits to remove after each test: [path, body]. */
const cleanup: Array<() => Promise<unknown>> = []

const api = (path: string, body?: unknown, method?: string) =>
  call(`${gw.url}${path}`, { headers: admin, ...(body === undefined ? {} : { body }), ...(method ? { method } : {}) })
const chat = (key: string, model = "oai/gpt-4o") =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model, messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${keys[key]!.secret}` }
  })
const budget = async (body: Record<string, unknown>) => {
  const res = await api("/api/usage/budget", body)
  if (res.status === 200) {
    const id = res.body.apiKeyId as string
    cleanup.push(() => api(`/api/usage/budget/${id}`, undefined, "DELETE"))
  }
  return res
}
const levelLimits = async (body: Record<string, unknown>) => {
  const res = await api("/api/usage/limits", body)
  if (res.status === 200) cleanup.push(() => api(`/api/usage/limits/${res.body.subjectId}`, undefined, "DELETE"))
  return res
}

beforeAll(async () => {
  up = await FakeUpstream.start()
  // Refusals answer 429 rather than going to a free model.
  gw = await startGateway({ env: { GATEWAY_EMERGENCY_FALLBACK: "false" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  expect(
    (
      await api("/api/providers", {
        provider: "openai",
        name: "oai",
        apiKey: "sk-oai",
        baseUrl: up.baseUrl("openai-chat"),
        defaultModel: "gpt-4o"
      })
    ).status
  ).toBe(201)
  const team = await api("/api/teams", { name: "research" })
  expect(team.status).toBe(201)
  research = team.body
  const a = await api("/api/users", { email: "ana@example.com", name: "Ana", teamIds: ["research"] })
  expect(a.status).toBe(201)
  ana = a.body
  const b = await api("/api/users", { email: "bob@example.com", name: "Bob" })
  expect(b.status).toBe(201)
  bob = b.body
  const key = async (name: string, owner: Record<string, string>) => {
    const res = await api("/api/keys", { name, scopes: ["inference"], ...owner })
    expect(res.status).toBe(201)
    keys[name] = { id: res.body.id, secret: res.body.secret }
  }
  await key("ana-ci", { userId: "ana@example.com" })
  await key("bob-1", { userId: bob.id })
  await key("bob-2", { userId: bob.id })
  await key("loose", {})
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo()
  up.always({ content: "answer" })
  await gw.usageWritten()
})

describe("limits at every level", () => {
  it("a member's key is refused past its team's budget while its own budget has room, naming the team", async () => {
    up.always({ content: "answer" })
    // The key's own budget first (a level cannot be set above the one above it; the team has none yet).
    expect((await budget({ apiKeyId: keys["ana-ci"]!.id, dailyLimitUsd: 10 })).status).toBe(200)
    const team = await budget({ teamId: "research", dailyLimitUsd: 0.00015 })
    expect(team.status).toBe(200)
    expect(team.body).toMatchObject({ apiKeyId: research.id, level: "team", teamId: research.id, subjectName: "research" })
    // Two requests fit ($0.0000975 each; the second starts below $0.00015), the third does not.
    expect((await chat("ana-ci")).status).toBe(200)
    await gw.usageWritten()
    expect((await chat("ana-ci")).status).toBe(200)
    await gw.usageWritten()
    const refused = await chat("ana-ci")
    expect(refused.status).toBe(429)
    expect(refused.body.error).toMatchObject({ code: "budget_exhausted", level: "team" })
    expect(refused.body.error.message).toContain(`team 'research' (${research.id})`)
    expect(refused.headers.get("retry-after")).toBeTruthy()
    // The key's own budget has room; the team's shows the spend of its member's key.
    const own = (await api(`/api/usage/budget?apiKeyId=${keys["ana-ci"]!.id}`)).body.budgets[0]
    expect(own.exceeded).toBe(false)
    expect(own.level).toBeUndefined()
    const byTeam = (await api("/api/usage/budget?teamId=research")).body.budgets[0]
    expect(byTeam).toMatchObject({ level: "team", exceeded: true })
    expect(byTeam.spentUsd).toBeCloseTo(0.000195, 9)
    // A key outside the team is not held by it.
    expect((await chat("loose")).status).toBe(200)
  })

  it("the organisation's token limit refuses every key once reached, with level organisation", async () => {
    up.always({ content: "answer" })
    expect((await chat("loose")).status).toBe(200)
    await gw.usageWritten()
    const created = await api("/api/usage/token-limits", { organisation: true, scope: "global", maxTokens: 1, window: "day" })
    expect(created.status).toBe(201)
    cleanup.push(() => api("/api/usage/token-limits", { id: created.body.id }, "DELETE"))
    expect(created.body).toMatchObject({ level: "organisation", organisation: true, apiKeyId: "org" })
    // The day's tokens of every key, loaded when the limit appeared.
    expect(created.body.usedTokens).toBeGreaterThanOrEqual(18)
    for (const key of ["loose", "bob-1"]) {
      const refused = await chat(key)
      expect(refused.status).toBe(429)
      expect(refused.body.error).toMatchObject({ code: "token_limit_exceeded", level: "organisation" })
      expect(refused.body.error.message).toContain("token limit reached for the organisation")
    }
    expect((await api("/api/usage/token-limits?organisation=true")).body.limits).toHaveLength(1)
  })

  it("a user's requests per minute count across their keys, refused with level user", async () => {
    up.always({ content: "answer" })
    // Not across a minute's end: the window is the minute.
    const left = 60_000 - (Date.now() % 60_000)
    if (left < 8_000) await new Promise((r) => setTimeout(r, left + 100))
    const set = await levelLimits({ userId: "bob@example.com", rpm: 2 })
    expect(set.status).toBe(200)
    expect(set.body).toMatchObject({ subjectId: bob.id, level: "user", name: "bob@example.com", rpm: 2, tpm: null })
    expect(set.body.above.map((a: { level: string }) => a.level)).toEqual(["organisation"])
    expect((await chat("bob-1")).status).toBe(200)
    expect((await chat("bob-2")).status).toBe(200)
    const refused = await chat("bob-1")
    expect(refused.status).toBe(429)
    expect(refused.body.error).toMatchObject({ code: "rate_limit_exceeded", level: "user" })
    expect(refused.body.error.message).toContain("user 'bob@example.com'")
    expect(refused.headers.get("retry-after")).toBeTruthy()
    // Another user's key is not counted.
    expect((await chat("ana-ci")).status).toBe(200)
  })

  it("a team's allowed models refuse another model with 403 model_not_allowed and level team", async () => {
    up.always({ content: "answer" })
    const set = await levelLimits({ teamId: research.id, models: ["gpt-4o-mini"] })
    expect(set.status).toBe(200)
    const refused = await chat("ana-ci", "oai/gpt-4o")
    expect(refused.status).toBe(403)
    expect(refused.body.error).toMatchObject({ code: "model_not_allowed", level: "team" })
    expect(refused.body.error.message).toContain("team 'research'")
    // The allowed model goes through (its candidate's model matches), and a key outside the team is not held.
    expect((await chat("ana-ci", "oai/gpt-4o-mini")).status).toBe(200)
    expect((await chat("loose", "oai/gpt-4o")).status).toBe(200)
    // A member's own list must stay within the team's.
    const wider = await api("/api/usage/limits", { userId: ana.id, models: ["gpt-4o"] })
    expect(wider.status).toBe(400)
    expect(wider.body.message).toContain(`not within team 'research' (${research.id})'s models`)
  })

  it("a level set above the one above it is a 400 naming that level", async () => {
    expect((await budget({ teamId: "research", dailyLimitUsd: 20 })).status).toBe(200)
    const user = await api("/api/usage/budget", { userId: ana.id, dailyLimitUsd: 50 })
    expect(user.status).toBe(400)
    expect(user.body.message).toBe(`dailyLimitUsd 50 is above team 'research' (${research.id})'s 20`)
    // A key of a member is held by the team through its user.
    const key = await api("/api/usage/budget", { apiKeyId: keys["ana-ci"]!.id, dailyLimitUsd: 25 })
    expect(key.status).toBe(400)
    expect(key.body.message).toContain(`team 'research' (${research.id})'s 20`)
    expect((await budget({ userId: ana.id, dailyLimitUsd: 15 })).status).toBe(200)
    // Rate limits and token limits alike.
    expect((await levelLimits({ organisation: true, rpm: 100 })).status).toBe(200)
    const rpm = await api("/api/usage/limits", { teamId: "research", rpm: 500 })
    expect(rpm.status).toBe(400)
    expect(rpm.body.message).toBe("rpm 500 is above the organisation's 100")
    const tl = await api("/api/usage/token-limits", { teamId: "research", scope: "global", maxTokens: 100 })
    expect(tl.status).toBe(201)
    cleanup.push(() => api("/api/usage/token-limits", { id: tl.body.id }, "DELETE"))
    const over = await api("/api/usage/token-limits", { userId: ana.id, scope: "global", maxTokens: 1000 })
    expect(over.status).toBe(400)
    expect(over.body.message).toContain(`maxTokens 1000 is above team 'research' (${research.id})'s 100`)
  })

  it("a key's own rpm and tpm, set on POST or PATCH /api/keys, cannot be above a level above it either", async () => {
    expect((await levelLimits({ teamId: "research", rpm: 10, tpm: 1000 })).status).toBe(200)
    const made = await api("/api/keys", { name: "ana-fast", userId: ana.id, rpm: 50 })
    expect(made.status).toBe(400)
    expect(made.body.message).toBe(`rpm 50 is above team 'research' (${research.id})'s 10`)
    const patched = await api(`/api/keys/${keys["ana-ci"]!.id}`, { tpm: 5000 }, "PATCH")
    expect(patched.status).toBe(400)
    expect(patched.body.message).toBe(`tpm 5000 is above team 'research' (${research.id})'s 1000`)
    // Within the team's, or for a key outside the team, they are set as before.
    const within = await api("/api/keys", { name: "ana-slow", userId: ana.id, rpm: 5 })
    expect(within.status).toBe(201)
    cleanup.push(() => api(`/api/keys/${within.body.id}`, undefined, "DELETE"))
    expect((await api(`/api/keys/${keys["bob-1"]!.id}`, { tpm: 5000 }, "PATCH")).status).toBe(200)
    cleanup.push(() => api(`/api/keys/${keys["bob-1"]!.id}`, { tpm: null }, "PATCH"))
  })

  it("names one level: none or several is a 400; an unknown team is a 404", async () => {
    const none = await api("/api/usage/budget", { dailyLimitUsd: 5 })
    expect(none.status).toBe(400)
    expect(none.body.message).toContain("one of apiKeyId, teamId, userId or organisation: true")
    const several = await api("/api/usage/budget", { apiKeyId: keys["loose"]!.id, teamId: "research", dailyLimitUsd: 5 })
    expect(several.status).toBe(400)
    expect(several.body.message).toContain("name one level only: got apiKeyId and teamId")
    const limits = await api("/api/usage/limits", { rpm: 5 })
    expect(limits.status).toBe(400)
    expect((await api("/api/usage/budget", { teamId: "nobody", dailyLimitUsd: 5 })).status).toBe(404)
  })

  it("the per-key bodies of before work unchanged", async () => {
    const id = keys["loose"]!.id
    const set = await budget({ apiKeyId: id, monthlyLimitUsd: 50 })
    expect(set.status).toBe(200)
    expect(set.body).toMatchObject({ apiKeyId: id, monthlyLimitUsd: 50, resetInterval: "monthly" })
    expect(Object.keys(set.body)).not.toContain("level")
    const listed = (await api("/api/usage/budget")).body.budgets
    expect(listed.map((b: { apiKeyId: string }) => b.apiKeyId)).toEqual([id])
    const legacy = await api("/api/usage/budget", { keyId: id, limit: 5, period: "monthly" })
    expect(legacy.status).toBe(400)
    expect(legacy.body.message).toContain("the legacy budget shape (keyId, limit, period) is not accepted")
    const tl = await api("/api/usage/token-limits", { apiKeyId: id, scope: "model", model: "oai/gpt-4o", maxTokens: 1000 })
    expect(tl.status).toBe(201)
    cleanup.push(() => api("/api/usage/token-limits", { id: tl.body.id }, "DELETE"))
    expect(Object.keys(tl.body).sort()).toEqual(
      ["apiKeyId", "createdAt", "id", "maxTokens", "model", "provider", "resetsAt", "scope", "usedTokens", "window", "windowStart"].sort()
    )
    expect((await api(`/api/usage/token-limits?apiKeyId=${id}`)).body.limits).toHaveLength(1)
    expect((await api(`/api/usage/budget/${id}`, undefined, "DELETE")).status).toBe(200)
  })
})

describe("MCP access per level", () => {
  it("each level above the key must allow a tool; the refusal names the level, and a server none reaches is hidden", () => {
    const access: McpAccess = {
      keyId: "key_1",
      keyName: "dev",
      ceiling: null,
      narrowing: undefined,
      levels: [{ label: "team 'research' (team_ab12)", allow: ["fs__read*"] }]
    }
    expect(refusal(access, "fs", "read_file", ["*"])).toBeUndefined()
    expect(refusal(access, "fs", "write_file", ["*"])).toBe(
      `team 'research' (team_ab12) may not use fs__write_file (its MCP allow is ["fs__read*"])`
    )
    expect(levelsReachServer(access, "fs")).toBe(true)
    expect(levelsReachServer(access, "gh")).toBe(false)
  })

  it("a key's MCP access set through the levels' route stays within its team's, and is the key's own mcp.allow", async () => {
    expect((await levelLimits({ teamId: "research", mcp: { allow: ["fs"] } })).status).toBe(200)
    const outside = await api("/api/usage/limits", { apiKeyId: keys["ana-ci"]!.id, mcp: { allow: ["gh"] } })
    expect(outside.status).toBe(400)
    expect(outside.body.message).toContain(`not within team 'research' (${research.id})'s mcp (fs)`)
    const within = await levelLimits({ apiKeyId: keys["ana-ci"]!.id, mcp: { allow: ["fs__read_file"] } })
    expect(within.status).toBe(200)
    expect(within.body).toMatchObject({ level: "key", name: "ana-ci", mcp: { allow: ["fs__read_file"] } })
    expect(within.body.above.map((a: { subjectId: string }) => a.subjectId)).toEqual([ana.id, research.id, "org"])
    const key = (await api("/api/keys")).body.keys.find((k: { id: string }) => k.id === keys["ana-ci"]!.id)
    expect(key.mcp).toEqual({ allow: ["fs__read_file"] })
  })
})
