import * as HttpApi from "@effect/platform/HttpApi"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { LIVE_PATH } from "../src/management/dashboard/livePort.js"
import type { Role } from "../src/domain/teams.js"
import {
  canGrantRole,
  canManageKey,
  canManageTeam,
  ownerOfNewKey,
  principalUserOf,
  canReadLimitsOf,
  refusalToCreateUser,
  refusalToLimit,
  refusalToUpdateUser,
  scopeUsage,
  teamKeyUser,
  type UserLike,
  visibleKeys
} from "../src/management/api/access.js"
import { ManagementApi } from "../src/management/api/Api.js"
import { callerOfIdentity } from "../src/management/mcp/caller.js"
import { Roles } from "../src/management/api/Roles.js"
import { type RouteAccess, routeAccess, routeAccessTable } from "../src/management/api/routeAccess.js"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { explain, managementClient } from "../src/cli/remote.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { randomToken, sha256 } from "../src/services/auth/password.js"
import { Directory } from "../src/services/teams/Directory.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

const PASSWORD = "correct horse battery"
const ADMIN_KEY = "gwk_teams_access_admin_0123456789abcdef"

/** A caller of the walk: a role (null: no credentials) and the headers that make it that caller. */
interface Caller {
  readonly name: string
  readonly role: Role | null
  readonly headers: (method: string) => Record<string, string>
}

/** Every route of the management API, enumerated from the HttpApi itself (never a hand list). */
const endpoints = (): ReadonlyArray<RouteAccess & { readonly annotated: boolean }> => {
  const all: Array<RouteAccess & { readonly annotated: boolean }> = []
  HttpApi.reflect(ManagementApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations }) => {
      const access = routeAccess(endpoint.method, endpoint.path)
      if (!access) throw new Error(`no table row for ${endpoint.method} ${endpoint.path}`)
      all.push({ ...access, annotated: Context.getOption(mergedAnnotations, Roles)._tag === "Some" })
    }
  })
  return all
}

/** A path with every parameter filled with an id nothing has. */
const concrete = (path: string) => path.replace(/:(\w+)/g, "walker-missing")

/** A session for a user, as the dashboard's login makes one (`admin_sessions`, with its user). */
const sessionFor = (gw: TestGateway, userId: string | null) =>
  gw.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const token = randomToken(32)
      const csrf = randomToken(24)
      const t = Date.now()
      yield* sql`INSERT INTO admin_sessions ${sql.insert({
        token_hash: sha256(token),
        csrf_token: csrf,
        created_at: t,
        expires_at: t + 3_600_000,
        ip: "127.0.0.1",
        user_agent: "teams.access.test",
        user_id: userId
      })}`
      return (method: string): Record<string, string> => ({
        cookie: `gw_session=${token}`,
        ...(method === "GET" || method === "HEAD" ? {} : { "x-csrf-token": csrf })
      })
    }).pipe(Effect.orDie)
  )

/**
 * What a caller may be sent on a route it may call: reads always; a change only where a role
 * other than admin may make it, with a body no schema takes (the answer says who may call, and
 * nothing changes). An admin-only change is walked for its refusals only: its handler would act
 * on this machine (restart, tunnels, capture modes, tool configuration files).
 */
const callable = (route: RouteAccess) => route.method === "GET" || route.roles.some((r) => r !== "admin")

let gw: TestGateway
const users: Record<string, string> = {}
let teamId = ""
let otherTeamId = ""
const callers: Array<Caller> = []

beforeAll(async () => {
  gw = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN_KEY })))
  const admin = { authorization: `Bearer ${ADMIN_KEY}` }
  const made = await gw.run(
    Effect.gen(function* () {
      const directory = yield* Directory
      const team = yield* directory.createTeam({ name: "research" })
      const other = yield* directory.createTeam({ name: "sales" })
      const make = (email: string, role: Role, teams: ReadonlyArray<string>) => directory.createUser({ email, role, teamIds: [...teams] })
      const second = yield* make("ada@example.com", "admin", [])
      const lead = yield* make("lead@example.com", "team-admin", [team.id])
      yield* directory.addMember(team.id, lead.id, "team-admin")
      const member = yield* make("mem@example.com", "member", [team.id])
      const outsider = yield* make("out@example.com", "member", [other.id])
      const viewer = yield* make("view@example.com", "viewer", [])
      return { team, other, second, lead, member, outsider, viewer }
    })
  )
  teamId = made.team.id
  otherTeamId = made.other.id
  Object.assign(users, {
    admin: made.second.id,
    lead: made.lead.id,
    member: made.member.id,
    outsider: made.outsider.id,
    viewer: made.viewer.id
  })
  callers.push(
    { name: "admin key", role: "admin", headers: () => admin },
    { name: "admin (session)", role: "admin", headers: await sessionFor(gw, made.second.id) },
    { name: "team-admin (session)", role: "team-admin", headers: await sessionFor(gw, made.lead.id) },
    { name: "member (session)", role: "member", headers: await sessionFor(gw, made.member.id) },
    { name: "viewer (session)", role: "viewer", headers: await sessionFor(gw, made.viewer.id) },
    { name: "no credentials", role: null, headers: () => ({}) }
  )
}, 60_000)

afterAll(async () => {
  await gw?.close()
})

describe("roles and access: every management route, every role", () => {
  it("every route that needs authentication says which roles may call it (a group's default or its own)", () => {
    const unannotated = endpoints()
      .filter((r) => r.auth !== "public" && !r.annotated)
      .map((r) => `${r.id} (${r.method} ${r.path})`)
    expect(unannotated).toEqual([])
  })

  it("a route without a Roles annotation would be for admins only", () => {
    for (const r of routeAccessTable()) if (r.auth !== "public") expect(r.roles).toContain("admin")
  })

  it("answers each role as the table says: refused roles 403 naming the role, others not 401/403, nobody 401", async () => {
    const routes = endpoints().filter((r) => r.auth !== "public")
    expect(routes.length).toBeGreaterThan(200)
    const wrong: Array<string> = []
    let walked = 0
    for (const route of routes) {
      for (const caller of callers) {
        const allowed =
          caller.role === null
            ? // The playground follows REQUIRE_API_KEY: off on a loopback bind, a caller without a key may use it (as a member).
              route.auth === "playground"
            : route.roles.includes(caller.role)
        if (allowed && !callable(route)) continue
        const body = route.method === "GET" || route.method === "HEAD" ? undefined : { walker: true }
        const res = await call(`${gw.url}${concrete(route.path)}`, { method: route.method, body, headers: caller.headers(route.method) })
        walked++
        const what = `${caller.name} ${route.method} ${route.path} (${route.id}) answered ${res.status} ${res.text.slice(0, 160)}`
        if (caller.role === null && !allowed) {
          if (res.status !== 401) wrong.push(`${what}: expected 401`)
        } else if (!allowed) {
          if (res.status !== 403 || !String(res.body?.message).includes(`role ${caller.role}`))
            wrong.push(`${what}: expected 403 naming the role`)
        } else if (res.status === 401 || res.status === 403 || (res.status >= 500 && res.status !== 501 && res.status !== 503)) {
          wrong.push(`${what}: expected an answer of the route itself`)
        }
      }
    }
    expect(wrong).toEqual([])
    expect(walked).toBeGreaterThan(1000)
  }, 180_000)

  it("GET /api/auth/session names the caller's user, role and the routes the role may call", async () => {
    const member = callers.find((c) => c.role === "member")!
    const res = await call(`${gw.url}/api/auth/session`, { headers: member.headers("GET") })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      authenticated: true,
      via: "session",
      role: "member",
      user: { id: users.member, email: "mem@example.com", role: "member", teamIds: [teamId] }
    })
    expect(res.body.routes).toContain("keys.list")
    expect(res.body.routes).toContain("keys.create")
    expect(res.body.routes).not.toContain("providers.create")
    expect(res.body.routes).not.toContain("settings.get")
    const viewer = await call(`${gw.url}/api/auth/session`, { headers: callers.find((c) => c.role === "viewer")!.headers("GET") })
    expect(viewer.body.routes).toContain("settings.get")
    expect(viewer.body.routes).not.toContain("settings.patch")
    const nobody = await call(`${gw.url}/api/auth/session`)
    expect(nobody.body).toMatchObject({ authenticated: false, user: null, role: null, routes: [] })
  })

  it("the OpenAPI document carries each operation's roles as x-gateway-roles", async () => {
    const doc = (await call(`${gw.url}/api/openapi.json`)).body
    expect(doc.paths["/api/keys"].get["x-gateway-roles"]).toEqual(["admin", "team-admin", "member", "viewer"])
    expect(doc.paths["/api/keys"].post["x-gateway-roles"]).toEqual(["admin", "team-admin", "member"])
    expect(doc.paths["/api/settings"].put["x-gateway-roles"]).toEqual(["admin"])
  })

  it("a disabled user's session is no authentication (401)", async () => {
    const headers = await sessionFor(gw, users.outsider!)
    expect((await call(`${gw.url}/api/keys`, { headers: headers("GET") })).status).toBe(200)
    await gw.run(Effect.flatMap(Directory, (d) => d.updateUser(users.outsider!, { disabled: true })))
    await until(
      "the disabled user's session refused",
      async () => (await call(`${gw.url}/api/keys`, { headers: headers("GET") })).status === 401
    )
  })

  it("a team-admin may not create a key for another team (403), a member not for anyone else", async () => {
    const lead = callers.find((c) => c.role === "team-admin")!
    const member = callers.find((c) => c.role === "member")!
    const forOther = await call(`${gw.url}/api/keys`, { headers: lead.headers("POST"), body: { name: "theirs", teamId: otherTeamId } })
    expect(forOther.status).toBe(403)
    expect(forOther.body.message).toContain(otherTeamId)
    const forSomeone = await call(`${gw.url}/api/keys`, { headers: member.headers("POST"), body: { name: "not-mine", userId: users.lead } })
    expect(forSomeone.status).toBe(403)
    expect(forSomeone.body.message).toContain("role member")
  })

  it("keys: a member sees and manages their own, a team-admin also their members', and a key acts within its owner's role", async () => {
    const lead = callers.find((c) => c.role === "team-admin")!
    const member = callers.find((c) => c.role === "member")!
    const viewer = callers.find((c) => c.role === "viewer")!
    const mine = await call(`${gw.url}/api/keys`, { headers: member.headers("POST"), body: { name: "member-own", scopes: ["admin"] } })
    expect(mine.status).toBe(201)
    expect(mine.body.userId).toBe(users.member)
    const forMember = await call(`${gw.url}/api/keys`, {
      headers: lead.headers("POST"),
      body: { name: "lead-for-member", userId: users.member }
    })
    expect(forMember.status).toBe(201)
    const leadOwn = await call(`${gw.url}/api/keys`, { headers: lead.headers("POST"), body: { name: "lead-own" } })
    expect(leadOwn.status).toBe(201)
    expect(leadOwn.body.userId).toBe(users.lead)
    const teamKey = await call(`${gw.url}/api/keys`, {
      headers: lead.headers("POST"),
      body: { name: "team-key", teamId, scopes: ["admin"] }
    })
    expect(teamKey.status).toBe(201)

    const names = async (c: Caller) =>
      ((await call(`${gw.url}/api/keys`, { headers: c.headers("GET") })).body.keys as Array<{ name: string }>).map((k) => k.name).sort()
    expect(await names(member)).toEqual(["lead-for-member", "member-own"])
    expect(await names(lead)).toEqual(["lead-for-member", "lead-own", "member-own", "team-key"])
    expect(await names(viewer)).toContain("admin")

    // Another's key is unknown to a member; a team-admin manages their member's.
    expect((await call(`${gw.url}/api/keys/${leadOwn.body.id}`, { method: "DELETE", headers: member.headers("DELETE") })).status).toBe(404)
    expect(
      (
        await call(`${gw.url}/api/keys/${mine.body.id}`, {
          method: "PATCH",
          headers: lead.headers("PATCH"),
          body: { name: "member-own-2" }
        })
      ).status
    ).toBe(200)
    expect((await call(`${gw.url}/api/keys/${forMember.body.id}`, { method: "DELETE", headers: lead.headers("DELETE") })).status).toBe(200)
    // A member may not hand their key to someone else.
    const handed = await call(`${gw.url}/api/keys/${mine.body.id}`, {
      method: "PATCH",
      headers: member.headers("PATCH"),
      body: { userId: users.lead }
    })
    expect(handed.status).toBe(403)

    // The member's admin-scope key acts as the member: its own keys, nothing of the configuration.
    const asMember = { authorization: `Bearer ${mine.body.secret}` }
    const providers = await call(`${gw.url}/api/providers`, { headers: asMember })
    expect(providers.status).toBe(403)
    expect(providers.body.message).toContain("role member")
    expect(((await call(`${gw.url}/api/keys`, { headers: asMember })).body.keys as Array<{ id: string }>).map((k) => k.id)).toEqual([
      mine.body.id
    ])
    // The CLI's remote commands say so in one line.
    const refused = await Effect.runPromise(
      Effect.gen(function* () {
        const client = yield* managementClient(gw.url, mine.body.secret)
        return yield* Effect.flip(client.providers.list())
      }).pipe(Effect.provide(FetchHttpClient.layer))
    )
    expect(explain(gw.url)(refused).message).toMatch(/^refused by the gateway \(403\): the role member may not call GET \/api\/providers/)
    // A team's key acts as a member of its team: it reads, and creates no keys.
    const asTeam = { authorization: `Bearer ${teamKey.body.secret}` }
    expect((await call(`${gw.url}/api/models/catalog`, { headers: asTeam })).status).toBe(200)
    expect((await call(`${gw.url}/api/keys`, { headers: asTeam, body: { name: "from-team" } })).status).toBe(403)
  })

  it("people and teams: a team-admin manages their own team's members and users, others read their own team", async () => {
    const lead = callers.find((c) => c.role === "team-admin")!
    const member = callers.find((c) => c.role === "member")!
    const post = (c: Caller, path: string, body: unknown) => call(`${gw.url}${path}`, { headers: c.headers("POST"), body })
    // Users: created into the lead's team, any role but admin.
    const made = await post(lead, "/api/users", { email: "new@example.com", role: "member", teamIds: [teamId] })
    expect(made.status).toBe(201)
    expect((await post(lead, "/api/users", { email: "boss@example.com", role: "admin", teamIds: [teamId] })).status).toBe(403)
    const elsewhere = await post(lead, "/api/users", { email: "far@example.com", teamIds: [otherTeamId] })
    expect(elsewhere.status).toBe(403)
    expect(elsewhere.body.message).toContain(otherTeamId)
    const promote = await call(`${gw.url}/api/users/${made.body.id}`, {
      method: "PATCH",
      headers: lead.headers("PATCH"),
      body: { role: "admin" }
    })
    expect(promote.status).toBe(403)
    const rename = await call(`${gw.url}/api/users/${made.body.id}`, {
      method: "PATCH",
      headers: lead.headers("PATCH"),
      body: { name: "Newt" }
    })
    expect(rename.status).toBe(200)
    expect(
      (await call(`${gw.url}/api/users/${users.admin}`, { method: "PATCH", headers: lead.headers("PATCH"), body: { name: "x" } })).status
    ).toBe(403)
    // Members: the lead's team only.
    expect((await post(lead, `/api/teams/${teamId}/members`, { userId: users.viewer, role: "member" })).status).toBe(201)
    expect((await post(lead, `/api/teams/${otherTeamId}/members`, { userId: users.viewer })).status).toBe(403)
    expect(
      (await call(`${gw.url}/api/teams/${teamId}/members/${users.viewer}`, { method: "DELETE", headers: lead.headers("DELETE") })).status
    ).toBe(200)
    // A member reads their own team and its members, nothing of another team's.
    const teams = await call(`${gw.url}/api/teams`, { headers: member.headers("GET") })
    expect(teams.body.teams.map((t: { id: string }) => t.id)).toEqual([teamId])
    expect((await call(`${gw.url}/api/teams/${otherTeamId}`, { headers: member.headers("GET") })).status).toBe(404)
    expect((await call(`${gw.url}/api/teams/${teamId}/members`, { headers: member.headers("GET") })).status).toBe(200)
    expect((await call(`${gw.url}/api/users/${users.outsider}`, { headers: member.headers("GET") })).status).toBe(404)
    expect((await post(member, `/api/teams/${teamId}/members`, { userId: users.viewer })).status).toBe(403)
  })

  it("the dashboard's live feed opens for admins and viewers, refused to a member with a 403 naming the role", async () => {
    const upgrade = (headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const ws = new WebSocket(`${gw.url.replace("http", "ws")}${LIVE_PATH}`, { headers })
        ws.on("open", () => {
          ws.close()
          resolve({ status: 101, body: "" })
        })
        ws.on("unexpected-response", (_req, res) => {
          let body = ""
          res.on("data", (c: Buffer) => (body += c.toString()))
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
        })
        ws.on("error", (e) => (e.message.includes("Unexpected server response") ? undefined : reject(e)))
      })
    const viewer = callers.find((c) => c.role === "viewer")!
    const member = callers.find((c) => c.role === "member")!
    expect((await upgrade(viewer.headers("GET"))).status).toBe(101)
    const refused = await upgrade(member.headers("GET"))
    expect(refused.status).toBe(403)
    expect(refused.body).toContain("role member")
  })

  it("limits: a team-admin sets their team's and members', not another team's nor the organisation's; a member reads their own", async () => {
    const lead = callers.find((c) => c.role === "team-admin")!
    const member = callers.find((c) => c.role === "member")!
    const set = (c: Caller, body: unknown) => call(`${gw.url}/api/usage/limits`, { headers: c.headers("POST"), body })
    const own = await set(lead, { teamId, rpm: 100 })
    expect(own.status, own.text).toBe(200)
    expect((await set(lead, { userId: users.member, rpm: 50 })).status).toBe(200)
    const other = await set(lead, { teamId: otherTeamId, rpm: 100 })
    expect(other.status).toBe(403)
    expect(other.body.message).toContain(otherTeamId)
    expect((await set(lead, { organisation: true, rpm: 1000 })).status).toBe(403)
    expect((await set(member, { userId: users.member, rpm: 1000 })).status).toBe(403)
    const seen = await call(`${gw.url}/api/usage/limits?level=all`, { headers: member.headers("GET") })
    expect(seen.status).toBe(200)
    const subjects = (seen.body.limits as Array<{ subjectId: string }>).map((l) => l.subjectId)
    expect(subjects).toContain(users.member)
    expect(subjects).not.toContain(otherTeamId)
  })

  it("a non-admin may not give a key shadow targets (403 naming the field)", async () => {
    const member = callers.find((c) => c.role === "member")!
    const res = await call(`${gw.url}/api/keys`, {
      headers: member.headers("POST"),
      body: { name: "shadowed", shadow: [{ model: "x/y" }] }
    })
    expect([400, 403]).toContain(res.status)
    if (res.status === 403) expect(res.body.message).toContain("shadow")
  })

  it("usage reads are narrowed to the caller's own: another team or user is 403 naming it", async () => {
    const lead = callers.find((c) => c.role === "team-admin")!
    const member = callers.find((c) => c.role === "member")!
    const viewer = callers.find((c) => c.role === "viewer")!
    const get = (c: Caller, query: string) => call(`${gw.url}/api/usage/history?${query}`, { headers: c.headers("GET") })
    expect((await get(member, "groupBy=day")).status).toBe(200)
    const otherTeam = await get(member, `teamId=${otherTeamId}`)
    expect(otherTeam.status).toBe(403)
    expect(otherTeam.body.message).toContain(otherTeamId)
    expect((await get(member, `userId=${users.lead}`)).status).toBe(403)
    expect((await get(lead, `teamId=${teamId}`)).status).toBe(200)
    expect((await get(lead, `userId=${users.member}`)).status).toBe(200)
    expect((await get(lead, `teamId=${otherTeamId}`)).status).toBe(403)
    expect((await get(lead, `userId=${users.admin}`)).status).toBe(403)
    expect((await get(viewer, `teamId=${otherTeamId}`)).status).toBe(200)
    const logs = await call(`${gw.url}/api/usage/logs?userId=${users.lead}`, { headers: member.headers("GET") })
    expect(logs.status).toBe(403)
  })

  it("the audit log names the user who made a change", async () => {
    const admin = callers.find((c) => c.name === "admin (session)")!
    const res = await call(`${gw.url}/api/keys`, { headers: admin.headers("POST"), body: { name: "by-ada" } })
    expect(res.status).toBe(201)
    await until("the audit row", async () => {
      const page = await call(`${gw.url}/api/compliance/audit-log?actor=${users.admin}`, {
        headers: { authorization: `Bearer ${ADMIN_KEY}` }
      })
      return page.body?.entries?.some((e: { actor: string }) => e.actor === users.admin)
    })
  })
})

describe("a single-user install: the admin password and an admin key keep full access", () => {
  let solo: TestGateway
  const key = "gwk_teams_access_solo_0123456789abcdef"
  beforeAll(async () => {
    solo = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
    await solo.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: key })))
  }, 60_000)
  afterAll(async () => {
    await solo?.close()
  })

  it("every read answers the password's session and the key, and both change keys as before", async () => {
    const login = await call(`${solo.url}/api/auth/login`, { body: { password: PASSWORD } })
    expect(login.status).toBe(200)
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!
    const session = { cookie, "x-csrf-token": login.body.csrfToken as string }
    const bearer = { authorization: `Bearer ${key}` }
    const me = await call(`${solo.url}/api/auth/session`, { headers: session })
    expect(me.body).toMatchObject({ authenticated: true, role: "admin", user: { id: "usr_admin", role: "admin" } })
    expect(me.body.routes).toEqual(
      routeAccessTable()
        .filter((r) => r.auth !== "public")
        .map((r) => r.id)
    )
    const refused: Array<string> = []
    for (const route of routeAccessTable().filter((r) => r.auth !== "public" && r.method === "GET")) {
      for (const headers of [session, bearer]) {
        const res = await call(`${solo.url}${concrete(route.path)}`, { headers })
        if (res.status === 401 || res.status === 403) refused.push(`${route.id}: ${res.status} ${res.text.slice(0, 120)}`)
      }
    }
    expect(refused).toEqual([])
    for (const headers of [session, bearer]) {
      const made = await call(`${solo.url}/api/keys`, { headers, body: { name: `solo-${headers === session ? "s" : "k"}` } })
      expect(made.status).toBe(201)
      const removed = await call(`${solo.url}/api/keys/${made.body.id}`, { method: "DELETE", headers })
      expect(removed.status).toBe(200)
    }
    await until("the audit rows keep their actors", async () => {
      const page = await call(`${solo.url}/api/compliance/audit-log`, { headers: bearer })
      const actors = new Set((page.body?.entries ?? []).map((e: { actor: string }) => e.actor))
      return actors.has("admin-session") && [...actors].some((a) => String(a).startsWith("key_") || !String(a).includes("/"))
    })
  }, 120_000)
})

describe("the decisions inside routes (access.ts) and the MCP caller's cap", () => {
  const people: Record<string, UserLike> = {
    usr_a: { id: "usr_a", role: "admin", teams: [{ teamId: "team_1", role: "member" }] },
    usr_l: { id: "usr_l", role: "team-admin", teams: [{ teamId: "team_1", role: "team-admin" }] },
    usr_m: { id: "usr_m", role: "member", teams: [{ teamId: "team_1", role: "member" }] },
    usr_o: { id: "usr_o", role: "member", teams: [{ teamId: "team_2", role: "member" }] },
    usr_v: { id: "usr_v", role: "viewer", teams: [] }
  }
  const lookup = (id: string) => people[id]
  const as = (id: string) => principalUserOf(people[id]!)

  it("a team-admin manages their team's members and keys, not an admin's nor another team's", () => {
    const lead = as("usr_l")
    expect(canManageTeam(lead, "team_1")).toBe(true)
    expect(canManageTeam(lead, "team_2")).toBe(false)
    expect(canManageKey(lead, { userId: "usr_m", teamId: null }, lookup)).toBe(true)
    expect(canManageKey(lead, { userId: "usr_a", teamId: null }, lookup)).toBe(false)
    expect(canManageKey(lead, { userId: "usr_o", teamId: null }, lookup)).toBe(false)
    expect(canManageKey(lead, { userId: null, teamId: "team_1" }, lookup)).toBe(true)
    expect(canManageKey(lead, { userId: null, teamId: null }, lookup)).toBe(false)
    expect(canGrantRole(lead, "admin")).toBe(false)
    expect(canGrantRole(lead, "team-admin")).toBe(true)
    expect(refusalToCreateUser(lead, "member", ["team_2"])).toContain("team_2")
    expect(refusalToCreateUser(lead, "admin", ["team_1"])).toContain("admin")
    expect(refusalToCreateUser(lead, "member", ["team_1"])).toBeUndefined()
    expect(refusalToUpdateUser(lead, people.usr_m!, { role: "admin" }, lookup)).toContain("admin")
    expect(refusalToUpdateUser(lead, people.usr_a!, { disabled: true } as never, lookup)).toBeDefined()
  })

  it("a member owns their keys only; a viewer sees every key and manages none; a team's key creates none", () => {
    const member = as("usr_m")
    const keys = [
      { id: "k1", userId: "usr_m", teamId: null },
      { id: "k2", userId: "usr_l", teamId: null },
      { id: "k3", userId: null, teamId: "team_1" }
    ]
    expect(visibleKeys(member, keys, lookup).map((k) => k.id)).toEqual(["k1"])
    expect(visibleKeys(as("usr_v"), keys, lookup).map((k) => k.id)).toEqual(["k1", "k2", "k3"])
    expect(canManageKey(as("usr_v"), keys[0]!, lookup)).toBe(false)
    expect(ownerOfNewKey(member, {}, lookup)).toEqual({ userId: "usr_m", teamId: null })
    expect(ownerOfNewKey(member, { teamId: "team_1" }, lookup)).toHaveProperty("refused")
    expect(ownerOfNewKey(teamKeyUser("team_1"), {}, lookup)).toHaveProperty("refused")
    expect(ownerOfNewKey(as("usr_l"), { userId: "usr_m" }, lookup)).toEqual({ userId: "usr_m", teamId: null })
  })

  it("usage: a member reads their own, a team-admin their team by default, a team's key itself", () => {
    expect(scopeUsage(as("usr_m"), null, {}, undefined, lookup)).toEqual({ query: { userId: "usr_m" } })
    expect(scopeUsage(as("usr_l"), null, {}, undefined, lookup)).toEqual({ query: { teamId: "team_1" } })
    expect(scopeUsage(as("usr_m"), null, { teamId: "team_1" }, undefined, lookup)).toHaveProperty("refused")
    expect(scopeUsage(teamKeyUser("team_1"), "k3", {}, undefined, lookup)).toEqual({ query: { apiKeyId: "k3" } })
    expect(scopeUsage(as("usr_v"), null, { teamId: "team_2" }, undefined, lookup)).toEqual({ query: { teamId: "team_2" } })
  })

  it("limits: a team-admin sets them on their team, its members and their keys; the organisation's are an admin's", () => {
    const lead = as("usr_l")
    expect(refusalToLimit(lead, "team_1", undefined, lookup)).toBeUndefined()
    expect(refusalToLimit(lead, "team_2", undefined, lookup)).toContain("team_2")
    expect(refusalToLimit(lead, "usr_m", undefined, lookup)).toBeUndefined()
    expect(refusalToLimit(lead, "usr_a", undefined, lookup)).toContain("usr_a")
    expect(refusalToLimit(lead, "org", undefined, lookup)).toContain("admin")
    expect(refusalToLimit(lead, "key_1", { userId: "usr_m", teamId: null }, lookup)).toBeUndefined()
    expect(refusalToLimit(lead, "key_2", { userId: "usr_o", teamId: null }, lookup)).toBeDefined()
    expect(refusalToLimit(as("usr_m"), "usr_m", undefined, lookup)).toContain("member")
    expect(canReadLimitsOf(as("usr_m"), "usr_m", undefined, lookup)).toBe(true)
    expect(canReadLimitsOf(as("usr_m"), "team_1", undefined, lookup)).toBe(true)
    expect(canReadLimitsOf(as("usr_m"), "team_2", undefined, lookup)).toBe(false)
    expect(canReadLimitsOf(as("usr_m"), "usr_l", undefined, lookup)).toBe(false)
  })

  it("/mcp: a user's role caps the scopes, whatever the credential carries", () => {
    const who = { kind: "session", userId: "usr_v" } as const
    expect(callerOfIdentity(who, undefined, "admin").admin).toBe(true)
    const viewer = callerOfIdentity(who, undefined, "viewer")
    expect(viewer.admin).toBe(false)
    expect([...viewer.scopes].every((s) => s.startsWith("read:"))).toBe(true)
    expect(viewer.scopes.has("read:providers")).toBe(true)
    expect([...callerOfIdentity(who, undefined, "member").scopes]).toEqual(["read:catalog"])
  })
})
