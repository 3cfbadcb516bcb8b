import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { BadRequest } from "../../domain/errors.js"
import { describeParseError } from "../../domain/parse.js"
import { DEFAULT_SETTINGS, SettingsDocument, type SettingsInfo, type SettingsPatch, type SettingsView } from "../../domain/settings.js"
import { BatchWriter } from "../store/BatchWriter.js"
import { KeyValue } from "../store/KeyValue.js"
import { Secrets } from "../store/Secrets.js"
import { followVersion, StoreVersion } from "../store/StoreVersion.js"
import { compileIpFilter, type CompiledIpFilter, ipRefusal } from "./ipFilter.js"

/** The document lives in `kv` (namespace `settings`, key `document`), so a backup or a synced configuration carries it. */
export const SETTINGS_NAMESPACE = "settings"
const DOCUMENT_KEY = "document"
/** Shown instead of the proxy password; sent back, it keeps the stored one. */
export const MASK = "****"

/** GATEWAY_BACKUP_INTERVAL_HOURS and GATEWAY_BACKUP_KEEP: the scheduled backups when the settings leave them null. */
export const BackupScheduleEnv = Config.all({
  intervalHours: Config.number("GATEWAY_BACKUP_INTERVAL_HOURS").pipe(Config.withDefault(24)),
  keep: Config.integer("GATEWAY_BACKUP_KEEP").pipe(Config.withDefault(7))
})

export type BackupSchedule = SettingsInfo["backups"]

export interface SettingsShape {
  /** The document now (proxy password in clear): a synchronous read for the request path. */
  readonly current: () => SettingsDocument
  /** The inbound IP filter compiled from `current().ipFilter`; `active` is false when both lists are empty. */
  readonly ipFilter: () => CompiledIpFilter
  /** The document, reloaded first when another process (or a restore) changed the database. */
  readonly get: Effect.Effect<SettingsDocument>
  /** What GET answers: the document with the proxy password masked, and `info`. */
  readonly view: (doc: SettingsDocument) => SettingsView
  /** PUT: `doc` as given (sections it lacks took their defaults when it was decoded). */
  readonly replace: (doc: SettingsDocument, actor: string, caller?: string) => Effect.Effect<SettingsDocument, BadRequest>
  /** PATCH: objects merge, arrays and scalars replace. */
  readonly patch: (patch: SettingsPatch, actor: string, caller?: string) => Effect.Effect<SettingsDocument, BadRequest>
  /** The document now and after every change (this process's writes and reloads). */
  readonly changes: Stream.Stream<SettingsDocument>
  /** Calls `listener` synchronously with every new document (before the write's answer); answers the unsubscribe. */
  readonly subscribe: (listener: (doc: SettingsDocument) => void) => () => void
  /** The scheduled backups in effect for `doc`. */
  readonly backupSchedule: (doc: SettingsDocument) => BackupSchedule
}

// ---------------------------------------------------------------- proxy password

interface Stored {
  readonly document: unknown
  /** The proxy URL's password, encrypted like provider API keys (the URL in `document` has none). */
  readonly proxyPassword: string | null
}

const splitPassword = (url: string | null): { readonly url: string | null; readonly password: string | null } => {
  if (!url) return { url, password: null }
  const u = new URL(url)
  if (!u.password) return { url, password: null }
  const password = decodeURIComponent(u.password)
  u.password = ""
  return { url: u.toString().replace(/\/$/, ""), password }
}

const withPassword = (url: string | null, password: string | null): string | null => {
  if (!url || password === null) return url
  const u = new URL(url)
  u.password = encodeURIComponent(password)
  return u.toString().replace(/\/$/, "")
}

/** A proxy URL for listings, logs and errors: the password as `****`. */
export const maskProxyUrl = (url: string): string => {
  try {
    const u = new URL(url)
    if (!u.password) return url
    u.password = MASK
    return u.toString().replace(/\/$/, "")
  } catch {
    return "(invalid URL)"
  }
}

/** `****` as the password means "the stored one", when user and host are the same. */
const unmask = (incoming: string | null, stored: string | null): string | null => {
  if (!incoming || !stored) return incoming
  const u = new URL(incoming)
  if (u.password !== MASK && decodeURIComponent(u.password) !== MASK) return incoming
  const s = new URL(stored)
  if (s.username !== u.username || s.host !== u.host || s.protocol !== u.protocol) {
    u.password = ""
    return u.toString().replace(/\/$/, "")
  }
  u.password = s.password
  return u.toString().replace(/\/$/, "")
}

// ---------------------------------------------------------------- merge

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** Objects merge key by key; anything else (arrays, scalars, null) replaces. */
export const deepMerge = (base: unknown, patch: unknown): unknown => {
  if (!isPlainObject(base) || !isPlainObject(patch)) return patch === undefined ? base : patch
  const out: Record<string, unknown> = { ...base }
  for (const [k, v] of Object.entries(patch)) if (v !== undefined) out[k] = deepMerge(base[k], v)
  return out
}

const decodeDocument = Schema.decodeUnknownEither(SettingsDocument)

/**
 * Before compression was built its section was stored only (`engine`, `level`, `minTokens`,
 * `toolResults`, an `enabled` nothing read): such a section is dropped, so it takes today's
 * defaults and the rest of the document still decodes.
 */
const withoutLegacyCompression = (doc: unknown): unknown => {
  if (!isPlainObject(doc) || !isPlainObject(doc["compression"])) return doc
  const c = doc["compression"]
  if (!("engine" in c || "level" in c || "minTokens" in c || "toolResults" in c)) return doc
  const { compression: _, ...rest } = doc
  return rest
}
const encodeDocument = Schema.encodeSync(SettingsDocument)
const strip = ({ info: _, ...doc }: typeof SettingsDocument.Type): SettingsDocument => doc

/**
 * The global settings (docs/operations.md, "Settings"): one typed document with defaults, kept
 * in memory and read synchronously by the request path (`current`, `ipFilter`); changes are
 * written to `kv`, applied to the snapshot and published on `changes`, so the IP filter, the
 * system-prompt and thinking-budget hooks and the backup schedule follow without a restart.
 * Another process's change (the CLI, a restore) is picked up within a second.
 */
export class Settings extends Context.Tag("gateway/Settings")<Settings, SettingsShape>() {
  static readonly layer = Layer.scoped(
    Settings,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const secrets = yield* Secrets
      const writer = yield* BatchWriter
      const version = yield* StoreVersion
      const env = yield* Effect.orDie(BackupScheduleEnv)

      const load = Effect.gen(function* () {
        const raw = yield* kv.get(SETTINGS_NAMESPACE, DOCUMENT_KEY)
        if (Option.isNone(raw)) return DEFAULT_SETTINGS
        const stored = yield* Effect.try(() => JSON.parse(raw.value) as Stored).pipe(Effect.option)
        if (Option.isNone(stored)) {
          yield* Effect.logWarning("stored settings are not JSON; using defaults")
          return DEFAULT_SETTINGS
        }
        const decoded = decodeDocument(withoutLegacyCompression(stored.value.document))
        if (Either.isLeft(decoded)) {
          yield* Effect.logWarning(`stored settings do not decode (${describeParseError(decoded.left)}); using defaults`)
          return DEFAULT_SETTINGS
        }
        const doc = strip(decoded.right)
        const enc = stored.value.proxyPassword
        if (!enc) return doc
        const password = yield* Effect.either(secrets.decrypt(enc))
        if (Either.isLeft(password)) {
          yield* Effect.logWarning(
            "the stored proxy password cannot be decrypted with the current storage key; the proxy URL is kept without it"
          )
          return doc
        }
        return { ...doc, proxy: { ...doc.proxy, url: withPassword(doc.proxy.url, Redacted.value(password.right)) } }
      })

      let snapshot = yield* load
      let filter = compileIpFilter(snapshot.ipFilter)
      const ref = yield* SubscriptionRef.make(snapshot)
      const listeners = new Set<(doc: SettingsDocument) => void>()
      const apply = (doc: SettingsDocument) =>
        Effect.suspend(() => {
          snapshot = doc
          filter = compileIpFilter(doc.ipFilter)
          for (const listener of listeners) listener(doc)
          return SubscriptionRef.set(ref, doc)
        })

      // Another process's write (the CLI, another gateway) or a restore: reload within a second.
      // One of the rounds that follow the store's version, on their one timer (`followVersion`).
      let seen = yield* version.current
      /** The document loaded again when the version moved (seen once loaded: a load that failed is tried again). */
      const reload = Effect.gen(function* () {
        const v = yield* version.current
        if (v === seen) return
        const doc = yield* load
        seen = v
        if (JSON.stringify(doc) !== JSON.stringify(snapshot)) yield* apply(doc)
      })
      yield* followVersion(
        Option.some(version),
        reload.pipe(Effect.catchAllCause((cause) => Effect.logWarning("settings reload failed; will retry", cause)))
      )

      const save = (next: SettingsDocument, actor: string, caller: string | undefined) =>
        Effect.gen(function* () {
          if (caller !== undefined) {
            const verdict = compileIpFilter(next.ipFilter).check(caller)
            if (verdict)
              return yield* new BadRequest({
                message: `ipFilter: this change would refuse your own address ${caller} (${ipRefusal(verdict)})`
              })
          }
          const { url, password } = splitPassword(next.proxy.url)
          const document = encodeDocument({ ...next, proxy: { ...next.proxy, url } })
          const stored: Stored = { document, proxyPassword: password === null ? null : secrets.encrypt(password) }
          yield* kv.set(SETTINGS_NAMESPACE, DOCUMENT_KEY, JSON.stringify(stored))
          yield* apply(next)
          writer.append("audit_log", { ts: Date.now(), actor, action: "settings.update", target: "settings", detail: null })
          return next
        })

      const validated = (input: unknown) =>
        Effect.mapError(Schema.decodeUnknown(SettingsDocument)(input), (e) => new BadRequest({ message: describeParseError(e) }))

      const backupSchedule = (doc: SettingsDocument): BackupSchedule =>
        doc.backups.intervalHours === null && doc.backups.keep === null
          ? { intervalHours: env.intervalHours, keep: env.keep, source: "env" }
          : { intervalHours: doc.backups.intervalHours ?? env.intervalHours, keep: doc.backups.keep ?? env.keep, source: "settings" }

      return {
        current: () => snapshot,
        ipFilter: () => filter,
        get: Effect.zipRight(
          reload,
          Effect.sync(() => snapshot)
        ),
        view: (doc) => ({
          ...doc,
          proxy: { ...doc.proxy, url: doc.proxy.url === null ? null : maskProxyUrl(doc.proxy.url) },
          info: { restartRequired: [], storedOnly: [], backups: backupSchedule(doc) }
        }),
        replace: (doc, actor, caller) =>
          Effect.suspend(() => save({ ...doc, proxy: { ...doc.proxy, url: unmask(doc.proxy.url, snapshot.proxy.url) } }, actor, caller)),
        patch: (patch, actor, caller) =>
          Effect.gen(function* () {
            const { info: _, ...changes } = patch
            const base = encodeDocument(snapshot)
            const merged = yield* validated(deepMerge(base, changes))
            const doc = strip(merged)
            return yield* save({ ...doc, proxy: { ...doc.proxy, url: unmask(doc.proxy.url, snapshot.proxy.url) } }, actor, caller)
          }),
        changes: ref.changes,
        subscribe: (listener) => {
          listeners.add(listener)
          return () => void listeners.delete(listener)
        },
        backupSchedule
      } satisfies SettingsShape
    })
  )
}
