import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as ConfigProvider from "effect/ConfigProvider"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { AppConfig } from "../../src/platform/config/AppConfig.js"
import * as Db from "../../src/platform/store/Db.js"
import { BatchWriter } from "../../src/platform/store/BatchWriter.js"
import { migrateToPostgres } from "../../src/cli/migrateToPostgres.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { call, localCore, startGateway, tempDir } from "../support/gateway.js"
import { createTestDatabase, dropTestDatabase, maintenanceUrl, withClient } from "../support/pgStore.js"
import { CHANGE_CHANNEL } from "../../src/platform/store/migrations-pg/notify.js"

/**
 * The PostgreSQL store (docs/scale-out.md, "PostgreSQL"): the migration sets in step, DATABASE_URL
 * checked at start, caches of two processes on one database within a second, backups refused,
 * and `gateway db migrate-to-postgres` moving a database that served traffic. Needs
 * GATEWAY_TEST_DATABASE_URL (a server on which the test may CREATE DATABASE).
 */
let maintenance: string
const made: Array<string> = []
const database = async () => {
  const url = await createTestDatabase(maintenance)
  made.push(url)
  return url
}
const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

beforeAll(() => {
  maintenance = maintenanceUrl()
})
afterAll(async () => {
  for (const url of made) await dropTestDatabase(url, maintenance).catch(() => undefined)
})

/** The store of `dataDir` (and DATABASE_URL when given), migrated, then released. */
const migrated = (dataDir: string, env: Record<string, string> = {}) =>
  Effect.runPromise(
    Effect.scoped(
      Layer.build(
        Db.layer.pipe(
          Layer.provide(AppConfig.layerTest({ dataDir })),
          Layer.provide(quiet),
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
        )
      )
    )
  )

describe("the two migration sets", () => {
  it("make the same tables, columns, indexes and schema_migrations rows", async () => {
    const dir = tempDir()
    await migrated(dir)
    const url = await database()
    await migrated(tempDir(), { DATABASE_URL: url })

    const lite = new Database(path.join(dir, "gateway.db"), { readonly: true })
    const liteTables: Record<string, Array<string>> = {}
    for (const { name } of lite
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .all() as Array<{ name: string }>) {
      liteTables[name] = (lite.prepare(`PRAGMA table_info("${name}")`).all() as Array<{ name: string }>).map((c) => c.name).sort()
    }
    // Explicit indexes (SQLite's own for UNIQUE and PRIMARY KEY have no SQL).
    const liteIndexes = (
      lite.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name").all() as Array<{ name: string }>
    ).map((r) => r.name)
    const liteMigrations = lite.prepare("SELECT migration_id, name FROM schema_migrations ORDER BY migration_id").all()
    lite.close()

    const pg = await withClient(url, async (c) => {
      const cols = await c.query(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, column_name"
      )
      const tables: Record<string, Array<string>> = {}
      for (const r of cols.rows) (tables[String(r.table_name)] ??= []).push(String(r.column_name))
      for (const t of Object.values(tables)) t.sort()
      // Indexes that are not a primary key or a UNIQUE constraint's.
      const idx = await c.query(
        "SELECT i.indexname AS name FROM pg_indexes i WHERE i.schemaname = current_schema() AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conname = i.indexname) ORDER BY 1"
      )
      const migrations = await c.query("SELECT migration_id, name FROM schema_migrations ORDER BY migration_id")
      return {
        tables,
        indexes: idx.rows.map((r) => String(r.name)),
        migrations: migrations.rows.map((r) => ({ migration_id: Number(r.migration_id), name: r.name }))
      }
    })
    expect(Object.keys(liteTables).length).toBeGreaterThan(20)
    expect(pg.tables).toEqual(liteTables)
    expect(pg.indexes).toEqual(liteIndexes)
    expect(pg.migrations).toEqual(liteMigrations)
    expect(pg.migrations).toHaveLength(29)
  })
})

describe("DATABASE_URL", () => {
  it("that is not a PostgreSQL URL stops the start with a message naming it, the password masked", async () => {
    const err = await startGateway({ env: { DATABASE_URL: "mysql://app:hunter2secret@127.0.0.1/gw" } }).then(
      () => undefined,
      (e: unknown) => String(e)
    )
    expect(err).toContain("DATABASE_URL must start with postgres:// or postgresql://")
    expect(err).not.toContain("hunter2secret")
  })

  it("whose server cannot be reached stops the start naming DATABASE_URL, the password masked", async () => {
    const err = await startGateway({ env: { DATABASE_URL: "postgres://gateway:hunter2secret@127.0.0.1:1/nowhere" } }).then(
      () => undefined,
      (e: unknown) => String(e)
    )
    expect(err).toContain("cannot connect to the PostgreSQL database of DATABASE_URL (postgres://gateway:***@127.0.0.1:1/nowhere)")
    expect(err).not.toContain("hunter2secret")
  })
})

describe("two processes on one database", () => {
  it("both start when they start together on an empty database (the migrations run once)", async () => {
    const url = await database()
    // Gateways on one database share the storage key (src/platform/store/keyCheck.ts refuses a different one).
    const env = { DATABASE_URL: url, STORAGE_ENCRYPTION_KEY: "store.pg test key" }
    const [a, b] = await Promise.all([startGateway({ env }), startGateway({ env })])
    try {
      expect((await call(`${a.url}/api/health/ping`)).status).toBe(200)
      expect((await call(`${b.url}/api/health/ping`)).status).toBe(200)
      const rows = await withClient(url, (c) => c.query("SELECT count(*) AS n FROM schema_migrations"))
      expect(Number(rows.rows[0]!.n)).toBe(29)
    } finally {
      await a.close()
      await b.close()
    }
  }, 30_000)

  it("a key added by one is accepted by the other within a second (LISTEN/NOTIFY)", async () => {
    const url = await database()
    const env = { DATABASE_URL: url }
    await Effect.runPromise(
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const server = yield* Layer.buildWithScope(localCore(tempDir(), env), scope)
        const serverKeys = yield* Effect.provide(ApiKeys, server)
        const secret = "gwk_from_the_other_process_0123456789"
        expect(Option.isNone(yield* serverKeys.verify(secret))).toBe(true)
        yield* Effect.provide(
          Effect.flatMap(ApiKeys, (k) => k.create({ name: "other" }, { secret })),
          localCore(tempDir(), env)
        )
        const start = Date.now()
        let seen = false
        while (!seen && Date.now() - start < 3000) {
          seen = Option.isSome(yield* serverKeys.verify(secret))
          if (!seen) yield* Effect.sleep("20 millis")
        }
        expect(seen).toBe(true)
        expect(Date.now() - start).toBeLessThan(1000)
        yield* Scope.close(scope, Exit.void)
      })
    )
  }, 20_000)
})

/**
 * A key's last-used time is a hint written every 30 s while the key is used: its write notifies
 * no other process (migration 0029), which would load every cache again; any other change of a key
 * still does. Heard on the change channel itself.
 */
describe("a key's last-used time on PostgreSQL", () => {
  it("notifies no other process when written; a change of anything else about the key does", async () => {
    const url = await database()
    const created = await Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(Layer.build(localCore(tempDir(), { DATABASE_URL: url })), (ctx) =>
          Effect.provide(
            Effect.flatMap(ApiKeys, (k) => k.create({ name: "hinted" })),
            ctx
          )
        )
      )
    )
    await withClient(url, async (listener) => {
      const heard: Array<string> = []
      ;(listener as unknown as { on(event: "notification", f: (m: { payload?: string }) => void): void }).on("notification", (m) =>
        heard.push(String(m.payload))
      )
      await listener.query(`LISTEN ${CHANGE_CHANNEL}`)
      // What the statements before it notified: a marker sent after them arrives after theirs
      // (notifications are delivered in the order their transactions commit).
      const heardBy = async (c: { query(text: string, values?: Array<unknown>): Promise<unknown> }) => {
        await c.query("SELECT pg_notify($1, 'marker')", [CHANGE_CHANNEL])
        const end = Date.now() + 5_000
        while (!heard.includes("marker") && Date.now() < end) await new Promise((r) => setTimeout(r, 10))
        expect(heard.at(-1)).toBe("marker")
        heard.pop()
        return [...heard]
      }
      await withClient(url, async (c) => {
        await c.query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2", [Date.now(), created.id])
        expect(await heardBy(c)).toEqual([])
        await c.query("UPDATE api_keys SET name = 'renamed' WHERE id = $1", [created.id])
        expect(await heardBy(c)).toEqual(["api_keys"])
        await c.query("UPDATE api_keys SET enabled = 0, last_used_at = $1 WHERE id = $2", [Date.now(), created.id])
        await c.query("DELETE FROM api_keys WHERE id = $1", [created.id])
        expect(await heardBy(c)).toEqual(["api_keys", "api_keys", "api_keys"])
        // The update trigger names every column but last_used_at (a migration adding one makes it again).
        const named = await c.query(
          "SELECT event_object_column AS c FROM information_schema.triggered_update_columns WHERE trigger_name = 'api_keys_notify_update' ORDER BY 1"
        )
        const columns = await c.query(
          "SELECT column_name AS c FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'api_keys' AND column_name <> 'last_used_at' ORDER BY 1"
        )
        expect(named.rows.map((r) => r.c)).toEqual(columns.rows.map((r) => r.c))
      })
    })
  }, 20_000)
})

describe("the change listener", () => {
  it("reconnects after its connection is killed, and changes made meanwhile are then seen", async () => {
    const url = await database()
    const env = { DATABASE_URL: url }
    const dbName = new URL(url).pathname.slice(1)
    await Effect.runPromise(
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const server = yield* Layer.buildWithScope(localCore(tempDir(), env), scope)
        const serverKeys = yield* Effect.provide(ApiKeys, server)
        const secret = "gwk_added_while_not_listening_012345"
        expect(Option.isNone(yield* serverKeys.verify(secret))).toBe(true)
        const killed = yield* Effect.promise(() =>
          withClient(maintenance, (c) =>
            c.query(
              "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = $1 AND application_name = 'gateway-listen'",
              [dbName]
            )
          )
        )
        expect(killed.rows.length).toBe(1)
        yield* Effect.provide(
          Effect.flatMap(ApiKeys, (k) => k.create({ name: "other" }, { secret })),
          localCore(tempDir(), env)
        )
        const start = Date.now()
        let seen = false
        while (!seen && Date.now() - start < 5000) {
          seen = Option.isSome(yield* serverKeys.verify(secret))
          if (!seen) yield* Effect.sleep("50 millis")
        }
        expect(seen).toBe(true)
        expect(Date.now() - start).toBeLessThan(2000)
        yield* Scope.close(scope, Exit.void)
      })
    )
  }, 20_000)
})

describe("backups on PostgreSQL", () => {
  it("answer 409 saying to use pg_dump", async () => {
    const gw = await startGateway({ env: { DATABASE_URL: await database() } })
    try {
      const admin = "gwk_pg_backups_admin_0123456789abcdef"
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: admin })))
      const headers = { authorization: `Bearer ${admin}` }
      for (const [method, route] of [
        ["GET", "/api/db-backups"],
        ["PUT", "/api/db-backups"],
        ["GET", "/api/db-backups/export"],
        ["GET", "/api/db-backups/exportAll"]
      ] as const) {
        const res = await call(`${gw.url}${route}`, { method, headers })
        expect(res.status, `${method} ${route}`).toBe(409)
        expect(res.body.message).toMatch(/^backups_unavailable: .*pg_dump/)
      }
    } finally {
      await gw.close()
    }
  })
})

describe("gateway db migrate-to-postgres", () => {
  let up: FakeUpstream
  beforeAll(async () => {
    up = await FakeUpstream.start()
  })
  afterAll(async () => {
    await up?.close()
  })

  it("moves a database that served traffic: a gateway on PostgreSQL then has the same keys, providers and usage", async () => {
    const FILE_LINE = '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"oai/gpt-4o","messages":[]}}\n'
    let fileId = ""
    const ADMIN = "gwk_migrate_admin_key_0123456789abcd"
    const USER = "gwk_migrate_user_key_0123456789abcde"
    const dataDir = tempDir()
    const lite = await startGateway({ dataDir, env: {} })
    const headers = { authorization: `Bearer ${ADMIN}` }
    const requestIds: Array<string> = []
    try {
      await lite.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      await lite.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))
      const added = await call(`${lite.url}/api/providers`, {
        body: { provider: "openai", name: "oai", apiKey: "sk-migrated-secret", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" },
        headers
      })
      expect(added.status).toBe(201)
      up.always({ content: "before" })
      for (let i = 0; i < 3; i++) {
        const res = await call(`${lite.url}/v1/chat/completions`, {
          body: { model: "oai/gpt-4o", messages: [{ role: "user", content: `hi ${i}` }] },
          headers: { authorization: `Bearer ${USER}` }
        })
        expect(res.status).toBe(200)
        requestIds.push(res.headers.get("x-gateway-request-id")!)
      }
      const file = await fetch(`${lite.url}/v1/files`, {
        method: "POST",
        headers,
        body: (() => {
          const f = new FormData()
          f.append("purpose", "batch")
          f.append("file", new Blob([FILE_LINE]), "in.jsonl")
          return f
        })()
      })
      expect(file.status).toBe(200)
      fileId = ((await file.json()) as { id: string }).id
      await lite.run(Effect.flatMap(BatchWriter, (w) => w.flush))
    } finally {
      await lite.close()
    }

    const url = await database()
    const source = path.join(dataDir, "gateway.db")
    const counts = (() => {
      const db = new Database(source, { readonly: true })
      try {
        return {
          usage: (db.prepare("SELECT count(*) AS n FROM usage").get() as { n: number }).n,
          maxUsageId: (db.prepare("SELECT max(id) AS n FROM usage").get() as { n: number }).n,
          api_keys: (db.prepare("SELECT count(*) AS n FROM api_keys").get() as { n: number }).n
        }
      } finally {
        db.close()
      }
    })()
    expect(counts.usage).toBeGreaterThanOrEqual(3)

    const result = await Effect.runPromise(migrateToPostgres({ from: source, to: Redacted.make(url), force: false }))
    expect(result.replaced).toBe(false)
    expect(result.migrations).toBe(29)
    // The file's bytes (on disk beside the SQLite file) went into the database file store.
    expect(result.files).toEqual({ copied: 1, bytes: FILE_LINE.length, missing: [] })
    const byTable = Object.fromEntries(result.tables.map((t) => [t.table, t.rows]))
    expect(byTable).toMatchObject({ usage: counts.usage, api_keys: counts.api_keys, connections: 1, files: 1 })
    expect(result.tables.findIndex((t) => t.table === "connections")).toBeLessThan(
      result.tables.findIndex((t) => t.table === "oauth_tokens")
    )

    // A second run refuses the now non-empty target, naming what it holds; --force replaces it.
    const again = await Effect.runPromise(Effect.either(migrateToPostgres({ from: source, to: Redacted.make(url), force: false })))
    expect(again._tag).toBe("Left")
    if (again._tag === "Left") {
      expect(again.left.conflict).toBe(true)
      expect(again.left.message).toMatch(/is not empty: .*api_keys \(2 rows\).*--force/)
    }
    const forced = await Effect.runPromise(migrateToPostgres({ from: source, to: Redacted.make(url), force: true }))
    expect(forced.replaced).toBe(true)
    expect(forced.rows).toBe(result.rows)

    // The same DATA_DIR (its storage key decrypts the provider's key) on PostgreSQL.
    const onPg = await startGateway({ dataDir, env: { DATABASE_URL: url } })
    try {
      const keys = await call(`${onPg.url}/api/keys`, { headers })
      expect(keys.status).toBe(200)
      expect(JSON.stringify(keys.body)).toContain("user")
      const content = await fetch(`${onPg.url}/v1/files/${fileId}/content`, { headers })
      expect(content.status).toBe(200)
      expect(await content.text()).toBe(FILE_LINE)
      const providers = await call(`${onPg.url}/api/providers`, { headers })
      expect(JSON.stringify(providers.body)).toContain("oai")
      up.always({ content: "after" })
      up.requests.length = 0
      const res = await call(`${onPg.url}/v1/chat/completions`, {
        body: { model: "oai/gpt-4o", messages: [{ role: "user", content: "again" }] },
        headers: { authorization: `Bearer ${USER}` }
      })
      expect(res.status).toBe(200)
      expect(res.body.choices[0].message.content).toBe("after")
      expect(up.requests.at(-1)!.headers["authorization"]).toBe("Bearer sk-migrated-secret")
      await onPg.run(Effect.flatMap(BatchWriter, (w) => w.flush))
      const rows = await withClient(url, (c) => c.query("SELECT id, request_id FROM usage ORDER BY id"))
      expect(rows.rows.map((r) => r.request_id)).toEqual(expect.arrayContaining(requestIds))
      // The identity continues after the copied ids.
      expect(Number(rows.rows.at(-1)!.id)).toBeGreaterThan(counts.maxUsageId)
      expect(rows.rows.at(-1)!.request_id).toBe(res.headers.get("x-gateway-request-id"))
    } finally {
      await onPg.close()
    }
  }, 60_000)
})
