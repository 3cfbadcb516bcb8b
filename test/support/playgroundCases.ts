import * as Effect from "effect/Effect"
import { describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./gateway.js"

/**
 * The playground backend's cases (docs/playground.md), run by test/playground.test.ts on SQLite
 * and by test/scale/playground.pg.test.ts on PostgreSQL: `env` chooses the store.
 */
export const playgroundCases = (env: () => Promise<Record<string, string>>) => {
  const ADMIN = "gwk_playground_admin_0123456789abcdef"
  const USER = "gwk_playground_user_0123456789abcdef"
  let gw: TestGateway
  let up: FakeUpstream
  let gatewayEnv: Record<string, string>
  const as =
    (key: string | undefined) =>
    (p: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
      call(`${gw.url}${p}`, { ...init, headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...init.headers } })
  const admin = as(ADMIN)

  const setup = async () => {
    up = await FakeUpstream.start()
    gatewayEnv = await env()
    gw = await startGateway({ env: gatewayEnv })
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))
    expect(
      (
        await admin("/api/providers", {
          body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }
        })
      ).status
    ).toBe(201)
  }
  const teardown = async () => {
    await gw?.close()
    await up?.close()
  }

  describe("presets", () => {
    it("create, list, get, partial update, delete (204), then 404; kept across a restart", async () => {
      await setup()
      try {
        const made = await admin("/api/playground/presets", {
          body: {
            name: " Careful coder ",
            endpoint: "chat-completions",
            model: "up/m1",
            system: "You review code.",
            params_json: '{"temperature":0.2,"max_tokens":512,"stop":["END"]}'
          }
        })
        expect(made.status).toBe(201)
        expect(made.body).toMatchObject({
          name: "Careful coder",
          endpoint: "chat-completions",
          model: "up/m1",
          system: "You review code.",
          params_json: '{"temperature":0.2,"max_tokens":512,"stop":["END"]}'
        })
        expect(made.body.id).toMatch(/^pre_[0-9a-f]{16}$/)
        expect(new Date(made.body.created_at).toISOString()).toBe(made.body.created_at)
        const second = await admin("/api/playground/presets", { body: { name: "vectors", endpoint: "embeddings" } })
        expect(second.body).toMatchObject({ model: "", system: "", params_json: "{}" })
        expect((await admin("/api/playground/presets")).body.presets.map((p: any) => p.name)).toEqual(["Careful coder", "vectors"])
        expect((await admin(`/api/playground/presets/${made.body.id}`)).body).toEqual(made.body)
        const updated = await admin(`/api/playground/presets/${made.body.id}`, {
          method: "PUT",
          body: { model: "up/m2", params_json: '{"top_p":0.9}' }
        })
        expect(updated.status).toBe(200)
        expect(updated.body).toEqual({ ...made.body, model: "up/m2", params_json: '{"top_p":0.9}' })
        const removed = await admin(`/api/playground/presets/${second.body.id}`, { method: "DELETE" })
        expect(removed.status).toBe(204)
        expect(removed.text).toBe("")
        expect((await admin(`/api/playground/presets/${second.body.id}`)).status).toBe(404)
        expect((await admin(`/api/playground/presets/${second.body.id}`, { method: "DELETE" })).status).toBe(404)
        const missing = await admin("/api/playground/presets/pre_nope", { method: "PUT", body: { name: "x" } })
        expect(missing.status).toBe(404)
        expect(missing.body.message).toMatch(/no playground preset "pre_nope"/)

        // The store keeps them: a new gateway on the same data (and database) lists the same.
        const dataDir = gw.dataDir
        await gw.close()
        gw = await startGateway({ env: gatewayEnv, dataDir })
        await gw.run(Effect.flatMap(ApiKeys, (k) => k.verify(ADMIN))) // the key is in the store already
        expect((await admin("/api/playground/presets")).body.presets).toEqual([updated.body])
      } finally {
        await teardown()
      }
    })

    it("refuses bad input with 400 naming the problem, changing nothing", async () => {
      await setup()
      try {
        const bad = async (body: unknown, pattern: RegExp) => {
          const r = await admin("/api/playground/presets", { body })
          expect(r.status, JSON.stringify(body)).toBe(400)
          expect(r.body.message, JSON.stringify(body)).toMatch(pattern)
        }
        await bad({ name: "x", endpoint: "video" }, /endpoint: expected "chat-completions" \| "completions" \| "embeddings"/)
        await bad({ name: "  ", endpoint: "search" }, /name must not be empty/)
        await bad({ endpoint: "search" }, /name/)
        await bad({ name: "x", endpoint: "search", params_json: "{temperature: 1}" }, /params_json is not JSON/)
        await bad({ name: "x", endpoint: "search", params_json: "[1]" }, /params_json must hold a JSON object/)
        await bad({ name: "x", endpoint: "search", params_json: '{"temperature":3}' }, /temperature must be a number from 0 to 2/)
        await bad({ name: "x", endpoint: "search", params_json: '{"max_tokens":0.5}' }, /max_tokens must be a whole number/)
        await bad({ name: "x", endpoint: "search", params_json: '{"top_k":5}' }, /params_json/)
        await bad({ name: "x", endpoint: "search", params_json: '{"stop":["a","b","c","d","e"]}' }, /stop takes at most 4/)
        await bad({ name: "x", endpoint: "search", colour: "red" }, /colour/)
        expect((await admin("/api/playground/presets")).body.presets).toEqual([])
      } finally {
        await teardown()
      }
    })
  })

  describe("improve-prompt", () => {
    it("asks the model through the router with a meta prompt and answers the improved texts and tokens; 502 for a model that does not resolve or answers nothing", async () => {
      await setup()
      try {
        up.next({
          content: JSON.stringify({
            improvedSystem: "You are a meticulous code reviewer.",
            improvedPrompt: "Review this diff for bugs; list each with a line number."
          })
        })
        const r = await as(USER)("/api/playground/improve-prompt", {
          body: { system: "review code", prompt: "check my diff", model: "up/m1", tone: "precise" }
        })
        expect(r.status).toBe(200)
        expect(r.body).toMatchObject({
          improvedSystem: "You are a meticulous code reviewer.",
          improvedPrompt: "Review this diff for bugs; list each with a line number."
        })
        expect(r.body.tokensIn).toBeGreaterThan(0)
        expect(r.body.tokensOut).toBeGreaterThan(0)
        const sent = up.requests.at(-1)!.body
        expect(sent.model).toBe("m1")
        expect(JSON.stringify(sent.messages)).toContain("check my diff")
        expect(sent.messages[0].content).toMatch(/unambiguous/)
        // The call is the user's: it wrote a usage row under their key.
        await gw.usageWritten()
        const logs = (await admin("/api/usage/logs?limit=5")).body
        expect(JSON.stringify(logs)).toContain("chat.completions")

        const unknown = await as(USER)("/api/playground/improve-prompt", { body: { prompt: "x", model: "nowhere/nothing" } })
        expect(unknown.status).toBe(502)
        expect(unknown.body.message).toMatch(/model "nowhere\/nothing" did not answer/)
        up.next({ content: "" })
        const empty = await as(USER)("/api/playground/improve-prompt", { body: { prompt: "x", model: "up/m1" } })
        expect(empty.status).toBe(502)
        expect(empty.body.message).toMatch(/answered nothing usable/)
        const noPrompt = await as(USER)("/api/playground/improve-prompt", { body: { model: "up/m1" } })
        expect(noPrompt.status).toBe(400)
        expect(noPrompt.body.message).toMatch(/prompt/)
        const badTone = await as(USER)("/api/playground/improve-prompt", { body: { prompt: "x", model: "up/m1", tone: "angry" } })
        expect(badTone.status).toBe(400)
        expect(badTone.body.message).toMatch(/tone: expected "neutral" \| "concise"/)
      } finally {
        await teardown()
      }
    })
  })
}
