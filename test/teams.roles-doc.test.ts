import * as fs from "node:fs"
import { describe, expect, it } from "vitest"
import { rolesTable, withRolesTable, writeRolesDoc } from "../src/cli/skills/rolesDoc.js"
import { routeAccessTable } from "../src/management/api/routeAccess.js"

const PAGE = "docs/teams.md"

describe("docs/teams.md, Roles and access", () => {
  it("lists every route with the roles the gateway enforces (regenerate: npm run skills:generate, or GATEWAY_WRITE_ROLES_DOC=1 on this test)", () => {
    if (process.env.GATEWAY_WRITE_ROLES_DOC === "1") writeRolesDoc(PAGE, false)
    const text = fs.readFileSync(PAGE, "utf8")
    expect(withRolesTable(text), "docs/teams.md has the generated block's markers").toBeDefined()
    expect(
      text,
      "docs/teams.md's roles table is stale: run npm run skills:generate (or GATEWAY_WRITE_ROLES_DOC=1 npx vitest run test/teams.roles-doc.test.ts)"
    ).toBe(withRolesTable(text))
  })

  it("has one row per authenticated route, under the section's heading", () => {
    const text = fs.readFileSync(PAGE, "utf8")
    const section = text.slice(text.indexOf("## Roles and access"))
    const authenticated = routeAccessTable().filter((r) => r.auth !== "public")
    for (const r of authenticated) expect(section).toContain(`| \`${r.id}\` | \`${r.method} ${r.path}\``)
    expect(
      rolesTable()
        .split("\n")
        .filter((l) => l.startsWith("| `")).length
    ).toBe(authenticated.length)
  })
})
