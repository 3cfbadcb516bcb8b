import * as CliConfig from "@effect/cli/CliConfig"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { cli } from "../src/cli/app.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { databaseOf } from "./support/pgStore.js"

const ADMIN = "gwk_teams_cli_admin_key_0123456789ab"

let gw: TestGateway

/** `gateway <args>` run in this process (the command tree of bin/gateway), its output captured. */
const gateway = async (args: ReadonlyArray<string>) => {
  const out: Array<string> = []
  const err: Array<string> = []
  const log = console.log
  const error = console.error
  console.log = (...a: Array<unknown>) => void out.push(a.map(String).join(" "))
  console.error = (...a: Array<unknown>) => void err.push(a.map(String).join(" "))
  // The local commands open the gateway's own database (its PostgreSQL one under GATEWAY_TEST_STORE=postgres).
  const url = databaseOf(gw.dataDir)
  const before = process.env.DATABASE_URL
  if (url !== undefined) process.env.DATABASE_URL = url
  try {
    await Effect.runPromise(
      cli(["node", "gateway", ...args]).pipe(Effect.provide(CliConfig.layer({ showBuiltIns: false })), Effect.provide(NodeContext.layer))
    )
  } finally {
    console.log = log
    console.error = error
    if (before === undefined) delete process.env.DATABASE_URL
    else process.env.DATABASE_URL = before
  }
  const code = process.exitCode ?? 0
  process.exitCode = undefined
  return { code, stdout: out.join("\n"), stderr: err.join("\n") }
}
const local = (args: ReadonlyArray<string>) => gateway(["--data-dir", gw.dataDir, ...args])
const remote = (args: ReadonlyArray<string>) => gateway([...args, "--url", gw.url, "--api-key", ADMIN])
const json = (r: { stdout: string }) => JSON.parse(r.stdout)

beforeAll(async () => {
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})

afterAll(async () => {
  await gw?.close()
})

describe("gateway users and teams, on the local database", () => {
  it("adds, lists, updates and removes users and teams with their members", async () => {
    const team = await local(["teams", "add", "Platform", "--json"])
    expect(team.code, team.stderr).toBe(0)
    expect(json(team)).toMatchObject({ name: "Platform", memberCount: 0 })

    const alice = await local([
      "users",
      "add",
      "--email",
      "Alice@Example.com",
      "--name",
      "Alice",
      "--role",
      "team-admin",
      "--team",
      "Platform",
      "--json"
    ])
    expect(alice.code, alice.stderr).toBe(0)
    const user = json(alice)
    expect(user).toMatchObject({ email: "alice@example.com", role: "team-admin", teams: [{ teamId: json(team).id, role: "member" }] })

    const listed = await local(["users", "list"])
    expect(listed.stdout).toContain("alice@example.com")
    expect(listed.stdout).toContain("usr_admin")

    const promoted = await local(["teams", "add-member", "Platform", "alice@example.com", "--role", "team-admin", "--json"])
    expect(json(promoted)).toMatchObject({ userId: user.id, role: "team-admin" })
    const members = await local(["teams", "members", "Platform", "--json"])
    expect(json(members).members).toEqual([expect.objectContaining({ userId: user.id, email: "alice@example.com", role: "team-admin" })])

    const updated = await local(["users", "update", user.id, "--name", "Alice B", "--disable", "--json"])
    expect(json(updated)).toMatchObject({ name: "Alice B", disabled: true })

    // The running gateway sees what the CLI wrote to its database within a second or so (its change counter).
    await vi.waitFor(
      async () => {
        const seen = await call(`${gw.url}/api/users/${user.id}`, { headers: { authorization: `Bearer ${ADMIN}` } })
        expect(seen.body).toMatchObject({ name: "Alice B", disabled: true })
      },
      { timeout: 5_000, interval: 200 }
    )

    const left = await local(["teams", "remove-member", "Platform", user.id])
    expect(left.code, left.stderr).toBe(0)
    expect(json(await local(["teams", "members", "Platform", "--json"])).members).toEqual([])

    const teams = await local(["teams", "list"])
    expect(teams.stdout).toContain("Platform")

    expect((await local(["users", "remove", "alice@example.com"])).code).toBe(0)
    expect((await local(["teams", "remove", "Platform"])).code).toBe(0)
    expect(json(await local(["users", "list", "--json"])).users.map((u: { id: string }) => u.id)).not.toContain(user.id)
  })

  it("refuses bad input before doing anything, and says what the directory refused", async () => {
    const badEmail = await local(["users", "add", "--email", "nope"])
    expect(badEmail.code).not.toBe(0)
    expect(badEmail.stderr + badEmail.stdout).toContain("--email")
    const badRole = await local(["users", "add", "--email", "x@example.com", "--role", "boss"])
    expect(badRole.code).not.toBe(0)
    expect(badRole.stderr + badRole.stdout).toContain("role must be one of")

    await local(["users", "add", "--email", "dup@example.com"])
    const dup = await local(["users", "add", "--email", "DUP@example.com"])
    expect(dup.code).not.toBe(0)
    expect(dup.stderr + dup.stdout).toContain("dup@example.com")

    const lastAdmin = await local(["users", "remove", "usr_admin"])
    expect(lastAdmin.code).not.toBe(0)
    expect(lastAdmin.stderr + lastAdmin.stdout).toContain("last enabled admin")
  })

  it("gives keys an owner with keys add --user and --team, and removing the owner needs --force", async () => {
    await local(["users", "add", "--email", "owner@example.com"])
    await local(["teams", "add", "Owners"])
    const mine = await local(["keys", "add", "--name", "owned", "--user", "owner@example.com", "--json"])
    expect(mine.code, mine.stderr).toBe(0)
    const key = json(mine)
    expect(key.userId).toMatch(/^usr_/)
    expect(key.teamId).toBeNull()
    const teamKey = json(await local(["keys", "add", "--name", "team-owned", "--team", "Owners", "--json"]))
    expect(teamKey.teamId).toMatch(/^team_/)
    const plain = json(await local(["keys", "add", "--name", "plain", "--json"]))
    expect(plain.userId).toBe("usr_admin")

    const unknown = await local(["keys", "add", "--user", "ghost@example.com"])
    expect(unknown.code).not.toBe(0)
    expect(unknown.stderr + unknown.stdout).toContain("userId")

    const refused = await local(["users", "remove", "owner@example.com"])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr + refused.stdout).toContain(key.id)
    const forced = await local(["users", "remove", "owner@example.com", "--force"])
    expect(forced.code, forced.stderr).toBe(0)
    expect(forced.stdout).toContain(key.id)
    const listed = json(await local(["keys", "list", "--json"])).keys.find((k: { id: string }) => k.id === key.id)
    expect(listed).toMatchObject({ enabled: false, userId: null })
  })
})

describe("gateway users and teams, against a running gateway (--url)", () => {
  it("runs the same commands through the API", async () => {
    const team = await remote(["teams", "add", "Remote Team", "--json"])
    expect(team.code, team.stderr).toBe(0)
    const bob = await remote(["users", "add", "--email", "bob@example.com", "--role", "viewer", "--json"])
    expect(bob.code, bob.stderr).toBe(0)
    expect(json(bob)).toMatchObject({ email: "bob@example.com", role: "viewer" })

    const added = await remote(["teams", "add-member", "Remote Team", "bob@example.com", "--json"])
    expect(json(added)).toMatchObject({ email: "bob@example.com", role: "member" })
    expect(json(await remote(["teams", "members", "Remote Team", "--json"])).members).toHaveLength(1)
    expect(json(await remote(["teams", "list", "--json"])).teams.map((t: { name: string }) => t.name)).toContain("Remote Team")

    const changed = await remote(["users", "update", "bob@example.com", "--role", "member", "--json"])
    expect(json(changed).role).toBe("member")
    expect(json(await remote(["users", "list", "--json"])).users.map((u: { email: string }) => u.email)).toContain("bob@example.com")

    const dup = await remote(["users", "add", "--email", "bob@example.com"])
    expect(dup.code).not.toBe(0)
    expect(dup.stderr + dup.stdout).toContain("bob@example.com")

    expect((await remote(["teams", "remove-member", "Remote Team", "bob@example.com"])).code).toBe(0)
    expect((await remote(["users", "remove", "bob@example.com"])).code).toBe(0)
    expect((await remote(["teams", "remove", "Remote Team"])).code).toBe(0)
    expect(json(await remote(["teams", "list", "--json"])).teams.map((t: { name: string }) => t.name)).not.toContain("Remote Team")
  })
})
