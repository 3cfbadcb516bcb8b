import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Prompt from "@effect/cli/Prompt"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import { AdminAuth, AUTH_NAMESPACE, PASSWORD_KEY } from "../../auth/AdminAuth.js"
import { AppConfig } from "../../config/AppConfig.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { FeatureFlags } from "../../flags/FeatureFlags.js"
import { logFileOf, logFiles } from "../../observability/LogFile.js"
import { redactText } from "../../observability/redact.js"
import { BatchWriter } from "../../store/BatchWriter.js"
import { KeyValue } from "../../store/KeyValue.js"
import { Secrets } from "../../store/Secrets.js"
import { ENV_NAME, envFilePath, isSecretName, maskValue, readEnvFile, setEnvVariable } from "../../system/envFile.js"
import { restartMode } from "../../system/Lifecycle.js"
import { cliConfig, withLocalGateway } from "../local.js"
import { exitWith, printJson, table } from "../output.js"
import { explain, remote, remoteOptions } from "../remote.js"
import { gateway } from "../root.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))

// ------------------------------------------------------------------ reset-password

/** `gateway reset-password`: sets (prompted or `--password`) or clears (`--clear`) the admin password in the local database. */
export const resetPasswordCommand = Command.make(
  "reset-password",
  {
    password: Options.redacted("password").pipe(Options.withDescription("The new admin password (at least 8 characters)."), Options.optional),
    clear: Options.boolean("clear").pipe(Options.withDescription("Remove the password instead (management then needs an admin API key until one is set)."))
  },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const admin = yield* AdminAuth
        if (opts.clear) {
          if (Option.isSome(opts.password)) return yield* new BadRequest({ message: "--clear and --password exclude each other" })
          const kv = yield* KeyValue
          const sql = yield* SqlClient.SqlClient
          const removed = yield* kv.remove(AUTH_NAMESPACE, PASSWORD_KEY)
          yield* sql`DELETE FROM admin_sessions`.pipe(Effect.orDie)
          ;(yield* BatchWriter).append("audit_log", { ts: Date.now(), actor: "cli-reset-password", action: "admin_password.clear", target: null, detail: null })
          return yield* Console.log(removed ? "admin password cleared; every admin session ended" : "no admin password was set")
        }
        let password: string
        if (Option.isSome(opts.password)) password = Redacted.value(opts.password.value)
        else {
          if ((yield* gateway).nonInteractive || !process.stdin.isTTY) {
            return yield* new BadRequest({ message: "no terminal to prompt on: pass --password <password> (or --clear)" })
          }
          const pw = yield* Prompt.password({
            message: "New admin password",
            validate: (v) => (v.length >= 8 ? Effect.succeed(v) : Effect.fail("at least 8 characters"))
          })
          const again = yield* Prompt.password({ message: "Repeat the password" })
          if (Redacted.value(pw) !== Redacted.value(again)) return yield* new BadRequest({ message: "the passwords differ" })
          password = Redacted.value(pw)
        }
        yield* admin.setPassword(password, "cli-reset-password")
        yield* Console.log("admin password set; every admin session ended")
      })
    )
).pipe(Command.withDescription("Set (prompted, or --password) or clear (--clear) the admin password in the local database."))

// ------------------------------------------------------------------ reset-encrypted-columns

interface Undecryptable {
  readonly table: string
  readonly row: string
  readonly column: string
}

/**
 * `gateway reset-encrypted-columns [--force]`: finds stored secrets the current storage key
 * cannot decrypt (connections' API keys; `v1:` values inside settings in `kv`); `--force`
 * nulls them.
 */
export const resetEncryptedColumnsCommand = Command.make(
  "reset-encrypted-columns",
  { force: Options.boolean("force").pipe(Options.withDescription("Really null the credentials that no longer decrypt.")), json },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const secrets = yield* Secrets
        const fails = (v: string) => Effect.map(Effect.either(secrets.decrypt(v)), (r) => r._tag === "Left")
        const found: Array<Undecryptable> = []
        const conns = yield* sql<{ id: string; name: string; api_key_enc: string }>`SELECT id, name, api_key_enc FROM connections WHERE api_key_enc IS NOT NULL`.pipe(Effect.orDie)
        for (const c of conns) if (yield* fails(c.api_key_enc)) found.push({ table: "connections", row: c.name, column: "api_key_enc" })
        const kvRows = yield* sql<{ namespace: string; key: string; value: string }>`SELECT namespace, key, value FROM kv`.pipe(Effect.orDie)
        const kvFixes: Array<{ namespace: string; key: string; value: string }> = []
        for (const r of kvRows) {
          let doc: unknown
          try {
            doc = JSON.parse(r.value)
          } catch {
            continue
          }
          if (!doc || typeof doc !== "object" || Array.isArray(doc)) continue
          const fixed: Record<string, unknown> = { ...(doc as Record<string, unknown>) }
          let changed = false
          for (const [field, v] of Object.entries(fixed)) {
            if (typeof v === "string" && v.startsWith("v1:") && (yield* fails(v))) {
              found.push({ table: "kv", row: `${r.namespace}/${r.key}`, column: field })
              fixed[field] = null
              changed = true
            }
          }
          if (changed) kvFixes.push({ namespace: r.namespace, key: r.key, value: JSON.stringify(fixed) })
        }
        if (opts.force && found.length > 0) {
          yield* sql.withTransaction(
            Effect.gen(function* () {
              for (const f of found.filter((f) => f.table === "connections")) {
                yield* sql`UPDATE connections SET api_key_enc = NULL, updated_at = ${Date.now()} WHERE name = ${f.row}`
              }
              for (const k of kvFixes) yield* sql`UPDATE kv SET value = ${k.value} WHERE namespace = ${k.namespace} AND key = ${k.key}`
            })
          ).pipe(Effect.orDie)
          ;(yield* BatchWriter).append("audit_log", { ts: Date.now(), actor: "cli", action: "encrypted_columns.reset", target: null, detail: JSON.stringify(found) })
        }
        if (opts.json) return yield* printJson({ storageKey: secrets.source === "env" ? "STORAGE_ENCRYPTION_KEY" : secrets.keyFile, undecryptable: found, reset: opts.force && found.length > 0 })
        if (found.length === 0) return yield* Console.log("every stored secret decrypts with the current storage key; nothing to reset")
        yield* Console.log(table(["TABLE", "ROW", "COLUMN"], found.map((f) => [f.table, f.row, f.column])))
        yield* Console.log(
          opts.force
            ? `${found.length} credential(s) nulled; set them again (gateway providers, the settings routes)`
            : `${found.length} credential(s) do not decrypt with the current storage key; nothing changed. Run again with --force to null them.`
        )
      })
    )
).pipe(Command.withDescription("Recovery after a lost storage key: list stored secrets that no longer decrypt; --force nulls them."))

// ------------------------------------------------------------------ config show

const maskEnv = (env: Record<string, string | undefined>, names: ReadonlyArray<string>) =>
  Object.fromEntries(names.filter((n) => env[n] !== undefined).map((n) => [n, isSecretName(n) ? maskValue(env[n]!) : redactText(env[n]!)]))

/** The process environment variables the gateway reads (by prefix or name). */
const GATEWAY_ENV = /^(GATEWAY_|PORT$|HOST$|DATA_DIR$|LOG_|STORAGE_ENCRYPTION_KEY$|INITIAL_PASSWORD$|REQUIRE_API_KEY$|[A-Z0-9_]+_(API_KEY|BASE_URL)$|[A-Z0-9_]+_ENABLED$)/

const configShow = Command.make("show", { json }, (opts) =>
  withLocalGateway(
    Effect.gen(function* () {
      const config = yield* AppConfig
      const secrets = yield* Secrets
      const flags = yield* (yield* FeatureFlags).list
      const envFile = envFilePath()
      const report = {
        config: { ...config },
        envFile: { path: envFile, exists: fs.existsSync(envFile) },
        logFile: process.env.GATEWAY_LOG_FILE?.trim() || logFileOf(config.dataDir),
        restart: restartMode(),
        storageKey: secrets.source === "env" ? "STORAGE_ENCRYPTION_KEY (environment)" : secrets.keyFile,
        environment: maskEnv(process.env, Object.keys(process.env).filter((k) => GATEWAY_ENV.test(k)).sort()),
        featureFlags: flags.flags.map((f) => ({ key: f.key, value: f.effectiveValue, source: f.source }))
      }
      if (opts.json) return yield* printJson(report)
      yield* Console.log(
        table(
          ["SETTING", "VALUE"],
          [
            ["port", String(config.port)],
            ["host", config.host],
            ["dataDir", config.dataDir],
            ["logFormat", config.logFormat],
            ["allowedOrigins", config.allowedOrigins.join(",") || "-"],
            ["allowUnauthenticatedRemote", String(config.allowUnauthenticatedRemote)],
            ["envFile", `${envFile}${report.envFile.exists ? "" : " (absent)"}`],
            ["logFile", report.logFile],
            ["restart", report.restart],
            ["storageKey", report.storageKey]
          ]
        )
      )
      const envRows = Object.entries(report.environment)
      if (envRows.length) yield* Console.log("\n" + table(["ENVIRONMENT", "VALUE"], envRows.map(([k, v]) => [k, String(v)])))
      const overridden = report.featureFlags.filter((f) => f.source !== "default")
      yield* Console.log(`\nfeature flags: ${flags.flags.length}, ${overridden.length} not at their default${overridden.length ? ": " + overridden.map((f) => `${f.key}=${f.value} (${f.source})`).join(", ") : ""}`)
    })
  )
).pipe(Command.withDescription("The effective process configuration, environment (secrets masked) and feature flags."))

export const configCommand = Command.make("config").pipe(Command.withDescription("Show the gateway's configuration."), Command.withSubcommands([configShow]))

// ------------------------------------------------------------------ env show|get|set

const dataDirOf = Effect.gen(function* () {
  return yield* Effect.provide(AppConfig, AppConfig.layer(yield* cliConfig))
}).pipe(Effect.map((c) => c.dataDir))

const envShow = Command.make("show", { json }, (opts) =>
  Effect.gen(function* () {
    const file = envFilePath()
    const vars = readEnvFile(file)
    const shown = Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, isSecretName(k) ? maskValue(v) : v]))
    if (opts.json) return yield* printJson({ file, exists: fs.existsSync(file), variables: shown })
    if (!fs.existsSync(file)) return yield* Console.log(`${file}: no env file (gateway env set <name> <value> creates it)`)
    yield* Console.log(`# ${file}`)
    for (const [k, v] of Object.entries(shown)) yield* Console.log(`${k}=${v}`)
  })
).pipe(Command.withDescription("The env file's variables, secrets masked."))

const envGet = Command.make("get", { name: Args.text({ name: "name" }) }, (opts) =>
  Effect.gen(function* () {
    const value = readEnvFile(envFilePath())[opts.name]
    if (value === undefined) return yield* new NotFound({ message: `${opts.name} is not set in ${envFilePath()}` })
    yield* Console.log(value)
  })
).pipe(Command.withDescription("One variable's value from the env file (unmasked: it is for scripts)."))

const envSet = Command.make("set", { name: Args.text({ name: "name" }), value: Args.text({ name: "value" }) }, (opts) =>
  Effect.gen(function* () {
    if (!ENV_NAME.test(opts.name)) return yield* new BadRequest({ message: `name: ${JSON.stringify(opts.name)} is not a variable name (letters, digits and _, not starting with a digit)` })
    if (/[\r\n]/.test(opts.value)) return yield* new BadRequest({ message: "value: must be one line" })
    const file = envFilePath()
    const { backup } = setEnvVariable(file, yield* dataDirOf, opts.name, opts.value)
    yield* Console.log(`${opts.name} set in ${file}${backup ? ` (previous file kept as ${backup})` : ""}; a running gateway reads it on restart (POST /api/restart)`)
  })
).pipe(Command.withDescription("Set a variable in the env file (atomic write; the previous file is snapshotted to DATA_DIR/env-backups)."))

export const envCommand = Command.make("env").pipe(
  Command.withDescription("The env file the gateway reads at start (GATEWAY_ENV_FILE, default ./.env)."),
  Command.withSubcommands([envShow, envGet, envSet])
)

// ------------------------------------------------------------------ health

export const healthCommand = Command.make("health", { ...remoteOptions, json }, (opts) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const ping = yield* client.health.ping().pipe(Effect.timeout("3 seconds"), Effect.option)
    if (Option.isNone(ping)) {
      if (opts.json) yield* printJson({ up: false, url })
      else yield* Console.log(`down: no gateway answers at ${url}`)
      return yield* exitWith(1)
    }
    const health = yield* client.usage.health().pipe(Effect.mapError(explain(url)))
    if (opts.json) yield* printJson({ up: true, url, version: ping.value.version, uptimeSeconds: ping.value.uptimeSeconds, ...health })
    else {
      yield* Console.log(`${health.status}: gateway ${ping.value.version} at ${url}, up ${ping.value.uptimeSeconds}s`)
      yield* Console.log(`providers: ${health.configuredCount} configured, ${health.activeCount} active, ${health.monitoredCount} monitored (catalog ${health.catalogCount})`)
      if (health.providers.length) yield* Console.log(table(["CONNECTION", "PROVIDER", "ENABLED", "STATE"], health.providers.map((p) => [p.connection, p.provider, String(p.enabled), p.state])))
    }
    if (health.status === "down") return yield* exitWith(1)
  }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("The running server's health (ping and provider summary); exits 1 when it is down."))

// ------------------------------------------------------------------ logs

interface LogLine {
  readonly raw: string
  readonly entry: Record<string, unknown> | undefined
}

const parseLine = (raw: string): LogLine => {
  try {
    const v = JSON.parse(raw)
    return { raw, entry: v && typeof v === "object" ? v : undefined }
  } catch {
    return { raw, entry: undefined }
  }
}

const pretty = (l: LogLine): string => {
  const e = l.entry
  if (!e) return l.raw
  const message = Array.isArray(e.message) ? e.message.join(" ") : String(e.message ?? "")
  const annotations = e.annotations && typeof e.annotations === "object" ? Object.entries(e.annotations as object).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`) : []
  return [String(e.timestamp ?? ""), String(e.logLevel ?? "").padEnd(7), message, ...annotations].join(" ").trim()
}

export const logsCommand = Command.make(
  "logs",
  {
    json,
    search: Options.text("search").pipe(Options.withDescription("Only lines containing this text (case-insensitive)."), Options.optional),
    follow: Options.boolean("follow").pipe(Options.withAlias("f"), Options.withDescription("Keep printing new lines until Ctrl-C.")),
    lines: Options.integer("lines").pipe(Options.withAlias("n"), Options.withDescription("At most this many of the latest lines (default all)."), Options.optional)
  },
  (opts) =>
    Effect.gen(function* () {
      const file = process.env.GATEWAY_LOG_FILE?.trim() || logFileOf(yield* dataDirOf)
      const needle = Option.map(opts.search, (s) => s.toLowerCase())
      const keep = (raw: string) => raw.trim() !== "" && Option.match(needle, { onNone: () => true, onSome: (n) => raw.toLowerCase().includes(n) })
      const print = (raw: string) => Console.log(opts.json ? raw : pretty(parseLine(raw)))
      const files = logFiles(file)
      if (files.length === 0 && !opts.follow) return yield* Console.error(`no log file at ${file} yet (the server writes it)`)
      let lines: Array<string> = []
      for (const f of files) lines.push(...fs.readFileSync(f, "utf8").split("\n").filter(keep))
      if (Option.isSome(opts.lines)) lines = lines.slice(-Math.max(0, opts.lines.value))
      for (const l of lines) yield* print(l)
      if (!opts.follow) return
      // Tails the current file; a rotation (the file got shorter or was replaced) starts it from the top.
      let offset = fs.existsSync(file) ? fs.statSync(file).size : 0
      let partial = ""
      const poll = Effect.gen(function* () {
        if (!fs.existsSync(file)) return
        const size = fs.statSync(file).size
        if (size < offset) offset = 0
        if (size === offset) return
        const fd = fs.openSync(file, "r")
        const buf = Buffer.alloc(size - offset)
        fs.readSync(fd, buf, 0, buf.length, offset)
        fs.closeSync(fd)
        offset = size
        const text = partial + buf.toString("utf8")
        const parts = text.split("\n")
        partial = parts.pop() ?? ""
        for (const l of parts) if (keep(l)) yield* print(l)
      })
      return yield* Effect.repeat(poll, Schedule.spaced("250 millis")).pipe(Effect.asVoid)
    })
).pipe(Command.withDescription("Read the server's log file (DATA_DIR/logs/gateway.log and its rotated files): pretty or --json, --search, --follow."))
