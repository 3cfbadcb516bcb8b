/**
 * Running gateway tests on PostgreSQL (docs/scale-out.md, "PostgreSQL"). With
 * GATEWAY_TEST_STORE=postgres, `startGateway` gives each new data directory a fresh database on
 * the server of GATEWAY_TEST_DATABASE_URL (a maintenance URL on which the test may CREATE
 * DATABASE) and sets DATABASE_URL; a gateway started again on the same directory, `localCore`
 * and `queryDb` use that database too. So an existing suite runs on PostgreSQL unchanged:
 *
 *   GATEWAY_TEST_STORE=postgres GATEWAY_TEST_DATABASE_URL=postgres://gateway@127.0.0.1:55432/postgres \
 *     npx vitest run test/store.test.ts
 */
import { execFileSync } from "node:child_process"
import { createRequire } from "node:module"

interface PgClientLike {
  connect(): Promise<void>
  query(text: string, values?: Array<unknown>): Promise<{ rows: Array<Record<string, unknown>> }>
  end(): Promise<void>
}
const pg = () => createRequire(import.meta.url)("pg") as { Client: new (config: { connectionString: string }) => PgClientLike }

/** The maintenance URL, or a failure naming the variable (scale tests fail, never skip, without it). */
export const maintenanceUrl = (): string => {
  const url = process.env.GATEWAY_TEST_DATABASE_URL
  if (url === undefined || url === "") {
    throw new Error(
      "GATEWAY_TEST_DATABASE_URL is not set: it must be a PostgreSQL URL on which the tests may CREATE DATABASE (e.g. postgres://gateway@127.0.0.1:55432/postgres)"
    )
  }
  return url
}

/** Whether `startGateway` puts gateways on PostgreSQL (GATEWAY_TEST_STORE=postgres). */
export const onPostgres = (): boolean => process.env.GATEWAY_TEST_STORE === "postgres"

/** The database of each data directory a gateway was started on. */
const byDataDir = new Map<string, string>()

export const databaseOf = (dataDir: string): string | undefined => byDataDir.get(dataDir)

export const withClient = async <A>(url: string, f: (c: PgClientLike) => Promise<A>): Promise<A> => {
  const client = new (pg().Client)({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

let swept = false

/**
 * A new empty database with the C collation (`gw_t_<epoch seconds>_<random>`), answered as its
 * URL. Test databases more than two hours old are dropped on the first call of a process.
 */
export const createTestDatabase = async (maintenance = maintenanceUrl()): Promise<string> => {
  const name = `gw_t_${Math.floor(Date.now() / 1000)}_${Math.random().toString(36).slice(2, 10)}`
  await withClient(maintenance, async (c) => {
    if (!swept) {
      swept = true
      const old = await c.query("SELECT datname FROM pg_database WHERE datname LIKE 'gw\\_t\\_%'")
      const limit = Date.now() / 1000 - 7200
      for (const r of old.rows) {
        const t = Number(String(r.datname).split("_")[2])
        if (Number.isFinite(t) && t < limit)
          await c.query(`DROP DATABASE IF EXISTS "${String(r.datname)}" WITH (FORCE)`).catch(() => undefined)
      }
    }
    await c.query(`CREATE DATABASE ${name} TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'`)
  })
  const u = new URL(maintenance)
  u.pathname = `/${name}`
  return u.toString()
}

/** Drops a database made by `createTestDatabase` (its connections are ended). */
export const dropTestDatabase = async (url: string, maintenance = maintenanceUrl()): Promise<void> => {
  const name = new URL(url).pathname.slice(1)
  if (!/^gw_t_\w+$/.test(name)) throw new Error(`not a test database: ${name}`)
  await withClient(maintenance, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
}

/** The DATABASE_URL for a gateway about to start on `dataDir`: its database, made on first use. */
export const databaseFor = async (dataDir: string): Promise<string> => {
  const known = byDataDir.get(dataDir)
  if (known !== undefined) return known
  const url = await createTestDatabase()
  byDataDir.set(dataDir, url)
  return url
}

/**
 * One query with `?` placeholders, synchronously (what `queryDb` promises its callers), in a child
 * process: the rows as node-postgres answers them, BIGINT and NUMERIC as numbers like the gateway's
 * own client and better-sqlite3.
 */
export const queryPgSync = <T>(url: string, sql: string, params: ReadonlyArray<unknown>): Array<T> => {
  let n = 0
  const text = sql.replace(/\?/g, () => `$${++n}`)
  const script = `
const pg = require("pg")
pg.types.setTypeParser(20, Number); pg.types.setTypeParser(1700, Number)
const [url, text, params] = JSON.parse(process.argv[1])
const c = new pg.Client({ connectionString: url })
c.connect().then(() => c.query(text, params)).then((r) => { process.stdout.write(JSON.stringify(r.rows ?? [])); return c.end() })
 .catch((e) => { process.stderr.write(String(e && e.message)); process.exit(1) })`
  // better-sqlite3 binds the elements of an array argument: the same here.
  const flat = params.flatMap((p) => (Array.isArray(p) ? p : [p]))
  const out = execFileSync(process.execPath, ["-e", script, JSON.stringify([url, text, flat])], { cwd: process.cwd(), encoding: "utf8" })
  return JSON.parse(out) as Array<T>
}
