import * as Effect from "effect/Effect"
import { afterAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * GATEWAY_DISABLE_BACKGROUND_SERVICES (docs/feature-flags.md): two gateways with backups every
 * ~0.7 s; the one with the flag on makes none by the time the other has made its first, and
 * says at start which jobs it did not start.
 */
const ADMIN = "gwk_background_admin_key_0123456789abcd"
const admin = { authorization: `Bearer ${ADMIN}` }
const started: Array<TestGateway> = []

const start = async (env: Record<string, string>) => {
  const gw = await startGateway({ env: { GATEWAY_BACKUP_INTERVAL_HOURS: "0.0002", GATEWAY_OAUTH_REFRESH_CHECK_SECONDS: "1", ...env } })
  started.push(gw)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  return gw
}
const scheduled = async (gw: TestGateway) =>
  ((await call(`${gw.url}/api/db-backups`, { headers: admin })).body.backups as Array<{ kind: string }>).filter(
    (b) => b.kind === "scheduled"
  ).length

afterAll(async () => {
  for (const gw of started) await gw.close()
})

describe("GATEWAY_DISABLE_BACKGROUND_SERVICES", () => {
  it("stops scheduled backups, the OAuth refresh schedule and usage retention; off, they run", async () => {
    const off = await start({ GATEWAY_DISABLE_BACKGROUND_SERVICES: "true" })
    const on = await start({})
    const end = Date.now() + 15_000
    while ((await scheduled(on)) === 0) {
      if (Date.now() > end) throw new Error("the control gateway made no scheduled backup")
      await new Promise((r) => setImmediate(r))
    }
    expect(await scheduled(off)).toBe(0)
    const said = off.logs.map((l) => l.message)
    for (const job of ["scheduled backups", "oauth refresh schedule", "usage retention"]) {
      expect(said).toContain(`${job} off: GATEWAY_DISABLE_BACKGROUND_SERVICES is on`)
      expect(on.logs.map((l) => l.message)).not.toContain(`${job} off: GATEWAY_DISABLE_BACKGROUND_SERVICES is on`)
    }
  })
})
