import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/** GET /api/sessions and DELETE /api/sessions/{id}: the router's sticky sessions, seen from outside. */
const ADMIN = "gwk_sessions_admin_key_0123456789abcdef"
const INFER = "gwk_sessions_inference_key_0123456789ab"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
let inferenceKeyId: string

const chat = (session: string | undefined, key = INFER) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model: "pair", messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${key}`, ...(session ? { "x-session-id": session } : {}) }
  })

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "hello" })
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const created = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: INFER })))
  inferenceKeyId = created.id
  for (const name of ["a", "b"]) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", name: `up-${name}`, baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1", models: ["m1"] },
      headers: admin
    })
    expect(res.status).toBe(201)
  }
  const combo = await call(`${gw.url}/api/combos`, {
    body: { name: "pair", strategy: "round-robin", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] },
    headers: admin
  })
  expect(combo.status).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})

describe("GET /api/sessions", () => {
  it("lists a session with its key id, pinned connection and model, last seen and request count", async () => {
    for (let i = 0; i < 3; i++) expect((await chat("sess-one")).status).toBe(200)
    expect((await chat(undefined)).status).toBe(200)
    const res = await call(`${gw.url}/api/sessions`, { headers: admin })
    expect(res.status).toBe(200)
    const s = res.body.sessions.find((x: any) => x.id === "sess-one")
    expect(s).toMatchObject({ scope: "pair", key: inferenceKeyId, requests: 3 })
    expect(["up-a", "up-b"]).toContain(s.connection)
    expect(s.model).toBe("m1")
    expect(s.target).toBe(`${s.connection}/m1`)
    expect(Date.parse(s.lastSeen)).toBeGreaterThanOrEqual(Date.parse(s.firstSeen))
    // A request without X-Session-Id keeps no session.
    expect(res.body.total).toBe(res.body.sessions.length)
    expect(res.body.sessions.every((x: any) => x.id !== undefined && x.id !== "")).toBe(true)
  })

  it("filters by apiKeyId and caps with limit", async () => {
    await chat("sess-two")
    await chat("sess-three")
    const mine = await call(`${gw.url}/api/sessions?apiKeyId=${inferenceKeyId}&limit=1`, { headers: admin })
    expect(mine.status).toBe(200)
    expect(mine.body.sessions).toHaveLength(1)
    expect(mine.body.total).toBeGreaterThanOrEqual(3)
    expect(mine.body.sessions[0].id).toBe("sess-three")
    const other = await call(`${gw.url}/api/sessions?apiKeyId=nobody`, { headers: admin })
    expect(other.body).toEqual({ sessions: [], total: 0 })
  })

  it("answers 400 naming limit when it is out of range, and 401 without management auth", async () => {
    const bad = await call(`${gw.url}/api/sessions?limit=0`, { headers: admin })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain("limit")
    expect((await call(`${gw.url}/api/sessions`)).status).toBe(401)
    expect((await call(`${gw.url}/api/sessions`, { headers: { authorization: `Bearer ${INFER}` } })).status).toBe(401)
  })
})

describe("DELETE /api/sessions/{id}", () => {
  it("unpins the session (it starts counting afresh) and answers 404 for an unknown one", async () => {
    await chat("sess-unpin")
    await chat("sess-unpin")
    const del = await call(`${gw.url}/api/sessions/sess-unpin`, { method: "DELETE", headers: admin })
    expect(del.status).toBe(200)
    expect(del.body).toEqual({ unpinned: "sess-unpin", scopes: 1 })
    const list = await call(`${gw.url}/api/sessions`, { headers: admin })
    expect(list.body.sessions.find((x: any) => x.id === "sess-unpin")).toBeUndefined()
    await chat("sess-unpin")
    const again = await call(`${gw.url}/api/sessions`, { headers: admin })
    expect(again.body.sessions.find((x: any) => x.id === "sess-unpin").requests).toBe(1)
    const missing = await call(`${gw.url}/api/sessions/no-such-session`, { method: "DELETE", headers: admin })
    expect(missing.status).toBe(404)
  })
})
