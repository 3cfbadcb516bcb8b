import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { BadRequest } from "../../domain/errors.js"
import { describeParseError } from "../../domain/parse.js"
import {
  BUNDLE_SCHEMA,
  BUNDLE_SCHEMAS,
  BUNDLE_SECTIONS,
  BundleContent,
  type BundleRow,
  type BundleSection,
  type BundleSetting,
  OPTIONAL_SECTIONS,
  type SectionDiff
} from "../../domain/sync.js"
import { Backups } from "../../platform/store/Backups.js"
import { DB_FILENAME, knownMigrations, withSecondConnection } from "../../platform/store/Db.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import * as Envelope from "./envelope.js"

/**
 * The configuration bundle: the tables below plus the non-local `kv` namespaces, `_enc` secrets decrypted as it travels only sealed
 * (docs/operations.md#what-a-bundle-carries; sections a schema-1 bundle lacks: #bundles-of-an-older-gateway-schema-1).
 */
interface TableSection {
  readonly section: Exclude<BundleSection, "flags" | "settings">
  readonly table: string
  readonly key: ReadonlyArray<string>
  /** Columns that move with traffic, left out when bundles are compared. */
  readonly volatile: ReadonlyArray<string>
  /** An item's identity in comparisons and digests (unique in its section), and its name in a conflict report. */
  readonly label: (row: BundleRow) => string
  /** The name in a conflict report when the label alone does not say what the item is (default: the label). */
  readonly name?: (row: BundleRow) => string
}

/** A memory entry's text, shortened for a conflict report. */
const shortText = (text: unknown, max = 40): string => {
  const t = String(text ?? "")
    .replace(/\s+/g, " ")
    .trim()
  return t.length > max ? `${t.slice(0, max - 1)}…` : t
}

const TABLES: ReadonlyArray<TableSection> = [
  {
    section: "connections",
    table: "connections",
    key: ["id"],
    volatile: [
      "test_status",
      "last_tested_at",
      "rate_limited_until",
      "last_error",
      "last_error_type",
      "error_code",
      "backoff_level",
      "updated_at"
    ],
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
  {
    section: "pricing",
    table: "pricing_overrides",
    key: ["provider", "model"],
    volatile: [],
    label: (r) => `${r["provider"]}/${r["model"]}`
  },
  { section: "budgets", table: "budgets", key: ["api_key_id"], volatile: [], label: (r) => String(r["api_key_id"]) },
  {
    section: "tokenLimits",
    table: "token_limits",
    key: ["id"],
    volatile: [],
    label: (r) => `${r["api_key_id"]}:${r["scope"]}:${r["target"] ?? "*"}:${r["window"]}`
  },
  // Schema 2: compression and context (src/services/context/ContextStore.ts reads them into its snapshot).
  // No volatile columns: requests never write these tables (only compression_stats and
  // rtk_raw_outputs, not bundled), so updated_at moves only with a management edit and is
  // compared like the rest (an edit that changes nothing else still shows as changed).
  { section: "compressionCombos", table: "compression_combos", key: ["id"], volatile: [], label: (r) => String(r["name"] ?? r["id"]) },
  // After compressionCombos: an assignment names its compression combo by combo_id (deleted first, inserted after).
  {
    section: "compressionAssignments",
    table: "compression_assignments",
    key: ["kind", "target"],
    volatile: [],
    label: (r) => `${r["kind"]}:${r["target"]}`
  },
  // By id, which an edit keeps (the text and scope change with one): an edited entry shows as changed, not as one removed and one added.
  {
    section: "memory",
    table: "context_memory",
    key: ["id"],
    volatile: [],
    label: (r) => String(r["id"]),
    name: (r) => `${r["scope"]}${r["scope_id"] == null ? "" : `:${r["scope_id"]}`} "${shortText(r["text"])}" (${r["id"]})`
  },
  { section: "skills", table: "context_skills", key: ["id"], volatile: [], label: (r) => String(r["name"] ?? r["id"]) },
  // The registry of upstream MCP servers (src/services/mcp/McpServers.ts); env and headers in its `_enc` columns.
  { section: "mcpServers", table: "mcp_servers", key: ["id"], volatile: [], label: (r) => String(r["name"] ?? r["id"]) },
  // People and teams (src/services/teams/Directory.ts); a key names its owner in api_keys. A sign-in moves last_login_at.
  { section: "users", table: "users", key: ["id"], volatile: ["last_login_at"], label: (r) => String(r["email"] ?? r["id"]) },
  { section: "teams", table: "teams", key: ["id"], volatile: [], label: (r) => String(r["name"] ?? r["id"]) },
  {
    section: "teamMembers",
    table: "team_members",
    key: ["team_id", "user_id"],
    volatile: [],
    label: (r) => `${r["team_id"]}:${r["user_id"]}`
  }
]

const OPTIONAL: ReadonlyArray<BundleSection> = OPTIONAL_SECTIONS

/** A table section's rows, or undefined when the bundle does not carry the section (a schema-1 bundle's schema-2 sections). */
const rowsOf = (content: BundleContent, section: TableSection["section"]): ReadonlyArray<BundleRow> | undefined => content.sections[section]

/** The sections a bundle carries. */
export const carried = (content: BundleContent): ReadonlyArray<BundleSection> =>
  BUNDLE_SECTIONS.filter((s) => content.sections[s] !== undefined)

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
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, (v as Record<string, unknown>)[k]])
        )
      : v
  )

const stripped = (row: BundleRow, volatile: ReadonlyArray<string>): BundleRow =>
  volatile.length === 0 ? row : Object.fromEntries(Object.entries(row).filter(([k]) => !volatile.includes(k)))

/** One section's items: label → comparable text (volatile columns left out), and label → name in a report. */
interface Items {
  readonly text: Map<string, string>
  readonly names: Map<string, string>
}

/** Each section the bundle carries as its items (a section it lacks is absent, not empty). */
const itemsOf = (content: BundleContent): Partial<Record<BundleSection, Items>> => {
  const out: Partial<Record<BundleSection, Items>> = {}
  for (const t of TABLES) {
    const rows = rowsOf(content, t.section)
    if (rows === undefined) continue
    out[t.section] = {
      text: new Map(rows.map((r) => [t.label(r), canonical(stripped(r, t.volatile))])),
      names: new Map(rows.map((r) => [t.label(r), (t.name ?? t.label)(r)]))
    }
  }
  const settings = (section: "flags" | "settings", name: (s: BundleSetting) => string) => ({
    text: new Map(content.sections[section].map((s) => [name(s), s.value])),
    names: new Map(content.sections[section].map((s) => [name(s), name(s)]))
  })
  out.flags = settings("flags", (s) => s.key)
  out.settings = settings("settings", (s) => `${s.namespace}/${s.key}`)
  return out
}

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * A digest of what a bundle configures (not when it was made): equal digests, same configuration. An absent or empty optional
 * section (schema 2's, the MCP servers) is left out, so the digest did not move with them (docs/operations.md#bundles-of-an-older-gateway-schema-1).
 */
export const digest = (content: BundleContent): string => {
  const items = itemsOf(content)
  const flat = BUNDLE_SECTIONS.flatMap((s) => {
    const section = items[s]
    if (section === undefined || (OPTIONAL.includes(s) && section.text.size === 0)) return []
    return [[s, [...section.text.entries()].sort(([a], [b]) => byText(a, b))]]
  })
  return crypto.createHash("sha256").update(JSON.stringify(flat)).digest("hex")
}

/**
 * What differs between two bundles, per section (sections without a difference left out). A
 * section either bundle does not carry (a schema-1 bundle's compression and context sections) is
 * not compared: it is not empty on that side, it is not there, and taking that bundle would keep
 * the other side's rows.
 */
export const diff = (local: BundleContent, remote: BundleContent): ReadonlyArray<SectionDiff> => {
  const a = itemsOf(local)
  const b = itemsOf(remote)
  const out: Array<SectionDiff> = []
  for (const section of BUNDLE_SECTIONS) {
    const l = a[section]
    const r = b[section]
    if (l === undefined || r === undefined) continue
    const named = (items: Items, labels: Array<string>) => labels.map((k) => items.names.get(k) ?? k).sort(byText)
    const onlyLocal = named(
      l,
      [...l.text.keys()].filter((k) => !r.text.has(k))
    )
    const onlyRemote = named(
      r,
      [...r.text.keys()].filter((k) => !l.text.has(k))
    )
    const changed = named(
      l,
      [...l.text.keys()].filter((k) => r.text.has(k) && r.text.get(k) !== l.text.get(k))
    )
    if (onlyLocal.length + onlyRemote.length + changed.length > 0) out.push({ section, onlyLocal, onlyRemote, changed })
  }
  return out
}

/** Items per section the bundle carries (a schema-1 bundle has no count for the schema-2 sections). */
export const counts = (content: BundleContent): Record<string, number> =>
  Object.fromEntries(carried(content).map((s) => [s, content.sections[s]!.length]))

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
    if (decoded._tag === "Left")
      return Effect.fail(
        new BadRequest({
          message: `not a configuration bundle this gateway reads (schema ${BUNDLE_SCHEMAS.join(" or ")}): ${describeParseError(decoded.left)}`
        })
      )
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
   * Replaces every section the bundle carries with the bundle's in one transaction (secrets
   * encrypted with this gateway's key), after a `pre-restore` backup; a section it does not carry
   * (a schema-1 bundle's compression and context sections) is left as it is. Answers once the
   * caches reloaded. 400 and nothing changed for a bundle from a newer gateway or one whose rows
   * do not fit.
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
          Effect.catchAll(() =>
            Effect.as(Effect.logWarning("a stored secret does not decrypt with this storage key: left out of the bundle"), null)
          )
        )

      const current = (mode: "plain" | "stored") =>
        Effect.gen(function* () {
          const sections: Record<string, unknown> = {}
          for (const t of TABLES) {
            const rows = yield* Effect.orDie(
              sql<
                Record<string, string | number | null>
              >`SELECT * FROM ${sql(t.table)} ORDER BY ${sql.csv(t.key.map((k) => sql`${sql(k)}`))}`
            )
            if (mode === "plain") {
              for (const row of rows) {
                for (const [col, value] of Object.entries(row))
                  if (col.endsWith("_enc") && typeof value === "string") row[col] = yield* reveal(value)
              }
            }
            sections[t.section] = rows
          }
          const kv = yield* Effect.orDie(
            sql<{ namespace: string; key: string; value: string }>`SELECT namespace, key, value FROM kv ORDER BY namespace, key`
          )
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
          const migrations = yield* Effect.orDie(
            sql<{ migration_id: number }>`SELECT migration_id FROM schema_migrations ORDER BY migration_id`
          )
          return {
            format: "gateway-config" as const,
            schema: BUNDLE_SCHEMA,
            createdAt: new Date().toISOString(),
            migrations: migrations.map((m) => String(m.migration_id)),
            // Every section, the schema-2 ones too: this gateway's own configuration is always whole.
            sections: { ...(sections as Required<Pick<BundleContent["sections"], TableSection["section"]>>), flags, settings }
          } satisfies BundleContent
        }).pipe(Effect.withSpan("ConfigBundle.current"))

      const check = (content: BundleContent): string | undefined => {
        const unknown = content.migrations.filter((m) => !known.has(m))
        if (unknown.length > 0) return `made by a newer gateway: migrations ${unknown.join(", ")} are unknown to this build`
        if ((content.sections.compressionCombos === undefined) !== (content.sections.compressionAssignments === undefined)) {
          // An assignment names a compression combo by id: replacing one section and keeping the receiver's other would dangle.
          return "sections.compressionCombos and sections.compressionAssignments come together or not at all"
        }
        for (const t of TABLES) {
          for (const row of rowsOf(content, t.section) ?? []) {
            const bad = Object.keys(row).find((c) => !COLUMN.test(c))
            if (bad !== undefined) return `sections.${t.section}: ${JSON.stringify(bad.slice(0, 64))} is not a column name`
            const missing = t.key.find((k) => row[k] === undefined || row[k] === null)
            if (missing !== undefined) return `sections.${t.section}: a row lacks its key ${missing}`
          }
        }
        for (const s of [...content.sections.flags, ...content.sections.settings]) {
          if (LOCAL_NAMESPACES.includes(s.namespace))
            return `sections.settings: namespace ${s.namespace} is local to each gateway and cannot be imported`
        }
        if (content.sections.flags.some((s) => s.namespace !== FLAGS_NAMESPACE))
          return `sections.flags: every entry must be in namespace ${FLAGS_NAMESPACE}`
        return undefined
      }

      const write = (db: SqlClient.SqlClient, content: BundleContent) =>
        db.withTransaction(
          Effect.gen(function* () {
            // Only the sections the bundle carries: a schema-1 bundle leaves compression and context as they are.
            const present = TABLES.flatMap((t) => {
              const rows = rowsOf(content, t.section)
              return rows === undefined ? [] : [{ t, rows }]
            })
            // Deleted in reverse order (a row before the rows it references), inserted in order.
            for (const { t } of [...present].reverse()) yield* db`DELETE FROM ${db(t.table)}`
            for (const { t, rows: bundled } of present) {
              const rows = bundled.map((row) => {
                const out: Record<string, string | number | null> = { ...row }
                for (const [col, value] of Object.entries(out))
                  if (col.endsWith("_enc") && typeof value === "string") out[col] = secrets.encrypt(value)
                return out
              })
              for (let i = 0; i < rows.length; i += 100) yield* db`INSERT INTO ${db(t.table)} ${db.insert(rows.slice(i, i + 100))}`
            }
            const namespaces = yield* db<{ namespace: string }>`SELECT DISTINCT namespace FROM kv`
            for (const { namespace } of namespaces)
              if (!LOCAL_NAMESPACES.includes(namespace)) yield* db`DELETE FROM kv WHERE namespace = ${namespace}`
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

      const apply = (content: BundleContent) =>
        Effect.gen(function* () {
          const problem = check(content)
          if (problem !== undefined) return yield* new BadRequest({ message: `cannot import the configuration: ${problem}` })
          // On PostgreSQL there is no file to back up (pg_dump is the operator's) and no second
          // connection is needed: the tables' triggers notify every process, this one included.
          const safety = backups.unavailable === undefined ? yield* backups.create("pre-restore") : undefined
          yield* (backups.unavailable === undefined ? withSecondConnection(dbFile, (db) => write(db, content)) : write(sql, content)).pipe(
            Effect.catchTag("SqlError", (e) =>
              Effect.fail(
                new BadRequest({
                  message: `cannot import the configuration (nothing changed): its rows do not fit this gateway's tables: ${String(e.cause ?? e.message).slice(0, 300)}`
                })
              )
            )
          )
          // Every cache loads again on its next read (other processes: through the store's own signal).
          yield* version.changed
          const kept = BUNDLE_SECTIONS.filter((s) => content.sections[s] === undefined)
          yield* Effect.logWarning(
            `configuration imported (${carried(content)
              .map((s) => `${content.sections[s]!.length} ${s}`)
              .join(
                ", "
              )}${kept.length > 0 ? `; schema ${content.schema}, not carried and kept as they were: ${kept.join(", ")}` : ""}; ${safety ? `safety backup ${safety.id}` : "no safety backup on PostgreSQL"})`
          )
          return counts(content)
        }).pipe(Effect.uninterruptible, Effect.withSpan("ConfigBundle.apply"))

      return { current, apply } satisfies ConfigBundleShape
    })
  )
}
