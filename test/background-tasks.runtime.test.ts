import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeQuota } from "./support/fakeQuota.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS (docs/operations.md, "Background tasks"): the periodic
 * quota refresh and the scheduled cloud sync, on and off, on real gateways with 1 s and 0.3 s rounds.
 */
const ADMIN = "gwk_runtime_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const CONN_KEY = "sk-quota-conn-key-7d1e9a3b5c"
const PASSPHRASE = "runtime tasks passphrase"
// Quota rounds of 1 s: a view is kept two rounds, and a loaded machine ran 0.3 s rounds late enough
// that the check found none fresh and asked the upstream itself.
const QUOTA_ROUND_MS = 1000
const FAST = { GATEWAY_QUOTA_REFRESH_INTERVAL_SECONDS: String(QUOTA_ROUND_MS / 1000), GATEWAY_CLOUD_SYNC_INTERVAL_SECONDS: "0.3" }
const gateways: Array<TestGateway> = []
let fakeOn: FakeQuota
let fakeOff: FakeQuota
let up: FakeUpstream
let on: TestGateway
let off: TestGateway

const start = async (env: Record<string, string> = {}) => {
  const gw = await startGateway({ env: { ...FAST, ...env } })
  gateways.push(gw)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  return gw
}
const api = (gw: TestGateway, p: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${gw.url}${p}`, { ...init, headers: admin })
const modelLists = (fake: FakeQuota) => fake.received.filter((r) => r.path === "/compat/v1/models").length

beforeAll(async () => {
  fakeOn = await FakeQuota.start(CONN_KEY, "unused-tracker-token-000000000000")
  fakeOff = await FakeQuota.start(CONN_KEY, "unused-tracker-token-000000000000")
  up = await FakeUpstream.start()
  on = await start({ GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS: "true" })
  off = await start()
  for (const [gw, fake] of [
    [on, fakeOn],
    [off, fakeOff]
  ] as const) {
    const res = await api(gw, "/api/providers", {
      body: {
        provider: "openai-compatible",
        name: "compat",
        apiKey: CONN_KEY,
        baseUrl: `${fake.origin}/compat/v1`,
        models: ["gpt-4o-mini"]
      }
    })
    expect(res.status).toBe(201)
  }
})
afterAll(async () => {
  for (const gw of gateways) await gw.close()
  await fakeOn?.close()
  await fakeOff?.close()
  await up?.close()
})

describe("GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS: quota refresh", () => {
  it("on: every connection's quota is asked on a schedule and GET /v1/quotas/check answers from it without calling the upstream", async () => {
    fakeOn.compatRemainingRequests = 41
    await until("two scheduled quota reads", () => modelLists(fakeOn) >= 2)
    const asked = modelLists(fakeOn)
    const checkedFrom = Date.now()
    const res = await call(`${on.url}/v1/quotas/check?connection=compat`, { headers: admin })
    // The rounds that may have run while the check was answered (a loaded machine answers slowly).
    const roundsMeanwhile = 1 + Math.floor((Date.now() - checkedFrom) / QUOTA_ROUND_MS)
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ ok: true, remaining: 41, source: "ratelimit-headers" })
    expect(typeof res.body.details.upstream.refreshedAt).toBe("string")
    // Answered from the refresh (a round may have run meanwhile, but the check itself asked nothing).
    expect(modelLists(fakeOn)).toBeLessThanOrEqual(asked + roundsMeanwhile)
    // The next rounds pick up a change upstream.
    fakeOn.compatRemainingRequests = 7
    await until(
      "the refreshed figure",
      async () => (await call(`${on.url}/v1/quotas/check?connection=compat`, { headers: admin })).body.remaining === 7 || undefined
    )
  })

  it("off (the default): nothing is asked until a client checks, and the check asks the upstream itself", async () => {
    await until("three more rounds on the other gateway", () => modelLists(fakeOn) >= 6)
    expect(modelLists(fakeOff)).toBe(0)
    const res = await call(`${off.url}/v1/quotas/check?connection=compat`, { headers: admin })
    expect(res.status).toBe(200)
    expect(res.body.details.upstream.refreshedAt).toBeUndefined()
    expect(modelLists(fakeOff)).toBe(1)
  })
})

describe("GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS: scheduled cloud sync", () => {
  it("off: nothing is synced; turned on, a conflict is reported in lastConflict and never forced; then a change on the server is pulled by itself", async () => {
    const S = await start()
    const A = await start()
    const B = await start()
    const init = (gw: TestGateway) =>
      api(gw, "/api/sync/initialize", { body: { serverUrl: S.url, apiKey: ADMIN, space: "team", passphrase: PASSPHRASE } })
    const action = (gw: TestGateway, body: Record<string, unknown>) => api(gw, "/api/sync/cloud", { body })
    const status = async (gw: TestGateway) => (await api(gw, "/api/sync/cloud")).body
    const serverVersion = async () => (await api(S, "/api/cloud/bundles/team/versions")).body.current as number
    const combos = async (gw: TestGateway) => ((await api(gw, "/api/combos")).body.combos as Array<{ name: string }>).map((c) => c.name)

    expect(
      (
        await api(B, "/api/providers", {
          body: { provider: "openai-compatible", name: "shared", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }
        })
      ).status
    ).toBe(201)
    expect((await init(B)).status).toBe(200)
    expect((await action(B, { action: "push" })).body).toMatchObject({ result: "pushed", version: 1 })
    expect((await init(A)).status).toBe(200)
    expect((await action(A, { action: "pull" })).body).toMatchObject({ result: "pulled", version: 1 })

    // Both sides change: A locally, B on the server.
    expect(
      (await api(A, "/api/combos", { body: { name: "only-on-a", strategy: "priority", targets: [{ model: "shared/m1" }] } })).status
    ).toBe(201)
    expect(
      (await api(B, "/api/combos", { body: { name: "from-b", strategy: "priority", targets: [{ model: "shared/m1" }] } })).status
    ).toBe(201)
    expect((await action(B, { action: "sync" })).body).toMatchObject({ result: "pushed", version: 2 })

    // Off: several rounds' worth of time later (the quota gateway's clock), A has done nothing.
    const seen = modelLists(fakeOn)
    await until("three rounds elsewhere", () => modelLists(fakeOn) >= seen + 3)
    expect(await status(A)).toMatchObject({ lastPush: null, lastConflict: null, localVersion: 1, localChanged: true })

    // On (a database override, no restart): the scheduled sync finds both sides changed.
    expect(
      (
        await api(A, "/api/settings/feature-flags", {
          method: "PUT",
          body: { key: "GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS", value: "true" }
        })
      ).status
    ).toBe(200)
    const conflicted = await until("a reported conflict", async () => {
      const s = await status(A)
      return s.lastConflict ? s : undefined
    })
    expect(conflicted.lastConflict).toMatchObject({
      action: "sync",
      baseVersion: 1,
      remoteVersion: 2,
      localChanged: true,
      remoteChanged: true
    })
    expect(conflicted.lastConflict.sections.map((d: any) => d.section)).toContain("combos")
    // Never forced: the server keeps B's version, A keeps its own change and has not taken B's.
    expect(await serverVersion()).toBe(2)
    expect(await combos(A)).toContain("only-on-a")
    expect(await combos(A)).not.toContain("from-b")
    expect(A.logs.some((l) => l.message.includes("conflict left for an operator"))).toBe(true)

    // The operator takes the server's side; from then on a change on B reaches A by itself.
    expect((await action(A, { action: "pull", force: true })).body).toMatchObject({ result: "pulled", version: 2 })
    // The forced pull replaced A's flags with the server's: switch the tasks on again.
    expect(
      (
        await api(A, "/api/settings/feature-flags", {
          method: "PUT",
          body: { key: "GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS", value: "true" }
        })
      ).status
    ).toBe(200)
    await until("A pushes its flag change", async () => (await serverVersion()) === 3 || undefined)
    expect((await action(B, { action: "pull" })).body).toMatchObject({ result: "pulled", version: 3 })
    expect(
      (await api(B, "/api/combos", { body: { name: "later-from-b", strategy: "priority", targets: [{ model: "shared/m1" }] } })).status
    ).toBe(201)
    // B took A's flags with v3, so B's own scheduled sync may push the combo before this call
    // does: either way the server holds it as version 4.
    const pushed = (await action(B, { action: "push" })).body
    expect(pushed.version).toBe(4)
    expect(["pushed", "up-to-date"]).toContain(pushed.result)
    expect(await serverVersion()).toBe(4)
    await until("A pulls B's change", async () => (await combos(A)).includes("later-from-b") || undefined)
  })
})
