import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ConfigBundle } from "../src/management/sync/ConfigBundle.js"
import { BatchWriter } from "../src/platform/store/BatchWriter.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Directory } from "../src/services/teams/Directory.js"
import { call, localCore, startGateway, type TestGateway, tempDir } from "./support/gateway.js"

const ADMIN = "gwk_teams_admin_key_0123456789abcdef"
const PASSWORD = "correct horse battery"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
const api = (path: string, init: { method?: string; body?: unknown } = {}) => call(`${gw.url}${path}`, { ...init, headers: admin })

beforeAll(async () => {
  gw = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})

afterAll(async () => {
  await gw?.close()
})

describe("people", () => {
  it("starts with the first admin, the owner of the keys made without one", async () => {
    const list = await api("/api/users")
    expect(list.status).toBe(200)
    const first = list.body.users.find((u: { id: string }) => u.id === "usr_admin")
    expect(first).toMatchObject({ email: "admin@localhost", name: "admin", role: "admin", disabled: false, teams: [] })
    const keys = await api("/api/keys")
    expect(keys.body.keys.find((k: { name: string }) => k.name === "admin")).toMatchObject({ userId: "usr_admin", teamId: null })
  })

  it("creates, reads, changes and removes a user; the email is lower-cased and unique", async () => {
    const made = await api("/api/users", { body: { email: "Alice@Example.COM", name: "Alice", role: "member" } })
    expect(made.status).toBe(201)
    expect(made.body).toMatchObject({ email: "alice@example.com", name: "Alice", role: "member", teams: [], lastLoginAt: null })
    expect(made.body.id).toMatch(/^usr_[0-9a-f]{16}$/)

    const twice = await api("/api/users", { body: { email: "ALICE@example.com" } })
    expect(twice.status).toBe(409)
    expect(twice.body.message).toContain("email")

    expect((await api(`/api/users/${made.body.id}`)).body.email).toBe("alice@example.com")
    expect((await api("/api/users/alice@example.com")).body.id).toBe(made.body.id)

    const changed = await api(`/api/users/${made.body.id}`, { method: "PATCH", body: { name: "Alice B", role: "viewer" } })
    expect(changed.status).toBe(200)
    expect(changed.body).toMatchObject({ name: "Alice B", role: "viewer", email: "alice@example.com" })

    const clash = await api(`/api/users/${made.body.id}`, { method: "PATCH", body: { email: "admin@localhost" } })
    expect(clash.status).toBe(409)
    expect(clash.body.message).toContain("admin@localhost")

    const removed = await api(`/api/users/${made.body.id}`, { method: "DELETE" })
    expect(removed.status).toBe(200)
    expect(removed.body.removed.id).toBe(made.body.id)
    expect((await api(`/api/users/${made.body.id}`)).status).toBe(404)
  })

  it("answers 400 naming the field for bad input", async () => {
    const cases: Array<[unknown, string]> = [
      [{ email: "not-an-email" }, "email"],
      [{ email: "b@example.com", role: "owner" }, "role must be one of"],
      [{ email: "b@example.com", name: "" }, "name"],
      [{ email: "b@example.com", colour: "blue" }, "colour"],
      [{ name: "no email" }, "email"],
      [{ email: "b@example.com", teamIds: ["no-such-team"] }, "teamIds"]
    ]
    for (const [body, field] of cases) {
      const res = await api("/api/users", { body })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.message, JSON.stringify(body)).toContain(field)
    }
    const badPatch = await api("/api/users/usr_admin", { method: "PATCH", body: { disabled: "yes" } })
    expect(badPatch.status).toBe(400)
    expect(badPatch.body.message).toContain("disabled")
    expect((await api("/api/users/usr_nobody", { method: "PATCH", body: { name: "x" } })).status).toBe(404)
  })

  it("keeps one enabled admin: the last cannot be removed, disabled or demoted", async () => {
    for (const [method, body] of [
      ["DELETE", undefined],
      ["PATCH", { role: "member" }],
      ["PATCH", { disabled: true }]
    ] as const) {
      const res = await api("/api/users/usr_admin", { method, body })
      expect(res.status, `${method} ${JSON.stringify(body)}`).toBe(409)
      expect(res.body.message).toContain("last enabled admin")
    }
  })

  it("changes the first admin's email and name with PATCH, and the admin password still logs in", async () => {
    const res = await api("/api/users/usr_admin", { method: "PATCH", body: { email: "Root@Example.org", name: "Root" } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: "usr_admin", email: "root@example.org", name: "Root", role: "admin" })
    const login = await call(`${gw.url}/api/auth/login`, { body: { password: PASSWORD } })
    expect(login.status).toBe(200)
  })
})

describe("teams and members", () => {
  it("creates teams, adds, lists and removes members, and a user's teams follow", async () => {
    const team = await api("/api/teams", { body: { name: "Platform" } })
    expect(team.status).toBe(201)
    expect(team.body).toMatchObject({ name: "Platform", memberCount: 0 })
    expect(team.body.id).toMatch(/^team_[0-9a-f]{16}$/)

    const dup = await api("/api/teams", { body: { name: "platform" } })
    expect(dup.status).toBe(409)
    expect(dup.body.message).toContain("Platform")
    expect((await api("/api/teams", { body: { name: "  " } })).status).toBe(400)

    // A user made with teamIds (ids or names) joins them as a member.
    const bob = await api("/api/users", { body: { email: "bob@example.com", teamIds: ["Platform"] } })
    expect(bob.status).toBe(201)
    expect(bob.body.teams).toEqual([{ teamId: team.body.id, role: "member" }])
    expect(bob.body.name).toBe("bob")

    const carol = await api("/api/users", { body: { email: "carol@example.com", name: "Carol" } })
    const added = await api(`/api/teams/${team.body.id}/members`, { body: { userId: "carol@example.com", role: "team-admin" } })
    expect(added.status).toBe(201)
    expect(added.body).toMatchObject({ userId: carol.body.id, email: "carol@example.com", name: "Carol", role: "team-admin" })

    const members = await api(`/api/teams/${team.body.id}/members`)
    expect(members.body.members.map((m: { userId: string; role: string }) => [m.userId, m.role])).toEqual([
      [bob.body.id, "member"],
      [carol.body.id, "team-admin"]
    ])
    expect((await api(`/api/users/${carol.body.id}`)).body.teams).toEqual([{ teamId: team.body.id, role: "team-admin" }])
    expect((await api(`/api/teams/${team.body.id}`)).body.memberCount).toBe(2)

    expect((await api(`/api/teams/${team.body.id}/members`, { body: { userId: "usr_nobody" } })).status).toBe(404)
    const badRole = await api(`/api/teams/${team.body.id}/members`, { body: { userId: bob.body.id, role: "admin" } })
    expect(badRole.status).toBe(400)
    expect(badRole.body.message).toContain("team role")

    const out = await api(`/api/teams/${team.body.id}/members/${bob.body.id}`, { method: "DELETE" })
    expect(out.status).toBe(200)
    expect((await api(`/api/users/${bob.body.id}`)).body.teams).toEqual([])
    expect((await api(`/api/teams/${team.body.id}/members/${bob.body.id}`, { method: "DELETE" })).status).toBe(404)

    const renamed = await api(`/api/teams/${team.body.id}`, { method: "PATCH", body: { name: "Platform Eng" } })
    expect(renamed.status).toBe(200)
    expect(renamed.body.name).toBe("Platform Eng")
    expect((await api("/api/teams/Platform Eng")).body.id).toBe(team.body.id)

    // PATCH teamIds replaces a user's teams; a team kept keeps its role.
    const other = await api("/api/teams", { body: { name: "Research" } })
    const moved = await api(`/api/users/${carol.body.id}`, { method: "PATCH", body: { teamIds: [team.body.id, other.body.id] } })
    expect(moved.body.teams).toEqual([
      { teamId: team.body.id, role: "team-admin" },
      { teamId: other.body.id, role: "member" }
    ])

    const gone = await api(`/api/teams/${other.body.id}`, { method: "DELETE" })
    expect(gone.status).toBe(200)
    expect((await api(`/api/users/${carol.body.id}`)).body.teams).toEqual([{ teamId: team.body.id, role: "team-admin" }])
    expect((await api(`/api/teams/${other.body.id}`)).status).toBe(404)
  })

  it("keeps the organisation's name", async () => {
    expect((await api("/api/organisation")).body).toEqual({ id: "org", name: "default" })
    const changed = await api("/api/organisation", { method: "PATCH", body: { name: "Acme" } })
    expect(changed.body).toEqual({ id: "org", name: "Acme" })
    expect((await api("/api/organisation")).body.name).toBe("Acme")
    const bad = await api("/api/organisation", { method: "PATCH", body: { name: "" } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain("name")
  })

  it("writes an audit row for each change", async () => {
    const made = await api("/api/users", { body: { email: "audited@example.com" } })
    await api(`/api/users/${made.body.id}`, { method: "DELETE" })
    await gw.run(Effect.flatMap(BatchWriter, (w) => w.flush))
    const log = await api(`/api/compliance/audit-log?target=${made.body.id}`)
    expect(log.status).toBe(200)
    const actions = log.body.entries.map((e: { action: string }) => e.action)
    expect(actions).toEqual(expect.arrayContaining(["user.create", "user.remove"]))
  })
})

describe("keys and their owners", () => {
  it("gives a key to a user or a team, defaults it to the first admin, and refuses both or an unknown one", async () => {
    const dana = await api("/api/users", { body: { email: "dana@example.com" } })
    const team = await api("/api/teams", { body: { name: "Keys Team" } })

    const mine = await api("/api/keys", { body: { name: "dana-key", userId: "dana@example.com" } })
    expect(mine.status).toBe(201)
    expect(mine.body).toMatchObject({ userId: dana.body.id, teamId: null })

    const theirs = await api("/api/keys", { body: { name: "team-key", teamId: "Keys Team" } })
    expect(theirs.body).toMatchObject({ userId: null, teamId: team.body.id })

    const plain = await api("/api/keys", { body: { name: "plain-key" } })
    expect(plain.body).toMatchObject({ userId: "usr_admin", teamId: null })

    const both = await api("/api/keys", { body: { name: "both", userId: dana.body.id, teamId: team.body.id } })
    expect(both.status).toBe(400)
    expect(both.body.message).toContain("not both")
    const unknownUser = await api("/api/keys", { body: { name: "x", userId: "usr_ghost" } })
    expect(unknownUser.status).toBe(400)
    expect(unknownUser.body.message).toContain("userId")
    expect(unknownUser.body.message).toContain("usr_ghost")
    const unknownTeam = await api(`/api/keys/${plain.body.id}`, { method: "PATCH", body: { teamId: "team_ghost" } })
    expect(unknownTeam.status).toBe(400)
    expect(unknownTeam.body.message).toContain("teamId")

    const moved = await api(`/api/keys/${plain.body.id}`, { method: "PATCH", body: { teamId: team.body.id } })
    expect(moved.status).toBe(200)
    expect(moved.body).toMatchObject({ userId: null, teamId: team.body.id })
    const listed = (await api("/api/keys")).body.keys.find((k: { id: string }) => k.id === plain.body.id)
    expect(listed).toMatchObject({ userId: null, teamId: team.body.id })
  })

  it("refuses to remove a user or team owning keys (409 naming them) unless forced, which disables the keys and leaves them unowned", async () => {
    const erin = await api("/api/users", { body: { email: "erin@example.com" } })
    const key = await api("/api/keys", { body: { name: "erin-key", userId: erin.body.id } })
    const refused = await api(`/api/users/${erin.body.id}`, { method: "DELETE" })
    expect(refused.status).toBe(409)
    expect(refused.body.message).toContain(key.body.id)
    expect(refused.body.message).toContain("erin-key")

    // With keys required, the key is accepted until its owner goes, and refused at once after.
    const flag = (value: string) => api("/api/settings/feature-flags", { method: "PUT", body: { key: "REQUIRE_API_KEY", value } })
    expect((await flag("true")).status).toBe(200)
    const chat = { model: "nobody/none", messages: [{ role: "user", content: "hi" }] }
    const send = () => call(`${gw.url}/v1/chat/completions`, { body: chat, headers: { authorization: `Bearer ${key.body.secret}` } })
    try {
      expect((await send()).status).not.toBe(401)
      const forced = await api(`/api/users/${erin.body.id}?force=true`, { method: "DELETE" })
      expect(forced.status).toBe(200)
      expect(forced.body.disabledKeys).toEqual([key.body.id])
      const refused = await send()
      expect(refused.status).toBe(401)
      expect(refused.body.error.code).toBe("invalid_api_key")
    } finally {
      await flag("false")
    }
    const after = (await api("/api/keys")).body.keys.find((k: { id: string }) => k.id === key.body.id)
    expect(after).toMatchObject({ enabled: false, userId: null, teamId: null })

    const team = await api("/api/teams", { body: { name: "Doomed" } })
    const teamKey = await api("/api/keys", { body: { name: "doomed-key", teamId: team.body.id } })
    const teamRefused = await api(`/api/teams/${team.body.id}`, { method: "DELETE" })
    expect(teamRefused.status).toBe(409)
    expect(teamRefused.body.message).toContain(teamKey.body.id)
    expect((await api(`/api/teams/${team.body.id}?force=true`, { method: "DELETE" })).body.disabledKeys).toEqual([teamKey.body.id])
  })
})

describe("the directory in memory and single sign-on", () => {
  it("answers user(), team() and firstAdmin() synchronously, and signIn finds, links or makes the user", async () => {
    const result = await gw.run(
      Effect.gen(function* () {
        const directory = yield* Directory
        const team = yield* directory.createTeam({ name: "SSO Team" })
        const made = yield* directory.signIn({
          provider: "corp",
          subject: "sub-1",
          email: "Fay@Example.com",
          name: "Fay",
          role: "member",
          teams: [
            { teamId: team.id, role: "team-admin" },
            { teamId: "team_unknown", role: "member" }
          ]
        })
        const again = yield* directory.signIn({
          provider: "corp",
          subject: "sub-1",
          email: "other@example.com",
          name: "x",
          role: "admin",
          teams: []
        })
        // A user made through the API signs in by email: the identity is linked to it.
        const apiMade = yield* directory.createUser({ email: "gil@example.com", role: "viewer" })
        const linked = yield* directory.signIn({
          provider: "corp",
          subject: "sub-2",
          email: "GIL@example.com",
          name: "Gil",
          role: "admin",
          teams: []
        })
        return {
          team,
          made,
          again,
          apiMade,
          linked,
          sync: directory.user(made.id),
          teamNow: directory.team(team.id),
          first: directory.firstAdmin()
        }
      })
    )
    expect(result.made).toMatchObject({ email: "fay@example.com", role: "member", oidcProvider: "corp", oidcSubject: "sub-1" })
    expect(result.made.teams).toEqual([{ teamId: result.team.id, role: "team-admin" }])
    expect(result.made.lastLoginAt).not.toBeNull()
    // A second sign-in finds the same user and keeps its role.
    expect(result.again.id).toBe(result.made.id)
    expect(result.again.role).toBe("member")
    expect(result.linked).toMatchObject({ id: result.apiMade.id, role: "viewer", oidcProvider: "corp", oidcSubject: "sub-2" })
    expect(result.linked.lastLoginAt).not.toBeNull()
    expect(result.sync?.email).toBe("fay@example.com")
    expect(result.teamNow?.name).toBe("SSO Team")
    expect(result.first.id).toBe("usr_admin")
  })
})

describe("configuration bundles", () => {
  it("carry users, teams, members and keys' owners to another gateway", async () => {
    const team = await api("/api/teams", { body: { name: "Bundled" } })
    const user = await api("/api/users", { body: { email: "bundled@example.com", teamIds: [team.body.id] } })
    const key = await api("/api/keys", { body: { name: "bundled-key", userId: user.body.id } })
    const content = await gw.run(Effect.flatMap(ConfigBundle, (b) => b.current("plain")))
    expect(content.sections.users?.map((r) => r["email"])).toContain("bundled@example.com")

    const other = await startGateway()
    try {
      const counts = await other.run(Effect.flatMap(ConfigBundle, (b) => b.apply(content)))
      expect(counts).toMatchObject({ users: content.sections.users!.length, teams: content.sections.teams!.length })
      const seen = await other.run(
        Effect.gen(function* () {
          const directory = yield* Directory
          yield* directory.refresh
          return { user: directory.user(user.body.id), key: yield* (yield* ApiKeys).byId(key.body.id) }
        })
      )
      expect(seen.user).toMatchObject({ email: "bundled@example.com", teams: [{ teamId: team.body.id, role: "member" }] })
      expect(seen.key).toMatchObject({ userId: user.body.id, teamId: null })
    } finally {
      await other.close()
    }
  })
})

describe("upgrading a single-user install", () => {
  it("makes usr_admin the owner of the keys made before people existed, once, and the password still logs in", async () => {
    const dataDir = tempDir("gw-teams-upgrade-")
    const old = await startGateway({ dataDir, env: { INITIAL_PASSWORD: PASSWORD } })
    let ids: Array<string>
    try {
      ids = await old.run(
        Effect.gen(function* () {
          const keys = yield* ApiKeys
          const a = yield* keys.create({ name: "old-admin", scopes: ["admin"] }, { secret: "gwk_teams_old_admin_0123456789abcdef" })
          const b = yield* keys.create({ name: "old-inference" })
          // The database as a gateway before people and teams left it: no user, keys without an owner.
          const sql = yield* SqlClient.SqlClient
          yield* sql`DELETE FROM users`
          yield* sql`UPDATE api_keys SET user_id = NULL, team_id = NULL`
          return [a.id, b.id]
        })
      )
    } finally {
      await old.close()
    }

    // Two processes starting on the database at once (the CLI's core and a server) make one first admin.
    const [one, two] = await Promise.all(
      [0, 1].map(() =>
        Effect.runPromise(
          Effect.scoped(Effect.flatMap(Directory, (d) => Effect.map(d.listUsers, (users) => users.map((u) => u.id)))).pipe(
            Effect.provide(localCore(dataDir))
          )
        )
      )
    )
    expect(one).toEqual(["usr_admin"])
    expect(two).toEqual(["usr_admin"])

    const gw2 = await startGateway({ dataDir, env: { INITIAL_PASSWORD: "not the one in the database" } })
    try {
      const oldAdmin = { authorization: "Bearer gwk_teams_old_admin_0123456789abcdef" }
      const users = await call(`${gw2.url}/api/users`, { headers: oldAdmin })
      expect(users.status).toBe(200)
      expect(users.body.users.map((u: { id: string }) => u.id)).toEqual(["usr_admin"])
      const keys = await call(`${gw2.url}/api/keys`, { headers: oldAdmin })
      for (const id of ids)
        expect(keys.body.keys.find((k: { id: string }) => k.id === id)).toMatchObject({ userId: "usr_admin", teamId: null })
      // The admin password set before still logs in, and its session acts as the first admin.
      const login = await call(`${gw2.url}/api/auth/login`, { body: { password: PASSWORD } })
      expect(login.status).toBe(200)
      const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!
      const me = await call(`${gw2.url}/api/users/usr_admin`, { headers: { cookie } })
      expect(me.status).toBe(200)
      expect(me.body.role).toBe("admin")
    } finally {
      await gw2.close()
    }
  })
})
