import * as NodeContext from "@effect/platform-node/NodeContext"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cli } from "../src/cli/app.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Usage and cost by team and by user (docs/teams.md, "Usage by team and user"), through HTTP on a
 * real SQLite file: requests through keys owned by users of two teams, by a team, and by nobody,
 * then `GET /api/usage/history?groupBy=team|user` with the `teamId`/`userId` filters, the CSV
 * export and `gateway usage`. The fake upstream reports 11 input and 7 output tokens; gpt-4o is
 * $2.50 in / $10 out per 1M tokens, so a request costs $0.0000975.
 */
const ADMIN = "gwk_teams_usage_admin_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const COST = 0.0000975

let gw: TestGateway
let up: FakeUpstream
const secrets: Record<string, string> = {}
const keyIds: Record<string, string> = {}

/** Arranged in the database: who is in which team and who owns which key (the directory's tables, migration 0025). */
const arrange = (statements: ReadonlyArray<(sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>>) =>
  gw.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      for (const s of statements) yield* Effect.orDie(s(sql))
    })
  )

const chat = (key: string) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model: "oai/gpt-4o", messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${secrets[key]}` }
  })

const history = (query: Record<string, string>) =>
  call(`${gw.url}/api/usage/history?${new URLSearchParams({ from: "0", ...query })}`, { headers: admin })

/** `{ key: requests }` of a history's rows. */
const requestsBy = (rows: ReadonlyArray<{ key: string | null; requests: number }>) =>
  Object.fromEntries(rows.map((r) => [r.key ?? "none", r.requests]))

/** Runs `gateway <args>` in this process against the test gateway; what it printed and its exit code. */
const gateway = async (args: ReadonlyArray<string>) => {
  const out: Array<string> = []
  const err: Array<string> = []
  const before = process.exitCode
  process.exitCode = 0
  await Effect.runPromise(
    Effect.consoleWith((base) =>
      Effect.withConsole(cli(["node", "gateway", ...args, "--url", gw.url, "--api-key", ADMIN]), {
        ...base,
        log: (...a: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(a.map(String).join(" "))),
        error: (...a: ReadonlyArray<unknown>) => Effect.sync(() => void err.push(a.map(String).join(" ")))
      })
    ).pipe(Effect.provide(NodeContext.layer))
  )
  const code = process.exitCode
  process.exitCode = before
  return { code, stdout: out.join("\n"), stderr: err.join("\n") }
}

/** A CSV's lines as arrays of fields (the export quotes none of these values). */
const parseCsv = (text: string) =>
  text
    .split("\r\n")
    .filter((l) => l !== "")
    .map((l) => l.split(","))

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "ok" })
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const name of ["alice", "bob", "carol", "blue", "gateway"]) {
    const secret = `gwk_teams_usage_${name}_key_0123456789abcdef`
    const created = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: `${name}'s key` }, { secret })))
    secrets[name] = secret
    keyIds[name] = created.id
  }
  const now = Date.now()
  // alice is in red, bob in blue, carol in both; "blue" is the blue team's own key; "gateway" has no
  // owner (as a key whose user was removed with ?force=true: a key made without one is its maker's).
  await arrange([
    (sql) =>
      sql`INSERT INTO teams (id, name, created_at, updated_at) VALUES ('team_red', 'Red', ${now}, ${now}), ('team_blue', '=Blue', ${now}, ${now})`,
    (sql) => sql`INSERT INTO users (id, email, name, role, created_at, updated_at) VALUES
      ('usr_alice', 'alice@example.com', 'Alice', 'member', ${now}, ${now}),
      ('usr_bob', 'bob@example.com', 'Bob', 'member', ${now}, ${now}),
      ('usr_carol', 'carol@example.com', '', 'team-admin', ${now}, ${now})`,
    (sql) => sql`INSERT INTO team_members (team_id, user_id, role, created_at) VALUES
      ('team_red', 'usr_alice', 'member', ${now}), ('team_blue', 'usr_bob', 'member', ${now}),
      ('team_red', 'usr_carol', 'team-admin', ${now}), ('team_blue', 'usr_carol', 'member', ${now})`,
    (sql) => sql`UPDATE api_keys SET user_id = 'usr_alice', team_id = NULL WHERE id = ${keyIds.alice!}`,
    (sql) => sql`UPDATE api_keys SET user_id = 'usr_bob', team_id = NULL WHERE id = ${keyIds.bob!}`,
    (sql) => sql`UPDATE api_keys SET user_id = 'usr_carol', team_id = NULL WHERE id = ${keyIds.carol!}`,
    (sql) => sql`UPDATE api_keys SET user_id = NULL, team_id = 'team_blue' WHERE id = ${keyIds.blue!}`,
    (sql) => sql`UPDATE api_keys SET user_id = NULL, team_id = NULL WHERE id = ${keyIds.gateway!}`
  ])
  const added = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai", name: "oai", apiKey: "sk-oai", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" },
    headers: admin
  })
  expect(added.status).toBe(201)
  // alice 2, bob 1, carol 1, the blue team's key 1, the gateway's own key 1.
  for (const key of ["alice", "alice", "bob", "carol", "blue", "gateway"]) expect((await chat(key)).status).toBe(200)
  await gw.usageWritten()
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

describe("usage by team and user", () => {
  it("groups by user: a user's keys count for the user, team keys and unowned keys for nobody", async () => {
    const res = await history({ groupBy: "user" })
    expect(res.status).toBe(200)
    expect(res.body.groupBy).toBe("user")
    expect(requestsBy(res.body.rows)).toEqual({ usr_alice: 2, usr_bob: 1, usr_carol: 1, none: 2 })
    const alice = res.body.rows.find((r: any) => r.key === "usr_alice")
    expect(alice).toMatchObject({ name: "Alice", tokensIn: 22, tokensOut: 14 })
    expect(alice.costUsd).toBeCloseTo(2 * COST, 10)
    // A user without a name is shown by their email.
    expect(res.body.rows.find((r: any) => r.key === "usr_carol").name).toBe("carol@example.com")
    expect(res.body.totals.requests).toBe(6)
    expect(res.body.totals.costUsd).toBeCloseTo(6 * COST, 10)
  })

  it("groups by team: a user's key counts for each of the user's teams, a team's key for the team; the totals count each request once", async () => {
    const res = await history({ groupBy: "team" })
    expect(res.status).toBe(200)
    // red: alice 2 + carol 1; blue: bob 1 + its own key 1 + carol 1; no team: the gateway's key.
    expect(requestsBy(res.body.rows)).toEqual({ team_red: 3, team_blue: 3, none: 1 })
    expect(res.body.rows.find((r: any) => r.key === "team_red")).toMatchObject({ name: "Red", tokensIn: 33 })
    expect(res.body.rows.find((r: any) => r.key === "team_blue").costUsd).toBeCloseTo(3 * COST, 10)
    expect(res.body.totals.requests).toBe(6)
  })

  it("filters by team (its own keys and its members') and by user, with any grouping", async () => {
    const blue = await history({ groupBy: "user", teamId: "team_blue" })
    expect(blue.status).toBe(200)
    expect(requestsBy(blue.body.rows)).toEqual({ usr_bob: 1, usr_carol: 1, none: 1 })
    expect(blue.body.totals.requests).toBe(3)
    const alice = await history({ groupBy: "model", userId: "usr_alice" })
    expect(alice.body.totals).toMatchObject({ requests: 2, tokensIn: 22 })
    expect(alice.body.rows).toEqual([expect.objectContaining({ key: "gpt-4o", requests: 2 })])
    const carolInRed = await history({ groupBy: "team", teamId: "team_red", userId: "usr_carol" })
    expect(carolInRed.body.totals.requests).toBe(1)
    // The request log takes the same filters.
    const logs = await call(`${gw.url}/api/usage/logs?teamId=team_red`, { headers: admin })
    expect(logs.status).toBe(200)
    expect(new Set(logs.body.logs.map((l: any) => l.apiKeyId))).toEqual(new Set([keyIds.alice, keyIds.carol]))
  })

  it("answers 404 naming an unknown team or user, and 400 naming a bad groupBy", async () => {
    const team = await history({ teamId: "team_nope" })
    expect(team.status).toBe(404)
    expect(team.body.message).toContain("teamId")
    expect(team.body.message).toContain("team_nope")
    const user = await call(`${gw.url}/api/usage/export?userId=usr_nope`, { headers: admin })
    expect(user.status).toBe(404)
    expect(user.body.message).toContain("userId")
    const by = await history({ groupBy: "department" })
    expect(by.status).toBe(400)
    expect(by.body.message).toContain("groupBy")
  })

  it("exports one CSV line per request with the key's owner, user and teams", async () => {
    const res = await fetch(`${gw.url}/api/usage/export?from=0`, { headers: admin })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/csv")
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="usage-.*\.csv"$/)
    const [header, ...lines] = parseCsv(await res.text())
    expect(header!.slice(0, 9)).toEqual([
      "time",
      "request_id",
      "api_key_id",
      "api_key_name",
      "user_id",
      "user_name",
      "user_email",
      "team_ids",
      "team_names"
    ])
    expect(lines).toHaveLength(6)
    const col = (line: ReadonlyArray<string>, name: string) => line[header!.indexOf(name)]
    const of = (key: string) => lines.filter((l) => col(l, "api_key_id") === keyIds[key])
    expect(of("alice")).toHaveLength(2)
    const carol = of("carol")[0]!
    expect(col(carol, "user_email")).toBe("carol@example.com")
    expect(col(carol, "team_ids")).toBe("team_blue;team_red")
    // A name a spreadsheet would run as a formula is written as text.
    expect(col(carol, "team_names")).toBe("'=Blue;Red")
    const blue = of("blue")[0]!
    expect([col(blue, "user_id"), col(blue, "team_ids")]).toEqual(["", "team_blue"])
    const own = of("gateway")[0]!
    expect([col(own, "user_id"), col(own, "team_ids"), col(own, "api_key_name")]).toEqual(["", "", "gateway's key"])
    expect(col(own, "cost_usd")).toBe("0.0000975000")
    expect(col(own, "tokens_in")).toBe("11")
  })

  it("exports the groups of a groupBy with their names", async () => {
    const res = await fetch(`${gw.url}/api/usage/export?from=0&groupBy=team`, { headers: admin })
    expect(res.status).toBe(200)
    const [header, ...lines] = parseCsv(await res.text())
    expect(header).toEqual([
      "team",
      "name",
      "requests",
      "errors",
      "tokens_in",
      "tokens_out",
      "tokens_cached",
      "tokens_reasoning",
      "cost_usd",
      "cache_hits",
      "avg_latency_ms"
    ])
    const red = lines.find((l) => l[0] === "team_red")!
    expect(red.slice(0, 6)).toEqual(["team_red", "Red", "3", "0", "33", "21"])
    expect(red[8]).toBe((3 * COST).toFixed(10))
    expect(lines.find((l) => l[0] === "")![2]).toBe("1")
  })

  it("gateway usage --by team|user prints the groups by name, --csv the export, --json the history", async () => {
    const byTeam = await gateway(["usage", "--by", "team", "--from", "0"])
    expect(byTeam.code).toBe(0)
    const red = byTeam.stdout.split("\n").find((l) => l.startsWith("team_red"))!
    expect(red.split(/\s{2,}/)).toEqual([
      "team_red",
      "Red",
      "3",
      "0",
      "33",
      "21",
      `$${(3 * COST).toFixed(4)}`,
      expect.stringMatching(/ms$/)
    ])
    expect(byTeam.stdout).toMatch(/^\(no team\)\s+-\s+1\s/m)
    expect(byTeam.stdout).toMatch(/^total\s+6\s/m)
    expect(byTeam.stdout).toContain("the teams add up to more than the total")

    const byUser = await gateway(["usage", "--by", "user", "--team", "team_blue", "--from", "0", "--json"])
    expect(byUser.code).toBe(0)
    expect(requestsBy(JSON.parse(byUser.stdout).rows)).toEqual({ usr_bob: 1, usr_carol: 1, none: 1 })

    const csv = await gateway(["usage", "--csv", "--user", "usr_alice", "--from", "0"])
    expect(csv.code).toBe(0)
    const [header, ...lines] = parseCsv(csv.stdout.replace(/\n/g, "\r\n"))
    expect(header![0]).toBe("time")
    expect(lines.map((l) => l[header!.indexOf("user_id")])).toEqual(["usr_alice", "usr_alice"])

    const bad = await gateway(["usage", "--by", "department"])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("--by")
    const unknown = await gateway(["usage", "--team", "team_nope"])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain("team_nope")
  })

  it("follows a key's current owner: a key given to another user moves its past usage with it", async () => {
    await arrange([(sql) => sql`UPDATE api_keys SET user_id = 'usr_alice' WHERE id = ${keyIds.bob!}`])
    try {
      const res = await history({ groupBy: "user" })
      expect(requestsBy(res.body.rows)).toEqual({ usr_alice: 3, usr_carol: 1, none: 2 })
      const teams = await history({ groupBy: "team" })
      expect(requestsBy(teams.body.rows)).toEqual({ team_red: 4, team_blue: 2, none: 1 })
    } finally {
      await arrange([(sql) => sql`UPDATE api_keys SET user_id = 'usr_bob' WHERE id = ${keyIds.bob!}`])
    }
  })
})
