/**
 * People, teams, limits by level and single sign-on on PostgreSQL. These suites are written once
 * (test/teams.*.test.ts, test/sso.test.ts) and run on SQLite in the main suite; imported here,
 * they run unchanged on the scale suite's PostgreSQL: with GATEWAY_TEST_STORE=postgres each
 * gateway they start gets a fresh database on GATEWAY_TEST_DATABASE_URL (test/support/pgStore.ts),
 * so the migrations, the directory's queries and the sign-ins kept in the database are checked
 * in both dialects on every CI run. The variable is read when a test starts its gateway, after
 * these imports have registered the tests, and this file runs in its own process.
 */
process.env.GATEWAY_TEST_STORE = "postgres"

import "../teams.directory.test.js"
import "../teams.limits.test.js"
import "../teams.usage.test.js"
import "../sso.test.js"
import "../sso.issue-paths.test.js"

import { describe, expect, it } from "vitest"
import { startGateway } from "../support/gateway.js"
import { databaseOf, withClient } from "../support/pgStore.js"

describe("these suites' gateways", () => {
  it("are on PostgreSQL, its database holding the people and single sign-on tables", async () => {
    const gw = await startGateway()
    try {
      const url = databaseOf(gw.dataDir)
      expect(url).toMatch(/^postgres:/)
      const tables = await withClient(url!, async (c) =>
        (await c.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")).rows.map((r) => r.table_name)
      )
      expect(tables).toEqual(expect.arrayContaining(["users", "teams", "team_members", "level_limits", "oidc_providers"]))
    } finally {
      await gw.close()
    }
  })
})
