import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as path from "node:path"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { makeKeyUsage } from "../src/services/auth/apiKeyUsage.js"
import { StoreHealth } from "../src/platform/store/StoreHealth.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { StoreLive } from "../src/platform/store/StoreLive.js"
import { toIso } from "../src/platform/store/Db.js"
import { BatchWriter, MAX_BATCH } from "../src/platform/store/BatchWriter.js"
import { Secrets } from "../src/platform/store/Secrets.js"
import { StoreVersion } from "../src/platform/store/StoreVersion.js"
import Database from "better-sqlite3"
import { queryDb } from "./support/db.js"
import { localCore, tempDir } from "./support/gateway.js"

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

const storeAt = (dataDir: string, env: Record<string, string> = {}) =>
  StoreLive.pipe(
    Layer.provide(AppConfig.layerTest({ dataDir })),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
    Layer.provide(quiet)
  )

/** The store's layers in a scope of their own (closed by the test: the shutdown), and its batch writer. */
const writerIn = (dataDir: string) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(storeAt(dataDir), scope)
    const writer = Option.getOrThrow(Effect.runSync(Effect.serviceOption(BatchWriter).pipe(Effect.provide(context))))
    return { scope, writer }
  })

const countUsage = (dataDir: string) => queryDb<{ n: number }>(dataDir, "SELECT count(*) AS n FROM usage")[0]!.n

const usageRow = (i: number) => ({ ts: Date.now(), request_id: `r${i}`, endpoint: "chat.completions", stream: 0, status: 200 })

describe("database", () => {
  it.effect("is migrated, in WAL mode, with a busy timeout", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const tables = (yield* sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).map((r) => r.name)
      expect(tables).toEqual(
        expect.arrayContaining(["kv", "api_keys", "admin_sessions", "connections", "usage", "audit_log", "combos", "schema_migrations"])
      )
      expect((yield* sql<{ journal_mode: string }>`PRAGMA journal_mode`)[0]!.journal_mode).toBe("wal")
      expect((yield* sql<{ timeout: number }>`PRAGMA busy_timeout`)[0]!.timeout).toBe(5000)
      const migrations = yield* sql<{ migration_id: number; name: string }>`SELECT migration_id, name FROM schema_migrations`
      expect(migrations.map((m) => `${m.migration_id}_${m.name}`)).toEqual([
        "1_init",
        "2_upstream_format",
        "3_combos",
        "4_accounting",
        "5_connection_timeouts",
        "6_usage_inflight",
        "7_name_keys",
        "8_media_jobs",
        "9_files_batches",
        "10_native_batches",
        "11_oauth_tokens",
        "12_cloud_bundles",
        "13_governance",
        "14_key_rate_limits",
        "15_webhooks",
        "16_proxies",
        "17_file_chunks",
        "18_context",
        "19_shadow",
        "20_key_shadow",
        "21_store_changes",
        "22_connection_tls_profile",
        "23_mcp_servers",
        "24_mcp_oauth",
        "25_teams",
        "26_level_limits",
        "27_oidc",
        "28_key_queue_wait",
        "29_key_last_used_hint"
      ])
    }).pipe(Effect.provide(storeAt(tempDir())))
  )

  it.effect("applies migrations once: a second start on the same file changes nothing", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* Effect.provide(Effect.void, storeAt(dir))
      const again = yield* Effect.provide(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*) AS n FROM schema_migrations`),
        storeAt(dir)
      )
      expect(again[0]!.n).toBe(29)
    })
  )
})

describe("toIso", () => {
  it("renders epoch ms, and gives null for none or for a time that is not one (never throws)", () => {
    expect(toIso(0)).toBe("1970-01-01T00:00:00.000Z")
    expect(toIso(null)).toBeNull()
    expect(toIso(undefined)).toBeNull()
    expect(toIso(Number.NaN)).toBeNull()
    expect(toIso(Number.POSITIVE_INFINITY)).toBeNull()
    expect(toIso(9e15)).toBeNull()
  })
})

describe("BatchWriter", () => {
  it.live("writes queued rows in the background", () =>
    Effect.gen(function* () {
      const writer = yield* BatchWriter
      const sql = yield* SqlClient.SqlClient
      for (let i = 0; i < 1200; i++) writer.append("usage", usageRow(i))
      yield* writer.flush
      expect((yield* sql<{ n: number }>`SELECT count(*) AS n FROM usage`)[0]!.n).toBe(1200)
      expect(yield* writer.pending).toBe(0)
    }).pipe(Effect.provide(storeAt(tempDir())))
  )

  // The test clock stands still at first, so a linger cannot end: only a full batch can be written.
  // A backlog must go out back to back, or a kill -9 after a burst loses a linger per 500 rows.
  it.effect("writes full batches at once, without lingering for more rows", () =>
    Effect.gen(function* () {
      const writer = yield* BatchWriter
      const sql = yield* SqlClient.SqlClient
      const count = Effect.map(sql<{ n: number }>`SELECT count(*) AS n FROM usage`, (r) => r[0]!.n)
      for (let i = 0; i < 3 * MAX_BATCH; i++) writer.append("usage", usageRow(i))
      // The writer thread commits in real time: wait for it on the wall clock (the test clock stands still).
      const wall = Effect.promise(() => new Promise((r) => setTimeout(r, 10)))
      for (let i = 0; i < 300 && (yield* count) < 3 * MAX_BATCH; i++) yield* wall
      const burst = yield* count
      // A partial batch still lingers for company, and is written when the linger ends.
      writer.append("usage", usageRow(-1))
      const lingering = yield* count
      for (let i = 0; i < 300 && (yield* count) < 3 * MAX_BATCH + 1; i++) yield* Effect.zipRight(TestClock.adjust("10 millis"), wall)
      expect(burst).toBe(3 * MAX_BATCH)
      expect(lingering).toBe(3 * MAX_BATCH)
      expect(yield* count).toBe(3 * MAX_BATCH + 1)
    }).pipe(Effect.provide(storeAt(tempDir())))
  )

  it.live("writes everything still queued when its scope closes (shutdown)", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const { scope, writer } = yield* writerIn(dir)
      for (let i = 0; i < 5000; i++) writer.append("usage", usageRow(i))
      yield* Scope.close(scope, Exit.void)
      expect(countUsage(dir)).toBe(5000)
    })
  )

  it.live("keeps good rows when one row of a batch cannot be written", () =>
    Effect.gen(function* () {
      const writer = yield* BatchWriter
      const sql = yield* SqlClient.SqlClient
      writer.append("usage", usageRow(1))
      writer.append("usage", { ts: Date.now(), request_id: "bad" } as never) // violates NOT NULL
      writer.append("usage", usageRow(3))
      yield* writer.flush
      const ids = (yield* sql<{ request_id: string }>`SELECT request_id FROM usage ORDER BY id`).map((r) => r.request_id)
      expect(ids).toEqual(["r1", "r3"])
    }).pipe(Effect.provide(storeAt(tempDir())))
  )
})

describe("BatchWriter on a SQLite file: the writer thread", () => {
  const dataVersion = Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ data_version: number }>`PRAGMA data_version`, (r) => r[0]!.data_version)
  )

  // PRAGMA data_version moves on a connection only when another connection commits: rows the
  // main connection wrote would leave it where it was.
  it.live(
    "commits the rows on its own connection, and StoreVersion does not take them for another process's",
    () =>
      Effect.gen(function* () {
        const writer = yield* BatchWriter
        const version = yield* StoreVersion
        const before = yield* dataVersion
        const seen = yield* version.current
        for (let i = 0; i < 50; i++) writer.append("usage", usageRow(i))
        yield* writer.flush
        expect(yield* dataVersion).not.toBe(before)
        yield* Effect.sleep("1100 millis")
        expect(yield* version.current).toBe(seen)
      }).pipe(Effect.provide(storeAt(tempDir()))),
    { timeout: 10_000 }
  )

  /** Another connection holding the file's write lock: the thread's batches wait out the busy timeout, then the store is unavailable. */
  const lockWrites = (dir: string) => {
    const db = new Database(path.join(dir, "gateway.db"))
    db.pragma("busy_timeout = 10000")
    db.exec("BEGIN IMMEDIATE")
    return () => {
      db.exec("ROLLBACK")
      db.close()
    }
  }
  const wall = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))
  /** A writer on a fresh file with rows [0, `written`) on disk, then the file locked and rows [`written`, `to`) appended. */
  const lockedAfter = (written: number, to: number) =>
    Effect.gen(function* () {
      const dir = tempDir()
      const { scope, writer } = yield* writerIn(dir)
      for (let i = 0; i < written; i++) writer.append("usage", usageRow(i))
      yield* writer.flush
      const unlock = lockWrites(dir)
      for (let i = written; i < to; i++) writer.append("usage", usageRow(i))
      return { dir, scope, writer, unlock }
    })
  const distinctUsage = (dir: string) =>
    queryDb<{ n: number; d: number }>(dir, "SELECT count(*) AS n, count(DISTINCT request_id) AS d FROM usage")[0]!

  // The usual batch is answered without a fiber; one the store could not take goes on to the
  // retries. Every row is written once when the lock goes: none lost, none twice.
  it.live(
    "holds a batch the store could not take (its file locked past the busy timeout) and writes it once, when the lock goes",
    () =>
      Effect.gen(function* () {
        const { dir, scope, writer, unlock } = yield* lockedAfter(10, 40)
        // Past the thread's busy timeout (5 s): the batch is held, not dropped.
        yield* wall(6_000)
        const held = yield* writer.pending
        const whileLocked = distinctUsage(dir).n
        unlock()
        yield* writer.flush
        for (let i = 0; i < 100 && (yield* writer.pending) > 0; i++) yield* wall(50)
        expect(held).toBe(30)
        expect(whileLocked).toBe(10)
        expect(distinctUsage(dir)).toEqual({ n: 40, d: 40 })
        yield* Scope.close(scope, Exit.void)
        expect(distinctUsage(dir)).toEqual({ n: 40, d: 40 })
      }),
    { timeout: 30_000 }
  )

  it.live(
    "at shutdown during the lock, writes the held batch once the lock goes within the final drain's grace",
    () =>
      Effect.gen(function* () {
        const { dir, scope, unlock } = yield* lockedAfter(1, 25)
        yield* wall(100)
        // The close waits for the batch on the thread (the busy timeout), then retries in its grace.
        const closing = Effect.runFork(Scope.close(scope, Exit.void))
        yield* wall(6_500)
        unlock()
        yield* closing.await
        expect(distinctUsage(dir)).toEqual({ n: 25, d: 25 })
      }),
    { timeout: 30_000 }
  )

  it.live("writes blobs and replaces cache entries by key, the last write winning", () =>
    Effect.gen(function* () {
      const writer = yield* BatchWriter
      const sql = yield* SqlClient.SqlClient
      const entry = (body: string) => ({
        key: "k1",
        model: "m",
        format: "openai",
        body,
        usage: null,
        cost_usd: 0,
        provider: null,
        embedding: new Uint8Array([1, 2, 3, 255]),
        created_at: Date.now(),
        expires_at: Date.now() + 60_000
      })
      writer.append("cache_entries", entry("first"))
      writer.append("cache_entries", entry("second"))
      yield* writer.flush
      writer.append("cache_entries", entry("third"))
      yield* writer.flush
      const rows = yield* sql<{ body: string; embedding: Uint8Array }>`SELECT body, embedding FROM cache_entries`
      expect(rows.map((r) => r.body)).toEqual(["third"])
      expect(Array.from(rows[0]!.embedding)).toEqual([1, 2, 3, 255])
    }).pipe(Effect.provide(storeAt(tempDir())))
  )
})

describe("Secrets", () => {
  it.effect("generates a 0600 key file once and round-trips secrets", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const first = yield* Effect.provide(Secrets, storeAt(dir))
      const file = path.join(dir, "storage.key")
      expect(fs.statSync(file).mode & 0o777).toBe(0o600)
      const keyText = fs.readFileSync(file, "utf8")
      const stored = first.encrypt("sk-provider-secret")
      expect(stored).toMatch(/^v1:/)
      expect(stored).not.toContain("sk-provider-secret")
      expect(first.encrypt("sk-provider-secret")).not.toBe(stored)
      const second = yield* Effect.provide(Secrets, storeAt(dir))
      expect(fs.readFileSync(file, "utf8")).toBe(keyText)
      expect(Redacted.value(yield* second.decrypt(stored))).toBe("sk-provider-secret")
      expect(second.source).toBe("file")
    })
  )

  it.effect("uses STORAGE_ENCRYPTION_KEY when set, and fails cleanly with the wrong key", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const a = yield* Effect.provide(Secrets, storeAt(dir, { STORAGE_ENCRYPTION_KEY: "a long passphrase for the store" }))
      expect(a.source).toBe("env")
      expect(fs.existsSync(path.join(dir, "storage.key"))).toBe(false)
      const stored = a.encrypt("token")
      const b = yield* Effect.provide(Secrets, storeAt(dir, { STORAGE_ENCRYPTION_KEY: "another passphrase" }))
      const result = yield* Effect.either(b.decrypt(stored))
      expect(result._tag).toBe("Left")
      const hex = yield* Effect.provide(Secrets, storeAt(dir, { STORAGE_ENCRYPTION_KEY: "ab".repeat(32) }))
      expect(Redacted.value(yield* hex.decrypt(hex.encrypt("x")))).toBe("x")
    })
  )
})

describe("caches across processes", () => {
  it.live(
    "a key added by another process (the CLI) is accepted within about a second",
    () =>
      Effect.gen(function* () {
        const dir = tempDir()
        const serverScope = yield* Scope.make()
        const server = yield* Layer.buildWithScope(localCore(dir), serverScope)
        const serverKeys = yield* Effect.provide(ApiKeys, server)
        expect(Option.isNone(yield* serverKeys.verify("gwk_from_the_cli_0123456789"))).toBe(true)

        // A second, independent stack on the same file plays the CLI.
        yield* Effect.provide(
          Effect.flatMap(ApiKeys, (k) => k.create({ name: "cli" }, { secret: "gwk_from_the_cli_0123456789" })),
          localCore(dir)
        )
        yield* Effect.sleep("1100 millis")
        expect(Option.isSome(yield* serverKeys.verify("gwk_from_the_cli_0123456789"))).toBe(true)
        yield* Scope.close(serverScope, Exit.void)
      }),
    { timeout: 10_000 }
  )
})

/**
 * A key's last-used time is a hint written every 30 s while the key is used (apiKeyUsage.ts): its
 * write is not a change of a cached table (migration 0029), so it does not make every cache of every
 * process load again; the keys' listing reads it from the database.
 */
describe("a key's last-used time", () => {
  const changes = (sql: SqlClient.SqlClient) => Effect.map(sql<{ n: number }>`SELECT n FROM store_changes WHERE id = 1`, (r) => r[0]!.n)
  /** The store, the keys and a key of them named `name`. */
  const aKey = (name: string) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const keys = yield* ApiKeys
      return { sql, keys, key: yield* keys.create({ name }) }
    })
  const written = (sql: SqlClient.SqlClient, id: string) =>
    Effect.map(sql<{ t: number | null }>`SELECT last_used_at AS t FROM api_keys WHERE id = ${id}`, (r) => r[0]!.t)

  it.effect("moves no store version; a change of anything else about the key does", () =>
    Effect.gen(function* () {
      const { sql, key } = yield* aKey("hinted")
      const before = yield* changes(sql)
      yield* sql`UPDATE api_keys SET last_used_at = ${Date.now()} WHERE id = ${key.id}`
      expect(yield* changes(sql)).toBe(before)
      yield* sql`UPDATE api_keys SET name = 'renamed' WHERE id = ${key.id}`
      expect(yield* changes(sql)).toBe(before + 1)
      yield* sql`UPDATE api_keys SET enabled = 0, last_used_at = ${Date.now()} WHERE id = ${key.id}`
      expect(yield* changes(sql)).toBe(before + 2)
    }).pipe(Effect.provide(localCore(tempDir())))
  )

  it.effect("the update trigger names every column of api_keys but last_used_at (a migration adding one makes it again)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const columns = (yield* sql<{ name: string }>`PRAGMA table_info(api_keys)`).map((c) => c.name)
      const trigger = (yield* sql<{
        sql: string
      }>`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'api_keys_changed_update'`)[0]!.sql
      const named = /UPDATE OF (.+?) ON api_keys/
        .exec(trigger)![1]!
        .split(",")
        .map((c) => c.trim())
      expect(named.sort()).toEqual(columns.filter((c) => c !== "last_used_at").sort())
    }).pipe(Effect.provide(storeAt(tempDir())))
  )

  it.effect("is never written back in time: a later use another process wrote stays", () =>
    Effect.gen(function* () {
      const { sql, key } = yield* aKey("two-processes")
      const { touched, flushTouched } = makeKeyUsage({ sql, health: yield* StoreHealth })
      const later = Date.parse("2026-11-30T12:00:00.000Z")
      yield* sql`UPDATE api_keys SET last_used_at = ${later} WHERE id = ${key.id}`
      touched.set(key.id, later - 60_000)
      yield* flushTouched
      expect(yield* written(sql, key.id)).toBe(later)
      touched.set(key.id, later + 60_000)
      yield* flushTouched
      expect(yield* written(sql, key.id)).toBe(later + 60_000)
    }).pipe(Effect.provide(localCore(tempDir())))
  )

  it.effect("is listed as written by another process, the keys in memory not loaded again", () =>
    Effect.gen(function* () {
      const { sql, keys, key } = yield* aKey("elsewhere")
      expect((yield* keys.list).find((k) => k.id === key.id)!.lastUsedAt).toBeNull()
      const at = Date.parse("2026-11-30T12:00:00.000Z")
      yield* sql`UPDATE api_keys SET last_used_at = ${at} WHERE id = ${key.id}`
      expect((yield* keys.list).find((k) => k.id === key.id)!.lastUsedAt).toBe("2026-11-30T12:00:00.000Z")
      const updated = yield* keys.update(key.id, { name: "elsewhere-2" })
      expect(updated.lastUsedAt).toBe("2026-11-30T12:00:00.000Z")
      const removed = yield* keys.remove(key.id)
      expect(removed.lastUsedAt).toBe("2026-11-30T12:00:00.000Z")
    }).pipe(Effect.provide(localCore(tempDir())))
  )
})
