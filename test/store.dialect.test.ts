import { SqlError } from "@effect/sql/SqlError"
import Database from "better-sqlite3"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { ResponseCache } from "../src/services/accounting/ResponseCache.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { FeatureFlags } from "../src/platform/flags/FeatureFlags.js"
import { Connections } from "../src/upstream/providers/Connections.js"
import { AutoEngine } from "../src/services/routing/AutoEngine.js"
import { Combos } from "../src/services/routing/Combos.js"
import { BatchWriter } from "../src/platform/store/BatchWriter.js"
import * as Db from "../src/platform/store/Db.js"
import { isBusy, isUniqueViolation } from "../src/platform/store/dialect.js"
import { KeyValue } from "../src/platform/store/KeyValue.js"
import { Secrets } from "../src/platform/store/Secrets.js"
import { makeCachedLoad, makeVersionedReload, polledVersion, StoreVersion } from "../src/platform/store/StoreVersion.js"
import { queryDb } from "./support/db.js"
import { call, localCore, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * Seam 3 of the architecture (docs/ARCHITECTURE.md, "Seam 3: the store dialect"): SQL outside
 * the dialect module stays portable between SQLite and PostgreSQL, and what moved behind the
 * dialect (upserts, usage time buckets, error classification, StoreVersion) behaves as before.
 */

const SRC = path.join(import.meta.dirname, "..", "src")

/** Where SQLite-only SQL may appear: the dialect, the SQLite module, its writer thread and the SQLite migration set. */
// postgres.ts and the PostgreSQL migration set are PostgreSQL's own (pg type OIDs read like `oid`).
const STORE = path.join("platform", "store")
const ALLOWED = [
  path.join(STORE, "dialect.ts"),
  path.join(STORE, "sqlite.ts"),
  path.join(STORE, "SqliteWriterThread.ts"),
  path.join(STORE, "migrations") + path.sep,
  path.join(STORE, "postgres.ts"),
  path.join(STORE, "migrations-pg") + path.sep,
  // Recorded client requests (scripts/compat-cases.mjs): data, whose prompts may say GLOB.
  path.join("services", "compat", "cases.generated.ts")
]

/** Constructs SQLite accepts and PostgreSQL does not (or means otherwise), and SQLite driver codes. */
const SQLITE_ONLY: ReadonlyArray<readonly [string, RegExp]> = [
  ["INSERT OR REPLACE / IGNORE", /\bINSERT\s+OR\s+(REPLACE|IGNORE|ABORT|FAIL|ROLLBACK)\b/i],
  ["REPLACE INTO", /\bREPLACE\s+INTO\b/i],
  ["strftime", /\bstrftime\s*\(/i],
  ["datetime()", /\bdatetime\s*\(/i],
  ["julianday", /\bjulianday\s*\(/i],
  ["unixepoch", /\bunixepoch\b/i],
  ["IFNULL", /\bIFNULL\s*\(/i],
  ["GLOB", /\bGLOB\b/i],
  ["COLLATE NOCASE", /\bCOLLATE\s+NOCASE\b/i],
  ["AUTOINCREMENT", /\bAUTOINCREMENT\b/i],
  ["rowid", /\b(rowid|_rowid_|oid)\b/i],
  ["LIMIT -1", /\bLIMIT\s+-1\b/i],
  ["PRAGMA", /\bPRAGMA\b/i],
  ["sqlite_ tables and functions", /\bsqlite_(master|schema|sequence|version)\b/i],
  ["last_insert_rowid / changes()", /\b(last_insert_rowid|total_changes)\s*\(/i],
  ["SQLite driver error codes", /\bSQLITE_[A-Z]+/],
  ["SQLSTATE codes", /["'](23505|40001|40P01|55P03)["']/]
]

const sourceFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name)
    return e.isDirectory() ? sourceFiles(full) : e.name.endsWith(".ts") ? [full] : []
  })

/** Block comments and whole-line comments go: prose may name what code may not use. */
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")

const findings = (file: string): Array<string> => {
  const lines = withoutComments(fs.readFileSync(file, "utf8")).split("\n")
  return lines.flatMap((line, i) =>
    SQLITE_ONLY.filter(([, re]) => re.test(line)).map(([what]) => `${path.relative(SRC, file)}:${i + 1}: ${what}: ${line.trim()}`)
  )
}

describe("the store dialect seam", () => {
  it("keeps SQLite-only SQL and driver codes out of src/ except the dialect, the SQLite module and the migrations", () => {
    const files = sourceFiles(SRC).filter((f) => !ALLOWED.some((a) => path.relative(SRC, f).startsWith(a)))
    expect(files.length).toBeGreaterThan(100)
    expect(files.flatMap(findings)).toEqual([])
  })

  it("the scan finds what it looks for (it runs over the files it lets through)", () => {
    // The SQLite module says PRAGMA; the dialect names SQLite and PostgreSQL codes.
    expect(findings(path.join(SRC, STORE, "sqlite.ts")).some((f) => f.includes("PRAGMA"))).toBe(true)
    const dialect = findings(path.join(SRC, STORE, "dialect.ts"))
    expect(dialect.some((f) => f.includes("SQLite driver error codes"))).toBe(true)
    expect(dialect.some((f) => f.includes("SQLSTATE codes"))).toBe(true)
    expect(findings(path.join(SRC, STORE, "migrations", "0001_init.ts")).some((f) => f.includes("COLLATE NOCASE"))).toBe(true)
  })
})

describe("error classification", () => {
  it("reads SQLite's unique violations and lock contention from real errors, wrapped as SqlError or not", () => {
    const dir = tempDir()
    const file = path.join(dir, "t.db")
    const a = new Database(file)
    const b = new Database(file, { timeout: 0 })
    try {
      a.exec("CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT NOT NULL)")
      a.exec("CREATE UNIQUE INDEX t_name ON t (lower(name))")
      a.prepare("INSERT INTO t VALUES ('1', 'Foo')").run()
      const caught = (f: () => unknown): unknown => {
        try {
          f()
        } catch (e) {
          return e
        }
        throw new Error("expected the statement to fail")
      }
      const byIndex = caught(() => a.prepare("INSERT INTO t VALUES ('2', 'foo')").run())
      const byKey = caught(() => a.prepare("INSERT INTO t VALUES ('1', 'bar')").run())
      a.exec("BEGIN IMMEDIATE")
      const busy = caught(() => b.prepare("INSERT INTO t VALUES ('3', 'baz')").run())
      a.exec("ROLLBACK")
      const notNull = caught(() => a.prepare("INSERT INTO t VALUES ('4', NULL)").run())

      for (const e of [byIndex, byKey]) {
        expect(isUniqueViolation(e)).toBe(true)
        expect(isUniqueViolation(new SqlError({ cause: e, message: "failed" }))).toBe(true)
        expect(isBusy(e)).toBe(false)
      }
      expect(isBusy(busy)).toBe(true)
      expect(isBusy(new SqlError({ cause: busy, message: "failed" }))).toBe(true)
      expect(isUniqueViolation(busy)).toBe(false)
      expect(isUniqueViolation(notNull)).toBe(false)
      expect(isBusy(notNull)).toBe(false)
    } finally {
      a.close()
      b.close()
    }
  })

  it("reads PostgreSQL's SQLSTATE codes as node-postgres reports them", () => {
    const pg = (code: string) => new SqlError({ cause: Object.assign(new Error("pg"), { code }), message: "failed" })
    expect(isUniqueViolation(pg("23505"))).toBe(true)
    expect(isUniqueViolation(pg("23502"))).toBe(false)
    for (const code of ["40001", "40P01", "55P03"]) expect(isBusy(pg(code))).toBe(true)
    expect(isBusy(pg("23505"))).toBe(false)
  })
})

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
const base = (dataDir: string) =>
  Layer.mergeAll(AppConfig.layerTest({ dataDir }), Layer.setConfigProvider(ConfigProvider.fromMap(new Map())), quiet)

/** A process's view of the file whose StoreVersion checks only every `intervalMs`. */
const versionAt = (dataDir: string, intervalMs: number) =>
  StoreVersion.layer(intervalMs).pipe(Layer.provideMerge(Db.layer), Layer.provide(base(dataDir)))

describe("StoreVersion over SQLite", () => {
  it("changes after another process commits, and is read without I/O while fresh", async () => {
    const dir = tempDir()
    await Effect.runPromise(Effect.provide(Effect.void, localCore(dir)))
    const program = Effect.gen(function* () {
      const version = yield* StoreVersion
      const before = yield* version.current
      // A second process on the same file commits.
      yield* Effect.provide(
        Effect.flatMap(KeyValue, (kv) => kv.set("dialect-test", "k", "v")),
        KeyValue.layer.pipe(Layer.provideMerge(Db.layer), Layer.provide(base(dir)))
      )
      return { before, after: yield* version.current, peek: version.peek() }
    })
    const eager = await Effect.runPromise(Effect.provide(program, versionAt(dir, 0)))
    expect(eager.after).not.toBe(eager.before)
    // A check is always due with no interval: peek never answers from memory.
    expect(eager.peek).toBeUndefined()

    const lazy = await Effect.runPromise(Effect.provide(program, versionAt(dir, 3_600_000)))
    // Within the interval the commit is not looked for: the number stays, and peek answers it.
    expect(lazy.after).toBe(lazy.before)
    expect(lazy.peek).toBe(lazy.before)
  })

  it("changed: this process replaced the data (a restore, an import), so every cache loads again, whatever the last check saw", async () => {
    let data = "before"
    let probes = 0
    const version = polledVersion(
      Effect.sync(() => ++probes && 7),
      3_600_000
    )
    const cache = makeCachedLoad(
      version,
      Effect.sync(() => data)
    )
    expect(await Effect.runPromise(cache.get)).toBe("before")
    // Replaced behind the cache, within the check interval: nothing would look again for an hour.
    data = "after"
    expect(await Effect.runPromise(cache.get)).toBe("before")
    await Effect.runPromise(version.changed)
    expect(await Effect.runPromise(cache.get)).toBe("after")
    expect(version.peek()).toBe(await Effect.runPromise(version.current))
  })

  it("a change seen just before the store went away: the cache serves what it holds, and loads again once the store is back", async () => {
    // A load as the store dies when the database server refuses the connection (node-postgres's ECONNREFUSED under an SqlError).
    const refused = () =>
      Effect.die(
        new SqlError({
          message: "Failed to acquire connection",
          cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })
        })
      )
    let data = "before"
    let down = false
    let loads = 0
    const version = polledVersion(
      Effect.sync(() => 1),
      3_600_000
    )
    const cache = makeCachedLoad(
      version,
      Effect.suspend(() => (++loads, down ? refused() : Effect.succeed(data)))
    )
    expect(await Effect.runPromise(cache.get)).toBe("before")
    // Another process committed (the notice came), then the database went away before the next read.
    data = "after"
    down = true
    await Effect.runPromise(version.changed)
    expect(await Effect.runPromise(cache.get)).toBe("before")
    // Within the next second the store is not asked again: every read answers from memory at once.
    const tried = loads
    expect(await Effect.runPromise(cache.get)).toBe("before")
    expect(loads).toBe(tried)
    // Before anything was loaded there is nothing to serve: the failure is the caller's.
    const empty = makeCachedLoad(version, refused())
    expect((await Effect.runPromiseExit(empty.get))._tag).toBe("Failure")
    // A failure that is not the store's (a bug, a bad row) is not hidden either.
    const broken = makeCachedLoad(
      version,
      Effect.suspend(() => (down ? Effect.die(new Error("a bad row")) : Effect.succeed(1)))
    )
    down = false
    expect(await Effect.runPromise(broken.get)).toBe(1)
    down = true
    await Effect.runPromise(version.changed)
    expect((await Effect.runPromiseExit(broken.get))._tag).toBe("Failure")
    // The store is back: the next read past the second loads what changed.
    down = false
    await new Promise((r) => setTimeout(r, 1_050))
    expect(await Effect.runPromise(cache.get)).toBe("after")

    // State reloaded whole (budgets, token limits): kept while the store cannot serve, reloaded once it can.
    let state = "before"
    let reloadDown = false
    const refresh = await Effect.runPromise(
      makeVersionedReload(
        Option.some(version),
        Effect.suspend(() => (reloadDown ? refused() : Effect.sync(() => void (state = data))))
      )
    )
    data = "later"
    reloadDown = true
    await Effect.runPromise(version.changed)
    await Effect.runPromise(refresh)
    expect(state).toBe("after")
    reloadDown = false
    await new Promise((r) => setTimeout(r, 1_050))
    await Effect.runPromise(refresh)
    expect(state).toBe("later")
  })
})

/** The server's Connections and Combos over a StoreVersion that will not look again for an hour. */
const staleServices = (dataDir: string) =>
  Layer.mergeAll(Connections.layer, Combos.layer).pipe(
    Layer.provide(FeatureFlags.layer),
    Layer.provide(AutoEngine.layer),
    Layer.provide(StoreVersion.layer(3_600_000)),
    Layer.provide(Layer.mergeAll(BatchWriter.layer, KeyValue.layer, Secrets.layer)),
    Layer.provide(Db.layer),
    Layer.provide(base(dataDir))
  )

describe("names are unique regardless of case", () => {
  it("in the database itself: a fresh schema declares lower(name) unique, and refuses 'foo' beside 'Foo'", async () => {
    const dir = tempDir()
    await Effect.runPromise(Effect.provide(Effect.void, localCore(dir)))
    const indexes = queryDb<{ name: string; sql: string }>(
      dir,
      "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name LIKE '%_name_key'"
    )
    expect(indexes.map((i) => i.name).sort()).toEqual(["combos_name_key", "connections_name_key"])
    for (const i of indexes) expect(i.sql).toMatch(/\(lower\(name\)\)/)
    const db = new Database(path.join(dir, Db.DB_FILENAME))
    try {
      db.prepare("INSERT INTO combos (id, name, strategy, created_at, updated_at) VALUES ('c1', 'Foo', 'priority', 0, 0)").run()
      expect(() =>
        db.prepare("INSERT INTO combos (id, name, strategy, created_at, updated_at) VALUES ('c2', 'foo', 'priority', 0, 0)").run()
      ).toThrow(/UNIQUE/)
      db.prepare("INSERT INTO connections (id, provider, name, created_at, updated_at) VALUES ('p1', 'openai', 'Foo', 0, 0)").run()
      expect(() =>
        db.prepare("INSERT INTO connections (id, provider, name, created_at, updated_at) VALUES ('p2', 'openai', 'FOO', 0, 0)").run()
      ).toThrow(/UNIQUE/)
    } finally {
      db.close()
    }
  })

  it("a name another process took in other case is a Conflict when this process's cache has not seen it yet", async () => {
    const dir = tempDir()
    const program = Effect.gen(function* () {
      const connections = yield* Connections
      const combos = yield* Combos
      // Both snapshots are loaded now, and not looked at again for an hour.
      expect(yield* connections.list).toEqual([])
      expect(yield* combos.list).toEqual([])
      yield* Effect.provide(
        Effect.gen(function* () {
          yield* (yield* Connections).create({ provider: "openai-compatible", name: "Shared", baseUrl: "http://127.0.0.1:9/v1" })
          yield* (yield* Combos).create({ name: "Team", strategy: "priority", targets: [{ model: "Shared/m1" }] })
        }),
        localCore(dir)
      )
      const connection = yield* Effect.flip(
        connections.create({ provider: "openai-compatible", name: "shared", baseUrl: "http://127.0.0.1:9/v1" })
      )
      const combo = yield* Effect.flip(combos.create({ name: "TEAM", strategy: "priority", targets: [{ model: "Shared/m1" }] }))
      return { connection, combo }
    })
    const { connection, combo } = await Effect.runPromise(Effect.provide(program, staleServices(dir)))
    expect(connection).toMatchObject({ _tag: "Conflict", message: "a provider connection named 'shared' already exists" })
    expect(combo).toMatchObject({ _tag: "Conflict", message: "a combo named 'TEAM' (or with that id) already exists" })
    expect(queryDb(dir, "SELECT name FROM connections").map((r) => r["name"])).toEqual(["Shared"])
    expect(queryDb(dir, "SELECT name FROM combos").map((r) => r["name"])).toEqual(["Team"])
  })
})

const ADMIN = "gwk_dialect_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

describe("through the management API", () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await startGateway()
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  })
  afterAll(() => gw.close())

  it("answers 409 for a connection or combo name taken in other case, by this process or another", async () => {
    const provider = (name: string) =>
      call(`${gw.url}/api/providers`, { body: { provider: "openai-compatible", name, baseUrl: "http://127.0.0.1:9/v1" }, headers: admin })
    const combo = (name: string) =>
      call(`${gw.url}/api/combos`, { body: { name, strategy: "priority", targets: [{ model: "Mixed/m1" }] }, headers: admin })
    expect((await provider("Mixed")).status).toBe(201)
    const dupProvider = await provider("mIXED")
    expect(dupProvider.status).toBe(409)
    expect(dupProvider.body).toMatchObject({ _tag: "Conflict" })
    expect(dupProvider.body.message).toContain("already exists")
    expect((await combo("Crew")).status).toBe(201)
    const dupCombo = await combo("crew")
    expect(dupCombo.status).toBe(409)
    expect(dupCombo.body.message).toContain("already")

    // Another process (the CLI) takes names a moment before the server is asked for them in other case.
    await Effect.runPromise(
      Effect.provide(
        Effect.gen(function* () {
          yield* (yield* Connections).create({ provider: "openai-compatible", name: "Raced", baseUrl: "http://127.0.0.1:9/v1" })
          yield* (yield* Combos).create({ name: "RacedCombo", strategy: "priority", targets: [{ model: "Raced/m1" }] })
        }),
        localCore(gw.dataDir)
      )
    )
    expect((await provider("raced")).status).toBe(409)
    expect((await combo("racedcombo")).status).toBe(409)
  })

  it("lists combos in name order regardless of case", async () => {
    for (const name of ["b-order", "A-order", "c-order"]) {
      expect(
        (await call(`${gw.url}/api/combos`, { body: { name, strategy: "priority", targets: [{ model: "Mixed/m1" }] }, headers: admin }))
          .status
      ).toBe(201)
    }
    const listed = (await call(`${gw.url}/api/combos`, { headers: admin })).body
    const names: Array<string> = listed.combos.map((c: { name: string }) => c.name).filter((n: string) => n.endsWith("-order"))
    expect(names).toEqual(["A-order", "b-order", "c-order"])
  })

  it("replaces a price override whole when it is set again", async () => {
    const set = (body: Record<string, unknown>) =>
      call(`${gw.url}/api/pricing`, { method: "PUT", body: { provider: "openai", model: "dialect-model", ...body }, headers: admin })
    expect((await set({ input: 1, output: 2, cachedInput: 0.5, perImage: 0.01 })).status).toBe(200)
    const again = await set({ input: 3, output: 4 })
    expect(again.status).toBe(200)
    expect(again.body).toMatchObject({ input: 3, output: 4, cachedInput: null, perImage: null, source: "override" })
    const listed = (await call(`${gw.url}/api/pricing`, { headers: admin })).body.prices.filter(
      (p: { model: string }) => p.model === "dialect-model"
    )
    expect(listed).toEqual([expect.objectContaining({ provider: "openai", input: 3, output: 4, cachedInput: null, perImage: null })])
    expect(
      queryDb(gw.dataDir, "SELECT input, output, cached_input, per_image FROM pricing_overrides WHERE model = 'dialect-model'")
    ).toEqual([{ input: 3, output: 4, cached_input: null, per_image: null }])
  })

  it("replaces a cache entry by key, whether the writes share a batch or not", async () => {
    const put = (body: string) =>
      gw.run(
        Effect.flatMap(ResponseCache, (c) =>
          c.put({ key: "dialect-key", model: "m", format: "openai-chat", body, usage: null, costUsd: 0, provider: "openai" })
        )
      )
    const flush = () => gw.usageWritten()
    // Queued together: one batch, one statement with the key twice.
    await put("first")
    await put("second")
    await flush()
    expect(queryDb(gw.dataDir, "SELECT body FROM cache_entries WHERE key = 'dialect-key'")).toEqual([{ body: "second" }])
    await put("third")
    await flush()
    expect(queryDb(gw.dataDir, "SELECT body FROM cache_entries WHERE key = 'dialect-key'")).toEqual([{ body: "third" }])
    // The count of deleted rows comes from the driver's result.
    const cleared = await gw.run(Effect.flatMap(ResponseCache, (c) => c.clear))
    expect(cleared.db).toBe(1)
  })

  it("buckets usage by hour and day in UTC, with the labels and counts the strftime buckets gave", async () => {
    const times = [
      "2024-02-29T12:34:56.789Z",
      "2024-03-05T07:00:00.000Z",
      "2024-03-05T07:59:59.999Z",
      "2024-03-05T08:00:00.000Z",
      "2024-03-05T23:59:59.999Z",
      "2024-03-06T00:00:00.000Z"
    ].map((t) => Date.parse(t))
    await gw.run(
      Effect.flatMap(BatchWriter, (w) =>
        Effect.zipRight(
          Effect.sync(() =>
            times.forEach((ts, i) =>
              w.append("usage", { ts, request_id: `dialect-${i}`, endpoint: "chat.completions", stream: 0, status: 200, tokens_in: i + 1 })
            )
          ),
          w.flush
        )
      )
    )
    const range = `from=${Date.parse("2024-02-29T00:00:00Z")}&to=${Date.parse("2024-03-07T00:00:00Z")}`
    const history = async (groupBy: string) => {
      const res = await call(`${gw.url}/api/usage/history?groupBy=${groupBy}&${range}`, { headers: admin })
      expect(res.status).toBe(200)
      return (res.body.rows as Array<{ key: string; requests: number; tokensIn: number }>).map((r) => [r.key, r.requests, r.tokensIn])
    }
    const hours = await history("hour")
    expect(hours).toEqual([
      ["2024-02-29T12:00:00Z", 1, 1],
      ["2024-03-05T07:00:00Z", 2, 5],
      ["2024-03-05T08:00:00Z", 1, 4],
      ["2024-03-05T23:00:00Z", 1, 5],
      ["2024-03-06T00:00:00Z", 1, 6]
    ])
    const days = await history("day")
    expect(days).toEqual([
      ["2024-02-29", 1, 1],
      ["2024-03-05", 4, 14],
      ["2024-03-06", 1, 6]
    ])
    // The same rows through the SQLite expressions the buckets used to be.
    const bucketsOf = (format: string) =>
      queryDb<{ k: string; n: number; t: number }>(
        gw.dataDir,
        `SELECT strftime('${format}', ts / 1000, 'unixepoch') AS k, COUNT(*) AS n, SUM(tokens_in) AS t FROM usage WHERE request_id LIKE 'dialect-%' GROUP BY 1 ORDER BY 1`
      ).map((r) => [r.k, r.n, r.t])
    expect(hours).toEqual(bucketsOf("%Y-%m-%dT%H:00:00Z"))
    expect(days).toEqual(bucketsOf("%Y-%m-%d"))
  })
})
