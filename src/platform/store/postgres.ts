/**
 * What only PostgreSQL says: the client and its settings, the collation check, the change
 * notifications behind `StoreVersion` and the server facts `gateway doctor` shows. The
 * counterpart of `sqlite.ts` (docs/ARCHITECTURE.md, "Seam 3: the store dialect"; docs/scale-out.md,
 * "PostgreSQL"). Loaded only when DATABASE_URL is set (Db.ts imports it dynamically): a SQLite
 * gateway never loads the driver.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { createRequire } from "node:module"
import { CHANGE_CHANNEL } from "./migrations-pg/notify.js"
import { maskUrl } from "./StoreKind.js"
import type { StoreVersionShape } from "./StoreVersion.js"

/** The part of node-postgres used here directly (the type parsers and a listening client). */
interface PgModule {
  readonly types: { getTypeParser(oid: number, format?: string): (value: string) => unknown }
  readonly Client: new (config: { connectionString: string; application_name?: string; connectionTimeoutMillis?: number }) => PgListenClient
}
interface PgListenClient {
  connect(): Promise<void>
  query(text: string): Promise<unknown>
  end(): Promise<void>
  on(event: "notification", f: (msg: { channel: string; payload?: string }) => void): void
  on(event: "error" | "end", f: (e?: unknown) => void): void
}
const pg = (): PgModule => createRequire(import.meta.url)("pg") as PgModule

const INT8 = 20
const NUMERIC = 1700

/**
 * node-postgres answers BIGINT (every integer column here, `count(*)`) and NUMERIC (`sum()` of
 * integers) as strings, because they may exceed 2^53. The gateway's integers are epoch-ms times,
 * counts and token sums, far below that: they are parsed to numbers, as better-sqlite3 answers them.
 */
export const typeParsers = () => {
  const types = pg().types
  return {
    getTypeParser: (oid: number, format?: string) =>
      oid === INT8 || oid === NUMERIC ? (value: string) => Number(value) : types.getTypeParser(oid, format)
  }
}

/** Connections in the pool (DATABASE_POOL_MAX, default 10). */
const PoolMax = Config.integer("DATABASE_POOL_MAX").pipe(
  Config.validate({ message: "DATABASE_POOL_MAX must be a positive number of connections", validation: (n) => n > 0 }),
  Config.withDefault(10)
)

/** The PostgreSQL client (and the SqlClient) on `url`. */
export const clientLayer = (url: Redacted.Redacted<string>) =>
  Layer.unwrapEffect(
    Effect.map(PoolMax, (max) =>
      PgClient.layer({
        url,
        maxConnections: max,
        connectTimeout: Duration.seconds(10),
        idleTimeout: Duration.seconds(60),
        applicationName: "gateway",
        types: typeParsers() as never
      })
    )
  )

/** A start-up failure to reach the server, as one line with the password masked. */
export const connectError = (url: Redacted.Redacted<string>, cause: unknown): string => {
  const detail = describe(cause)
    .split(Redacted.value(url))
    .join(maskUrl(Redacted.value(url)))
  return `cannot connect to the PostgreSQL database of DATABASE_URL (${maskUrl(Redacted.value(url))}): ${detail}`
}

const describe = (cause: unknown): string => {
  let e = cause
  for (let depth = 0; depth < 4 && typeof e === "object" && e !== null; depth++) {
    const inner = (e as { cause?: unknown }).cause
    if (inner === undefined || inner === null) break
    e = inner
  }
  if (e instanceof AggregateError && e.errors.length > 0)
    return e.errors.map((x) => (x instanceof Error ? x.message : String(x))).join("; ")
  return e instanceof Error ? e.message || e.name : String(e)
}

/**
 * The database's collation: `C` (or `POSIX`) makes `ORDER BY` on text agree with SQLite's byte
 * order. Another collation works but may sort names differently: a warning, not an error.
 */
export const checkCollation = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const rows = yield* sql<{ collate: string }>`SELECT datcollate AS collate FROM pg_database WHERE datname = current_database()`
    const collate = rows[0]?.collate ?? ""
    if (collate !== "C" && collate !== "POSIX") {
      yield* Effect.logWarning(
        `the PostgreSQL database's collation is ${JSON.stringify(collate)}, not "C": text sorts may differ from SQLite's byte order; create the database with CREATE DATABASE ... TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C' (docs/scale-out.md)`
      )
    }
    return collate
  })

/** What `gateway doctor` reports of the server: its version, the database, its collation and the migrations. */
export const serverFacts = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const v = yield* sql<{
      version: string
      database: string
      collate: string
    }>`SELECT current_setting('server_version') AS version, current_database() AS database, (SELECT datcollate FROM pg_database WHERE datname = current_database()) AS collate`
    return { version: v[0]?.version ?? "", database: v[0]?.database ?? "", collate: v[0]?.collate ?? "" }
  })

/**
 * StoreVersion on PostgreSQL: a client of its own LISTENs for the tables' change triggers and bumps the number on each, and
 * once after a reconnect (every 500 ms; `peek` answers undefined meanwhile): docs/scale-out.md#changes-between-processes.
 */
export const listenedVersion = (url: Redacted.Redacted<string>) =>
  Effect.gen(function* () {
    let version = 0
    let listening = false
    let warned = false
    const shape: StoreVersionShape = {
      peek: () => (listening ? version : undefined),
      current: Effect.sync(() => version),
      // Notified, not polled: nothing to read ahead of time.
      renew: Effect.sync(() => version),
      changed: Effect.sync(() => {
        version++
      })
    }
    /** One connection's life: resolves when it is listening, the returned promise ends with it. */
    const session = Effect.async<never, Error>((resume) => {
      let done = false
      const client = new (pg().Client)({
        connectionString: Redacted.value(url),
        application_name: "gateway-listen",
        connectionTimeoutMillis: 10_000
      })
      const fail = (e?: unknown) => {
        listening = false
        if (done) return
        done = true
        client.end().catch(() => undefined)
        resume(Effect.fail(new Error(connectError(url, e ?? new Error("connection ended")))))
      }
      client.on("notification", (msg) => {
        if (msg.channel === CHANGE_CHANNEL) version++
      })
      client.on("error", fail)
      client.on("end", () => fail())
      client
        .connect()
        .then(() => client.query(`LISTEN ${CHANGE_CHANNEL}`))
        .then(() => {
          if (done) return
          version++
          listening = true
          warned = false
        })
        .catch(fail)
      return Effect.sync(() => {
        done = true
        listening = false
        client.end().catch(() => undefined)
      })
    })
    // One warning per outage, not one per attempt.
    yield* session.pipe(
      Effect.tapError((e) =>
        warned
          ? Effect.void
          : Effect.zipRight(
              Effect.sync(() => {
                warned = true
              }),
              Effect.logWarning(`store change listener: ${e.message}; reconnecting every 500 ms`)
            )
      ),
      Effect.retry(Schedule.spaced(Duration.millis(500))),
      Effect.forkScoped
    )
    // The first LISTEN is in place before any cache loads: no commit falls between the two.
    yield* Effect.sync(() => listening).pipe(
      Effect.repeat({ until: (l) => l, schedule: Schedule.spaced(Duration.millis(10)) }),
      Effect.timeoutOption(Duration.seconds(10))
    )
    return shape
  })
