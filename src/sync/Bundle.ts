import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { AppConfig } from "../config/AppConfig.js"
import { BadRequest } from "../domain/errors.js"
import { describeParseError } from "../domain/parse.js"
import {
  BUNDLE_SCHEMA,
  BUNDLE_SECTIONS,
  BundleContent,
  type BundleRow,
  type BundleSection,
  type BundleSetting,
  type SectionDiff
} from "../domain/sync.js"
import { Backups } from "../store/Backups.js"
import { DB_FILENAME, knownMigrations, withSecondConnection } from "../store/Db.js"
import { Secrets } from "../store/Secrets.js"
import { StoreVersion } from "../store/StoreVersion.js"
import * as Envelope from "./envelope.js"

/**
 * The configuration bundle: what a gateway is configured with, apart from its traffic
 * (docs/operations.md, "Cloud sync"). The tables below, whole, plus every `kv` namespace but the
 * local ones. Columns ending in `_enc` hold secrets encrypted with the storage key: the bundle
 * carries them decrypted (it only ever travels sealed in a passphrase envelope) and an import
 * encrypts them again with the receiving gateway's key.
 */
interface TableSection {
  readonly section: Exclude<BundleSection, "flags" | "settings">
  readonly table: string
  readonly key: ReadonlyArray<string>
  /** Columns that move with traffic, left out when bundles are compared. */
  readonly volatile: ReadonlyArray<string>
  /** How an item is named in a conflict report. */
  readonly label: (row: BundleRow) => string
}

const TABLES: ReadonlyArray<TableSection> = [
  {
    section: "connections",
    table: "connections",
    key: ["id"],
    volatile: ["test_status", "last_tested_at", "rate_limited_until", "last_error", "last_error_type", "error_code", "backoff_level", "updated_at"],
    label: (r) => String(r["name"] ?? r["id"])
  },
  // After connections: a grant references its connection (and goes with it on delete).
  {
    section: "oauthGrants",
    table: "oauth_tokens",
    key: ["connection_id"],
    // A refresh rotates these on its own schedule: not a configuration change.
    volatile: ["refresh_token_enc", "id_token_enc", "expires_at", "refreshed_at", "refresh_error", "updated_at", "obtained_at"],
    label: (r) => String(r["connection_id"])
  },
  { section: "apiKeys", table: "api_keys", key: ["id"], volatile: ["last_used_at"], label: (r) => `${r["name"]} (${r["masked"]})` },
  { section: "combos", table: "combos", key: ["id"], volatile: [], label: (r) => String(r["name"] ?? r["id"]) },
  { section: "pricing", table: "pricing_overrides", key: ["provider", "model"], volatile: [], label: (r) => `${r["provider"]}/${r["model"]}` },
  { section: "budgets", table: "budgets", key: ["api_key_id"], volatile: [], label: (r) => String(r["api_key_id"]) },
  { section: "tokenLimits", table: "token_limits", key: ["id"], volatile: [], label: (r) => `${r["api_key_id"]}:${r["scope"]}:${r["target"] ?? "*"}:${r["window"]}` }
]

export const FLAGS_NAMESPACE = "feature_flags"

/**
 * `kv` namespaces that describe this gateway, not its configuration: the admin password
 * (`auth`), this gateway's own sync connection (`sync`), issue-report bookkeeping (`issues`),
 * summaries the summarize engine made (`compression.summaries`, a cache).
 */
export const LOCAL_NAMESPACES: ReadonlyArray<string> = ["auth", "sync", "issues", "compression.summaries"]

const SECRET_PREFIX = "v1:"
const COLUMN = /^[a-z_][a-z0-9_]*$/

/** JSON with object keys sorted: equal content, equal text. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v) =>
    v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, (v as Record<string, unknown>)[k]])) : v
  )

const stripped = (row: BundleRow, volatile: ReadonlyArray<string>): BundleRow =>
  volatile.length === 0 ? row : Object.fromEntries(Object.entries(row).filter(([k]) => !volatile.includes(k)))

/** Each section as name → comparable text (volatile columns left out). */
const itemsOf = (content: BundleContent): Record<BundleSection, Map<string, string>> => {
  const out = {} as Record<BundleSection, Map<string, string>>
  for (const t of TABLES) out[t.section] = new Map(content.sections[t.section].map((r) => [t.label(r), canonical(stripped(r, t.volatile))]))
  out.flags = new Map(content.sections.flags.map((s) => [s.key, s.value]))
  out.settings = new Map(content.sections.settings.map((s) => [`${s.namespace}/${s.key}`, s.value]))
  return out
}

/** A digest of what a bundle configures (not when it was made): equal digests, same configuration. */
export const digest = (content: BundleContent): string => {
  const items = itemsOf(content)
  const flat = BUNDLE_SECTIONS.map((s) => [s, [...items[s].entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))])
  return crypto.createHash("sha256").update(JSON.stringify(flat)).digest("hex")
}

/** What differs between two bundles, per section (sections without a difference left out). */
export const diff = (local: BundleContent, remote: BundleContent): ReadonlyArray<SectionDiff> => {
  const a = itemsOf(local)
  const b = itemsOf(remote)
  const out: Array<SectionDiff> = []
  for (const section of BUNDLE_SECTIONS) {
    const onlyLocal = [...a[section].keys()].filter((k) => !b[section].has(k)).sort()
    const onlyRemote = [...b[section].keys()].filter((k) => !a[section].has(k)).sort()
    const changed = [...a[section].keys()].filter((k) => b[section].has(k) && b[section].get(k) !== a[section].get(k)).sort()
    if (onlyLocal.length + onlyRemote.length + changed.length > 0) out.push({ section, onlyLocal, onlyRemote, changed })
  }
  return out
}

export const counts = (content: BundleContent): Record<string, number> =>
  Object.fromEntries(BUNDLE_SECTIONS.map((s) => [s, content.sections[s].length]))

const decodeContent = Schema.decodeUnknownEither(Schema.parseJson(BundleContent))

/** Opens a sealed bundle: 400 for a wrong passphrase, something that is not a bundle, or a bundle this build cannot read. */
export const openBundle = (ciphertext: string, passphrase: string): Effect.Effect<BundleContent, BadRequest> =>
  Effect.suspend(() => {
    const opened = Envelope.open(ciphertext, passphrase)
    if ("error" in opened) {
      return Effect.fail(
        new BadRequest({
          message:
            opened.error._tag === "WrongPassphrase"
              ? "wrong passphrase: the bundle cannot be decrypted with it (or it was altered)"
              : `not a configuration bundle: ${opened.error.reason}`
        })
      )
    }
    const decoded = decodeContent(opened.ok.toString("utf8"))
    if (decoded._tag === "Left") return Effect.fail(new BadRequest({ message: `not a configuration bundle this gateway reads (schema ${BUNDLE_SCHEMA}): ${describeParseError(decoded.left)}` }))
    return Effect.succeed(decoded.right)
  })

export const sealBundle = (content: BundleContent, passphrase: string): string => Envelope.seal(JSON.stringify(content), passphrase)

export interface ConfigBundleShape {
  /**
   * This gateway's configuration now. `secrets: "plain"` (for a sealed bundle) decrypts the
   * `_enc` columns and encrypted settings; `"stored"` leaves them as stored (an archive's
   * readable copy, whose secrets only the storage key opens).
   */
  readonly current: (secrets: "plain" | "stored") => Effect.Effect<BundleContent>
  /**
   * Replaces every section with the bundle's in one transaction (secrets encrypted with this
   * gateway's key), after a `pre-restore` backup; answers once the caches reloaded. 400 and
   * nothing changed for a bundle from a newer gateway or one whose rows do not fit.
   */
  readonly apply: (content: BundleContent) => Effect.Effect<Record<string, number>, BadRequest>
}

export class ConfigBundle extends Context.Tag("gateway/ConfigBundle")<ConfigBundle, ConfigBundleShape>() {
  static readonly layer = Layer.effect(
    ConfigBundle,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const version = yield* StoreVersion
      const backups = yield* Backups
      const { dataDir } = yield* AppConfig
      const known = new Set((yield* knownMigrations).map(String))
      const dbFile = path.join(dataDir, DB_FILENAME)

      const reveal = (stored: string) =>
        secrets.decrypt(stored).pipe(
          Effect.map(Redacted.value),
          Effect.catchAll(() => Effect.as(Effect.logWarning("a stored secret does not decrypt with this storage key: left out of the bundle"), null))
        )

      const current = (mode: "plain" | "stored") =>
        Effect.gen(function* () {
          const sections: Record<string, unknown> = {}
          for (const t of TABLES) {
            const rows = yield* Effect.orDie(sql<Record<string, string | number | null>>`SELECT * FROM ${sql(t.table)} ORDER BY ${sql.csv(t.key.map((k) => sql`${sql(k)}`))}`)
            if (mode === "plain") {
              for (const row of rows) {
                for (const [col, value] of Object.entries(row)) if (col.endsWith("_enc") && typeof value === "string") row[col] = yield* reveal(value)
              }
            }
            sections[t.section] = rows
          }
          const kv = yield* Effect.orDie(sql<{ namespace: string; key: string; value: string }>`SELECT namespace, key, value FROM kv ORDER BY namespace, key`)
          const flags: Array<BundleSetting> = []
          const settings: Array<BundleSetting> = []
          for (const e of kv) {
            if (LOCAL_NAMESPACES.includes(e.namespace)) continue
            let entry: BundleSetting = { namespace: e.namespace, key: e.key, value: e.value }
            if (mode === "plain" && e.value.startsWith(SECRET_PREFIX)) {
              const plain = yield* Effect.option(secrets.decrypt(e.value))
              if (plain._tag === "Some") entry = { ...entry, value: Redacted.value(plain.value), secret: true }
            }
            ;(e.namespace === FLAGS_NAMESPACE ? flags : settings).push(entry)
          }
          const migrations = yield* Effect.orDie(sql<{ migration_id: number }>`SELECT migration_id FROM schema_migrations ORDER BY migration_id`)
          return {
            format: "gateway-config" as const,
            schema: BUNDLE_SCHEMA,
            createdAt: new Date().toISOString(),
            migrations: migrations.map((m) => String(m.migration_id)),
            sections: { ...(sections as Pick<BundleContent["sections"], TableSection["section"]>), flags, settings }
          } satisfies BundleContent
        }).pipe(Effect.withSpan("ConfigBundle.current"))

      const check = (content: BundleContent): string | undefined => {
        const unknown = content.migrations.filter((m) => !known.has(m))
        if (unknown.length > 0) return `made by a newer gateway: migrations ${unknown.join(", ")} are unknown to this build`
        for (const t of TABLES) {
          for (const row of content.sections[t.section]) {
            const bad = Object.keys(row).find((c) => !COLUMN.test(c))
            if (bad !== undefined) return `sections.${t.section}: ${JSON.stringify(bad.slice(0, 64))} is not a column name`
            const missing = t.key.find((k) => row[k] === undefined || row[k] === null)
            if (missing !== undefined) return `sections.${t.section}: a row lacks its key ${missing}`
          }
        }
        for (const s of [...content.sections.flags, ...content.sections.settings]) {
          if (LOCAL_NAMESPACES.includes(s.namespace)) return `sections.settings: namespace ${s.namespace} is local to each gateway and cannot be imported`
        }
        if (content.sections.flags.some((s) => s.namespace !== FLAGS_NAMESPACE)) return `sections.flags: every entry must be in namespace ${FLAGS_NAMESPACE}`
        return undefined
      }

      const write = (db: SqlClient.SqlClient, content: BundleContent) =>
        db.withTransaction(
          Effect.gen(function* () {
            for (const t of TABLES) {
              yield* db`DELETE FROM ${db(t.table)}`
              const rows = content.sections[t.section].map((row) => {
                const out: Record<string, string | number | null> = { ...row }
                for (const [col, value] of Object.entries(out)) if (col.endsWith("_enc") && typeof value === "string") out[col] = secrets.encrypt(value)
                return out
              })
              for (let i = 0; i < rows.length; i += 100) yield* db`INSERT INTO ${db(t.table)} ${db.insert(rows.slice(i, i + 100))}`
            }
            const namespaces = yield* db<{ namespace: string }>`SELECT DISTINCT namespace FROM kv`
            for (const { namespace } of namespaces) if (!LOCAL_NAMESPACES.includes(namespace)) yield* db`DELETE FROM kv WHERE namespace = ${namespace}`
            const now = Date.now()
            const entries = [...content.sections.flags, ...content.sections.settings].map((s) => ({
              namespace: s.namespace,
              key: s.key,
              value: s.secret ? secrets.encrypt(s.value) : s.value,
              updated_at: now
            }))
            for (let i = 0; i < entries.length; i += 100) yield* db`INSERT INTO kv ${db.insert(entries.slice(i, i + 100))}`
          })
        )

      /** Waits until StoreVersion reports the commit, so every cache reloads on its next read. */
      const awaitReload = (before: number) =>
        version.current.pipe(
          Effect.repeat({ until: (v) => v !== before, schedule: Schedule.spaced("25 millis") }),
          Effect.timeoutOption(Duration.seconds(10)),
          Effect.asVoid
        )

      const apply = (content: BundleContent) =>
        Effect.gen(function* () {
          const problem = check(content)
          if (problem !== undefined) return yield* new BadRequest({ message: `cannot import the configuration: ${problem}` })
          // On PostgreSQL there is no file to back up (pg_dump is the operator's) and no second
          // connection is needed: the tables' triggers notify every process, this one included.
          const safety = backups.unavailable === undefined ? yield* backups.create("pre-restore") : undefined
          const before = yield* version.current
          yield* (backups.unavailable === undefined ? withSecondConnection(dbFile, (db) => write(db, content)) : write(sql, content)).pipe(
            Effect.catchTag("SqlError", (e) =>
              Effect.fail(new BadRequest({ message: `cannot import the configuration (nothing changed): its rows do not fit this gateway's tables: ${String(e.cause ?? e.message).slice(0, 300)}` }))
            )
          )
          yield* awaitReload(before)
          yield* Effect.logWarning(`configuration imported (${BUNDLE_SECTIONS.map((s) => `${content.sections[s].length} ${s}`).join(", ")}; ${safety ? `safety backup ${safety.id}` : "no safety backup on PostgreSQL"})`)
          return counts(content)
        }).pipe(Effect.uninterruptible, Effect.withSpan("ConfigBundle.apply"))

      return { current, apply } satisfies ConfigBundleShape
    })
  )
}
