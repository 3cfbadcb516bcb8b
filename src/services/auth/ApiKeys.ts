import type { ShadowTarget } from "../../domain/shadow.js"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as crypto from "node:crypto"
import { Conflict, NotFound } from "../../domain/errors.js"
import type { ApiKeyScope, ApiKeyView, CreateApiKey, CreatedApiKey, UpdateApiKey } from "../../domain/keys.js"
import { maskSecret } from "../../kernel/redact.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { toIso } from "../../platform/store/Db.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { randomToken, sha256 } from "./password.js"
import { transaction } from "../../platform/store/dialect.js"
import { StoreHealth } from "../../platform/store/StoreHealth.js"

export const KEY_PREFIX = "gwk_"

export interface ApiKeyRecord {
  readonly id: string
  readonly name: string
  readonly masked: string
  readonly scopes: ReadonlyArray<ApiKeyScope>
  readonly enabled: boolean
  readonly createdAt: number
  readonly expiresAt: number | null
  readonly lastUsedAt: number | null
  /** Inbound limits per minute set on the key (null: none). */
  readonly rpm: number | null
  readonly tpm: number | null
  /** Shadow targets for this key's requests (docs/shadow.md). */
  readonly shadow: ReadonlyArray<ShadowTarget>
}

export interface ApiKeysShape {
  /** Creates a key; `secret` adopts a caller-chosen value (GATEWAY_API_KEY) instead of generating one. */
  readonly create: (input: CreateApiKey, options?: { readonly secret?: string; readonly actor?: string }) => Effect.Effect<CreatedApiKey>
  readonly list: Effect.Effect<ReadonlyArray<ApiKeyView>>
  /** Whether any key has shadow targets (from memory, worked out once per loaded key set). */
  readonly anyShadowed: Effect.Effect<boolean>
  /** Removes a key by id or by name. */
  readonly remove: (idOrName: string, actor?: string) => Effect.Effect<ApiKeyView, NotFound | Conflict>
  /** Changes a key's name or limits, by id or by name. */
  readonly update: (idOrName: string, input: UpdateApiKey, actor?: string) => Effect.Effect<ApiKeyView, NotFound | Conflict>
  /** A key by id from memory when the cached keys are known fresh (undefined: unknown or not fresh; use `byId`). */
  readonly peekById: (id: string) => ApiKeyRecord | undefined
  readonly byId: (id: string) => Effect.Effect<ApiKeyRecord | undefined>
  /** The active key for a presented secret, if any. Expired and disabled keys do not verify. */
  readonly verify: (secret: string) => Effect.Effect<Option.Option<ApiKeyRecord>>
  /** `verify` from memory when the cached keys are known fresh, else undefined (use `verify`). */
  readonly peekVerify: (secret: string) => Option.Option<ApiKeyRecord> | undefined
  /** Whether any key with the admin scope exists. */
  readonly hasAdminKey: Effect.Effect<boolean>
}

interface Row {
  readonly id: string
  readonly name: string
  readonly key_hash: string
  readonly masked: string
  readonly scopes: string
  readonly enabled: number
  readonly created_at: number
  readonly expires_at: number | null
  readonly last_used_at: number | null
  readonly rpm_limit: number | null
  readonly tpm_limit: number | null
  readonly shadow: string | null
}

/** The `shadow` column: the targets as JSON, NULL for none. */
const shadowColumn = (targets: ReadonlyArray<ShadowTarget>): string | null => (targets.length > 0 ? JSON.stringify(targets) : null)

const toRecord = (row: Row): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  masked: row.masked,
  scopes: JSON.parse(row.scopes) as Array<ApiKeyScope>,
  enabled: row.enabled === 1,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  lastUsedAt: row.last_used_at,
  rpm: row.rpm_limit ?? null,
  tpm: row.tpm_limit ?? null,
  shadow: row.shadow ? (JSON.parse(row.shadow) as ReadonlyArray<ShadowTarget>) : []
})

export const toView = (r: ApiKeyRecord): ApiKeyView => ({
  id: r.id,
  name: r.name,
  key: r.masked,
  scopes: r.scopes,
  enabled: r.enabled,
  createdAt: toIso(r.createdAt)!,
  expiresAt: toIso(r.expiresAt),
  lastUsedAt: toIso(r.lastUsedAt),
  rpm: r.rpm,
  tpm: r.tpm,
  shadow: r.shadow
})

/**
 * Gateway API keys. Only a SHA-256 of each key is stored (keys are 256-bit random, so a fast
 * hash is enough; passwords get scrypt). Lookups on the request path hit an in-memory map;
 * `last_used_at` is collected in memory and written every 30 s and at shutdown.
 */
export class ApiKeys extends Context.Tag("gateway/ApiKeys")<ApiKeys, ApiKeysShape>() {
  static readonly layer = Layer.scoped(
    ApiKeys,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      const writer = yield* BatchWriter
      const byHash = makeCachedLoad(
        version,
        sql<Row>`SELECT * FROM api_keys`.pipe(
          Effect.map((rows) => new Map(rows.map((r) => [r.key_hash, toRecord(r)]))),
          Effect.orDie
        )
      )
      const health = yield* StoreHealth
      const touched = new Map<string, number>()
      const flushTouched = Effect.suspend(() => {
        if (touched.size === 0) return Effect.void
        const entries = Array.from(touched)
        touched.clear()
        return transaction(
          sql,
          Effect.forEach(entries, ([id, at]) => sql`UPDATE api_keys SET last_used_at = ${at} WHERE id = ${id}`, { discard: true })
        ).pipe(
          // Last-used times are a hint: lost with a store that is down (said once, by StoreHealth).
          Effect.catchAll((e) => (health.failed(e) === undefined ? Effect.logWarning("could not record key usage times", e.message) : Effect.void))
        )
      })
      yield* Effect.addFinalizer(() => flushTouched)
      yield* flushTouched.pipe(Effect.repeat(Schedule.spaced("30 seconds")), Effect.forkScoped)

      const audit = (actor: string, action: string, target: string) => writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

      const create: ApiKeysShape["create"] = (input, options = {}) =>
        Effect.gen(function* () {
          const secret = options.secret ?? KEY_PREFIX + randomToken(32)
          const hash = sha256(secret)
          const scopes: Array<ApiKeyScope> = Array.from(new Set<ApiKeyScope>(input.scopes ?? ["inference"]))
          const existing = (yield* byHash.get).get(hash)
          if (existing) {
            // Adopting the same secret twice (re-running setup) updates the key instead of failing.
            const merged: Array<ApiKeyScope> = Array.from(new Set([...existing.scopes, ...scopes]))
            const rpm = input.rpm === undefined ? existing.rpm : input.rpm
            const tpm = input.tpm === undefined ? existing.tpm : input.tpm
            const shadow = input.shadow === undefined ? existing.shadow : (input.shadow ?? [])
            yield* sql`UPDATE api_keys SET scopes = ${JSON.stringify(merged)}, enabled = 1, rpm_limit = ${rpm}, tpm_limit = ${tpm}, shadow = ${shadowColumn(shadow)} WHERE id = ${existing.id}`.pipe(
              Effect.orDie
            )
            yield* byHash.invalidate
            const record = { ...existing, scopes: merged, enabled: true, rpm, tpm, shadow }
            return { ...toView(record), secret }
          }
          const record: ApiKeyRecord = {
            id: "key_" + crypto.randomBytes(8).toString("hex"),
            name: input.name ?? "default",
            masked: maskSecret(secret),
            scopes,
            enabled: true,
            createdAt: Date.now(),
            expiresAt: input.expiresAt ? input.expiresAt.getTime() : null,
            lastUsedAt: null,
            rpm: input.rpm ?? null,
            tpm: input.tpm ?? null,
            shadow: input.shadow ?? []
          }
          yield* sql`INSERT INTO api_keys ${sql.insert({
            id: record.id,
            name: record.name,
            key_hash: hash,
            masked: record.masked,
            scopes: JSON.stringify(record.scopes),
            enabled: 1,
            created_at: record.createdAt,
            expires_at: record.expiresAt,
            rpm_limit: record.rpm,
            tpm_limit: record.tpm,
            shadow: shadowColumn(record.shadow)
          })}`.pipe(Effect.orDie)
          yield* byHash.invalidate
          audit(options.actor ?? "system", "api_key.create", record.id)
          yield* Effect.logInfo(`api key created: ${record.id} (${record.name}, scopes ${scopes.join(",")})`)
          return { ...toView(record), secret }
        })

      const list = Effect.map(byHash.get, (m) =>
        Array.from(m.values())
          .sort((a, b) => a.createdAt - b.createdAt)
          .map((r) => toView({ ...r, lastUsedAt: touched.get(r.id) ?? r.lastUsedAt }))
      )

      const find = (idOrName: string) =>
        Effect.gen(function* () {
          const all = Array.from((yield* byHash.get).values())
          const byId = all.find((r) => r.id === idOrName)
          const byName = all.filter((r) => r.name === idOrName)
          if (!byId && byName.length > 1) {
            return yield* new Conflict({
              message: `several keys are named '${idOrName}'; name one by id (${byName.map((r) => r.id).join(", ")})`
            })
          }
          const target = byId ?? byName[0]
          if (!target) return yield* new NotFound({ message: `no API key with id or name '${idOrName}'` })
          return target
        })

      const update: ApiKeysShape["update"] = (idOrName, input, actor = "system") =>
        Effect.gen(function* () {
          const target = yield* find(idOrName)
          const next: ApiKeyRecord = {
            ...target,
            name: input.name ?? target.name,
            rpm: input.rpm === undefined ? target.rpm : input.rpm,
            tpm: input.tpm === undefined ? target.tpm : input.tpm,
            enabled: input.enabled ?? target.enabled,
            expiresAt: input.expiresAt === undefined ? target.expiresAt : input.expiresAt === null ? null : input.expiresAt.getTime(),
            shadow: input.shadow === undefined ? target.shadow : (input.shadow ?? [])
          }
          yield* sql`UPDATE api_keys SET name = ${next.name}, rpm_limit = ${next.rpm}, tpm_limit = ${next.tpm}, enabled = ${next.enabled ? 1 : 0}, expires_at = ${next.expiresAt}, shadow = ${shadowColumn(next.shadow)} WHERE id = ${target.id}`.pipe(
            Effect.orDie
          )
          yield* byHash.invalidate
          audit(actor, "api_key.update", target.id)
          return toView({ ...next, lastUsedAt: touched.get(next.id) ?? next.lastUsedAt })
        })

      // Keys by id, indexed once per loaded key set.
      const idIndex = new WeakMap<ReadonlyMap<string, ApiKeyRecord>, Map<string, ApiKeyRecord>>()
      const indexOf = (m: ReadonlyMap<string, ApiKeyRecord>) => {
        let index = idIndex.get(m)
        if (index === undefined) idIndex.set(m, (index = new Map(Array.from(m.values(), (r) => [r.id, r]))))
        return index
      }
      const peekById = (id: string) => {
        const m = byHash.peek()
        return m === undefined ? undefined : indexOf(m).get(id)
      }
      const byId = (id: string) => Effect.map(byHash.get, (m) => indexOf(m).get(id))
      const shadowedIn = new WeakMap<ReadonlyMap<string, ApiKeyRecord>, boolean>()
      const anyShadowed = Effect.map(byHash.get, (m) => {
        let any = shadowedIn.get(m)
        if (any === undefined) shadowedIn.set(m, (any = Array.from(m.values()).some((r) => r.shadow.length > 0)))
        return any
      })

      const remove: ApiKeysShape["remove"] = (idOrName, actor = "system") =>
        Effect.gen(function* () {
          const target = yield* find(idOrName)
          yield* sql`DELETE FROM api_keys WHERE id = ${target.id}`.pipe(Effect.orDie)
          touched.delete(target.id)
          yield* byHash.invalidate
          audit(actor, "api_key.remove", target.id)
          return toView(target)
        })

      const verifyIn = (m: ReadonlyMap<string, ApiKeyRecord>, secret: string): Option.Option<ApiKeyRecord> => {
        const record = m.get(sha256(secret))
        if (!record || !record.enabled) return Option.none()
        const t = Date.now()
        if (record.expiresAt !== null && record.expiresAt <= t) return Option.none()
        touched.set(record.id, t)
        return Option.some(record)
      }
      const verify = (secret: string) => Effect.map(byHash.get, (m) => verifyIn(m, secret))
      const peekVerify = (secret: string) => {
        const m = byHash.peek()
        return m === undefined ? undefined : verifyIn(m, secret)
      }

      return {
        create,
        list,
        anyShadowed,
        remove,
        update,
        peekById,
        byId,
        verify,
        peekVerify,
        hasAdminKey: Effect.map(byHash.get, (m) => Array.from(m.values()).some((r) => r.scopes.includes("admin")))
      }
    })
  )
}
