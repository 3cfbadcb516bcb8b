import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { AppConfig, DEFAULT_HOST, DEFAULT_PORT, isLoopbackHost } from "../../platform/config/AppConfig.js"
import { FLAGS_BY_KEY, isTruthy } from "../../platform/flags/catalog.js"
import { resolveFlag } from "../../platform/flags/FeatureFlags.js"
import { DB_FILENAME } from "../../platform/store/Db.js"
import { loader } from "../../platform/store/migrations/index.js"
import { engineVersion, fileHealth } from "../../platform/store/sqlite.js"
import { DatabaseUrl, maskUrl } from "../../platform/store/StoreKind.js"
import { deriveKey, makeCipher, STORAGE_KEY_FILE } from "../../platform/store/Secrets.js"
import { VERSION } from "../../kernel/version.js"
import type { Parsed } from "../handler.js"
import { bold, colourOn, exitWith, green, printJson, red, yellow } from "../output.js"
import { cliConfig } from "../root.js"
import type { doctorOptions } from "./doctor.js"

const require = createRequire(import.meta.url)

type Status = "ok" | "warn" | "fail" | "skip"
interface Check {
  readonly name: string
  readonly status: Status
  readonly message: string
}

type Sqlite = {
  prepare: (sql: string) => { get: (...a: Array<unknown>) => unknown; all: (...a: Array<unknown>) => Array<unknown> }
  close: () => void
}
const openDb = (file: string): Sqlite => {
  const Database = require("better-sqlite3") as new (f: string, o: { readonly: boolean; fileMustExist: boolean }) => Sqlite
  return new Database(file, { readonly: true, fileMustExist: true })
}

/** What effect's Config.boolean reads. */
const CONFIG_BOOLEANS = new Set(["true", "false", "yes", "no", "on", "off", "1", "0", "y", "n"])

const checkConfig = (dataDir: string, port: number, host: string): Check => {
  const problems: Array<string> = []
  const rawPort = process.env.PORT
  if (rawPort !== undefined && rawPort !== "" && !/^\d+$/.test(rawPort)) problems.push(`PORT=${rawPort} is not a number`)
  if (process.env.LOG_FORMAT && !["json", "pretty"].includes(process.env.LOG_FORMAT))
    problems.push(`LOG_FORMAT=${process.env.LOG_FORMAT} (expected json or pretty)`)
  const optOut = process.env.GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE
  if (optOut && !CONFIG_BOOLEANS.has(optOut.trim().toLowerCase()))
    problems.push(`GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=${optOut} (expected true or false)`)
  try {
    fs.mkdirSync(dataDir, { recursive: true })
    fs.accessSync(dataDir, fs.constants.W_OK)
  } catch (e) {
    problems.push(`DATA_DIR ${dataDir} is not writable: ${(e as Error).message}`)
  }
  return problems.length > 0
    ? { name: "config", status: "fail", message: problems.join("; ") }
    : { name: "config", status: "ok", message: `port ${port}, host ${host}, data in ${dataDir}` }
}

const checkNative = (): Check => {
  try {
    const Database = require("better-sqlite3") as new (f: string) => Sqlite
    const db = new Database(":memory:")
    const v = engineVersion(db)
    db.close()
    return { name: "native", status: "ok", message: `better-sqlite3 loads (SQLite ${v})` }
  } catch (e) {
    return {
      name: "native",
      status: "fail",
      message: `better-sqlite3 does not load: ${(e as Error).message} (run npm rebuild better-sqlite3)`
    }
  }
}

const checkDatabase = async (
  file: string
): Promise<{ check: Check; overrides: Map<string, string>; secrets: Array<string>; adminAuth: boolean }> => {
  const empty = { overrides: new Map<string, string>(), secrets: [], adminAuth: false }
  if (!fs.existsSync(file))
    return { ...empty, check: { name: "database", status: "warn", message: `${file} does not exist yet; it is created on first start` } }
  let db: Sqlite | undefined
  try {
    db = openDb(file)
    const { integrity, journalMode: mode } = fileHealth(db)
    const known = (await Effect.runPromise(loader)).length
    const applied = (db.prepare("SELECT count(*) AS n FROM schema_migrations").get() as { n: number }).n
    const overrides = new Map(
      (db.prepare("SELECT key, value FROM kv WHERE namespace = 'feature_flags'").all() as Array<{ key: string; value: string }>).map(
        (r) => [r.key, r.value]
      )
    )
    const secrets = (
      db.prepare("SELECT api_key_enc FROM connections WHERE api_key_enc IS NOT NULL").all() as Array<{ api_key_enc: string }>
    ).map((r) => r.api_key_enc)
    const adminAuth =
      (db.prepare("SELECT count(*) AS n FROM kv WHERE namespace = 'auth' AND key = 'admin_password'").get() as { n: number }).n > 0 ||
      (db.prepare("SELECT count(*) AS n FROM api_keys WHERE scopes LIKE '%admin%' AND enabled = 1").get() as { n: number }).n > 0
    const problems: Array<string> = []
    if (integrity !== "ok") problems.push(`integrity check: ${integrity}`)
    if (applied > known) problems.push(`schema is newer (${applied} migrations) than this build (${known}); upgrade the gateway`)
    const status: Status = problems.length > 0 ? "fail" : mode !== "wal" || applied < known ? "warn" : "ok"
    const message =
      problems.join("; ") ||
      `${file}: integrity ok, journal ${mode}, ${applied}/${known} migrations${applied < known ? " (the rest apply on next start)" : ""}`
    return { check: { name: "database", status, message }, overrides, secrets, adminAuth }
  } catch (e) {
    return { ...empty, check: { name: "database", status: "fail", message: `${file}: ${(e as Error).message}` } }
  } finally {
    db?.close()
  }
}

/**
 * The database check on PostgreSQL (DATABASE_URL): the server answers, its version, the
 * database's collation (C expected) and the migrations; the same facts as the SQLite file check
 * for the security and storage checks. The driver is loaded only here.
 */
const checkPostgres = (url: Redacted.Redacted<string>, display: string) =>
  Effect.gen(function* () {
    const empty = { overrides: new Map<string, string>(), secrets: [] as Array<string>, adminAuth: false }
    const pg = yield* Effect.promise(() => import("../../platform/store/postgres.js"))
    const PgClient = yield* Effect.promise(() => import("@effect/sql-pg/PgClient"))
    const Reactivity = yield* Effect.promise(() => import("@effect/experimental/Reactivity"))
    const probe = Effect.gen(function* () {
      const sql = yield* PgClient.make({
        url,
        maxConnections: 1,
        connectTimeout: Duration.seconds(5),
        applicationName: "gateway-doctor",
        types: pg.typeParsers() as never
      })
      const facts = yield* pg.serverFacts(sql)
      const known = (yield* Effect.orDie(loader)).length
      const hasSchema =
        (yield* sql<{
          n: number
        }>`SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'`)[0]
          ?.n ?? 0
      const where = `PostgreSQL ${facts.version} at ${display}`
      if (hasSchema === 0)
        return {
          ...empty,
          check: { name: "database", status: "warn" as Status, message: `${where}: no tables yet; they are created on first start` }
        }
      const applied = (yield* sql<{ n: number }>`SELECT count(*) AS n FROM schema_migrations`)[0]?.n ?? 0
      const overrides = new Map(
        (yield* sql<{ key: string; value: string }>`SELECT key, value FROM kv WHERE namespace = 'feature_flags'`).map(
          (r) => [r.key, r.value] as const
        )
      )
      const secrets = (yield* sql<{ api_key_enc: string }>`SELECT api_key_enc FROM connections WHERE api_key_enc IS NOT NULL`).map(
        (r) => r.api_key_enc
      )
      const adminAuth =
        ((yield* sql<{ n: number }>`SELECT count(*) AS n FROM kv WHERE namespace = 'auth' AND key = 'admin_password'`)[0]?.n ?? 0) > 0 ||
        ((yield* sql<{ n: number }>`SELECT count(*) AS n FROM api_keys WHERE scopes LIKE '%admin%' AND enabled = 1`)[0]?.n ?? 0) > 0
      const problems: Array<string> = []
      if (applied > known) problems.push(`schema is newer (${applied} migrations) than this build (${known}); upgrade the gateway`)
      const notC = facts.collate !== "C" && facts.collate !== "POSIX"
      const status: Status = problems.length > 0 ? "fail" : notC || applied < known ? "warn" : "ok"
      const message =
        problems.join("; ") ||
        `${where}: database ${facts.database}, collation ${facts.collate}${notC ? " (C expected: text sorts may differ; see docs/scale-out.md)" : ""}, ${applied}/${known} migrations${applied < known ? " (the rest apply on next start)" : ""}`
      return { check: { name: "database", status, message }, overrides, secrets, adminAuth }
    })
    return yield* Effect.scoped(probe).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAll((e) =>
        Effect.succeed({ ...empty, check: { name: "database", status: "fail" as Status, message: pg.connectError(url, e) } })
      )
    )
  })

const checkStorage = (dataDir: string, secrets: ReadonlyArray<string>): Check => {
  const envKey = process.env.STORAGE_ENCRYPTION_KEY?.trim()
  const file = path.join(dataDir, STORAGE_KEY_FILE)
  let key: Buffer
  let source: string
  const notes: Array<string> = []
  if (envKey) {
    key = deriveKey(envKey)
    source = "STORAGE_ENCRYPTION_KEY"
  } else if (fs.existsSync(file)) {
    const mode = fs.statSync(file).mode & 0o777
    if (mode & 0o077) notes.push(`${file} is readable by others (mode ${mode.toString(8)}); chmod 600 it`)
    const text = fs.readFileSync(file, "utf8").trim()
    if (!/^[0-9a-f]{64}$/.test(text)) return { name: "storage", status: "fail", message: `${file} does not hold a 64-character hex key` }
    key = Buffer.from(text, "hex")
    source = file
  } else {
    return secrets.length > 0
      ? { name: "storage", status: "fail", message: `encrypted secrets exist but neither STORAGE_ENCRYPTION_KEY nor ${file} is present` }
      : { name: "storage", status: "ok", message: `no storage key yet; ${file} is generated on first start` }
  }
  const cipher = makeCipher(key)
  const bad = secrets.filter((s) => {
    try {
      cipher.decrypt(s)
      return false
    } catch {
      return true
    }
  }).length
  if (bad > 0)
    return {
      name: "storage",
      status: "fail",
      message: `${bad} of ${secrets.length} stored secrets cannot be decrypted with the key from ${source} (was the key changed?)`
    }
  return {
    name: "storage",
    status: notes.length > 0 ? "warn" : "ok",
    message:
      notes.join("; ") ||
      `key from ${source}; ${secrets.length === 1 ? "the stored secret decrypts" : `all ${secrets.length} stored secrets decrypt`}`
  }
}

const checkRuntime = (): Check => {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
  const ok = major > 20 || (major === 20 && minor >= 18)
  return ok
    ? {
        name: "runtime",
        status: major === 20 ? "warn" : "ok",
        message: `Node ${process.versions.node}${major === 20 ? " (Node 20 is past end of life; 22 or 24 recommended)" : ""}`
      }
    : { name: "runtime", status: "fail", message: `Node ${process.versions.node}; 20.18 or newer is required` }
}

const checkMemory = (): Check => {
  const free = os.freemem() / 1024 / 1024
  const total = os.totalmem() / 1024 / 1024
  return free < 256
    ? {
        name: "memory",
        status: "warn",
        message: `${free.toFixed(0)} MiB free of ${total.toFixed(0)} MiB; the gateway wants ~256 MiB headroom`
      }
    : { name: "memory", status: "ok", message: `${free.toFixed(0)} MiB free of ${total.toFixed(0)} MiB` }
}

const probeLiveness = async (url: string): Promise<{ ok: boolean; message: string; tunnelOpen?: boolean }> => {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) })
    const body = (await res.json().catch(() => ({}))) as { version?: string; uptimeSeconds?: number; tunnelOpen?: boolean }
    return res.ok
      ? {
          ok: true,
          message: `${url} answered: version ${body.version ?? "?"}, up ${body.uptimeSeconds ?? "?"}s`,
          tunnelOpen: body.tunnelOpen === true
        }
      : { ok: false, message: `${url} answered HTTP ${res.status}` }
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause?.code
    return {
      ok: false,
      message: `${url} unreachable (${cause ?? (e as Error).message}); is the gateway running? (--no-liveness skips this)`
    }
  }
}

const portFree = (port: number, host: string) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.once("listening", () => server.close(() => resolve(true)))
    server.listen(port, host)
  })

export const doctor = (opts: Parsed<typeof doctorOptions>) =>
  opts.clients
    ? Effect.flatMap(
        Effect.promise(() => import("./compat.impl.js")),
        (m) => m.clients(opts)
      )
    : localDoctor(opts)

const localDoctor = (opts: Parsed<typeof doctorOptions>) =>
  Effect.gen(function* () {
    const overrides = yield* cliConfig
    const config = yield* Effect.provide(AppConfig, AppConfig.layer(overrides)).pipe(
      Effect.catchAll(() =>
        Effect.succeed({
          port: DEFAULT_PORT,
          host: DEFAULT_HOST,
          dataDir: path.resolve(process.env.DATA_DIR ?? "./data"),
          logFormat: "pretty" as const,
          allowUnauthenticatedRemote: false
        })
      )
    )
    const host = Option.getOrElse(opts.host, () => config.host)
    const checks: Array<Check> = []
    checks.push(checkConfig(config.dataDir, config.port, host))
    checks.push(checkRuntime())
    checks.push(checkNative())
    const databaseUrl = yield* Effect.either(DatabaseUrl)
    const db =
      databaseUrl._tag === "Left"
        ? {
            overrides: new Map<string, string>(),
            secrets: [],
            adminAuth: false,
            check: { name: "database", status: "fail" as Status, message: String(databaseUrl.left).replace(/^\(Invalid data at \): /, "") }
          }
        : Option.isSome(databaseUrl.right)
          ? yield* checkPostgres(databaseUrl.right.value, maskUrl(Redacted.value(databaseUrl.right.value)))
          : yield* Effect.promise(() => checkDatabase(path.join(config.dataDir, DB_FILENAME)))
    checks.push(db.check)
    checks.push(checkStorage(config.dataDir, db.secrets))
    checks.push(checkMemory())

    const requireKey = resolveFlag(
      FLAGS_BY_KEY.get("REQUIRE_API_KEY")!,
      db.overrides,
      new Map(process.env.REQUIRE_API_KEY ? [["REQUIRE_API_KEY", process.env.REQUIRE_API_KEY]] : [])
    )
    const security: Array<string> = []
    if (!isLoopbackHost(host) && !isTruthy(requireKey.value)) {
      security.push(
        config.allowUnauthenticatedRemote
          ? `host ${host} is reachable from the network while REQUIRE_API_KEY is off (${requireKey.source}) and GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true: anyone who reaches the port can use your providers; set REQUIRE_API_KEY=true and remove GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE`
          : `host ${host} is reachable from the network while REQUIRE_API_KEY is off (${requireKey.source}): inference requires a gateway key on this bind anyway (create one with \`gateway keys add\`); set REQUIRE_API_KEY=true to say so explicitly`
      )
    }
    if (!db.adminAuth) security.push("no admin password or admin API key: the management API is unusable until `gateway setup`")
    checks.push(
      security.length > 0
        ? { name: "security", status: "warn", message: security.join("; ") }
        : { name: "security", status: "ok", message: `REQUIRE_API_KEY=${requireKey.value} (${requireKey.source}), host ${host}` }
    )

    const connectHost = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host
    const url = Option.getOrElse(
      opts.livenessUrl,
      () => `http://${net.isIPv6(connectHost) ? `[${connectHost}]` : connectHost}:${config.port}/api/health/ping`
    )
    const live = opts.noLiveness ? undefined : yield* Effect.promise(() => probeLiveness(url))
    if (live?.ok) {
      checks.push({ name: "port", status: "ok", message: `${config.port} is in use by the running gateway` })
    } else {
      const free = yield* Effect.promise(() => portFree(config.port, host))
      checks.push(
        free
          ? { name: "port", status: "ok", message: `${host}:${config.port} is free` }
          : {
              name: "port",
              status: live ? "fail" : "warn",
              message: `${host}:${config.port} is in use${live ? " by something that is not answering as the gateway" : ""}`
            }
      )
    }
    checks.push(
      live === undefined
        ? { name: "liveness", status: "skip", message: "skipped (--no-liveness)" }
        : { name: "liveness", status: live.ok ? "ok" : "fail", message: live.message }
    )
    if (live?.ok) {
      const risks = [
        ...(isTruthy(requireKey.value) ? [] : ["REQUIRE_API_KEY is off (inference through the tunnel still needs a key)"]),
        ...(db.adminAuth ? [] : ["no admin password is set"])
      ]
      checks.push(
        live.tunnelOpen
          ? {
              name: "tunnel",
              status: "warn",
              message: `a tunnel is open: the gateway is reachable from the internet (\`gateway tunnel list\` shows it, \`gateway tunnel stop <kind>\` closes it)${risks.length > 0 ? `; ${risks.join("; ")}` : ""}`
            }
          : { name: "tunnel", status: "ok", message: "no tunnel is open" }
      )
    }

    const failed = checks.filter((c) => c.status === "fail").length
    const warned = checks.filter((c) => c.status === "warn").length
    if (opts.json) {
      yield* printJson({ ok: failed === 0, version: VERSION, checks })
    } else {
      const on = colourOn(process.stdout)
      const mark: Record<Status, string> = { ok: green("ok  ", on), warn: yellow("WARN", on), fail: red("FAIL", on), skip: "skip" }
      yield* Console.log(bold(`gateway doctor (${VERSION})`, on))
      for (const c of checks) yield* Console.log(`  ${mark[c.status]}  ${c.name.padEnd(9)} ${c.message}`)
      yield* Console.log(`${checks.length - failed - warned} ok, ${warned} warning${warned === 1 ? "" : "s"}, ${failed} failed`)
    }
    if (failed > 0) yield* exitWith(1)
  })
