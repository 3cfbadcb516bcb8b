import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as crypto from "node:crypto"
import * as net from "node:net"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { type CreateProxy, familyOf, type PatchProxy, type ProxyFamily, type ProxyType, type ProxyView } from "../../domain/proxies.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { toIso } from "../../platform/store/Db.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { literalContradiction, proxyUrl } from "./family.js"

/** One registry entry as the egress layer uses it (password decrypted). */
export interface ProxyEntry {
  readonly id: string
  readonly name: string
  readonly type: ProxyType
  readonly host: string
  readonly port: number
  readonly username: string | null
  readonly password: Redacted.Redacted<string> | null
  /** Set when the stored password cannot be decrypted with the current storage key. */
  readonly passwordError: string | null
  readonly family: ProxyFamily
  readonly free: boolean
  readonly createdAt: number
  readonly updatedAt: number
}

export interface ProxySnapshot {
  /** Oldest first (created_at, then id): the order auto-select tries them in. */
  readonly all: ReadonlyArray<ProxyEntry>
  readonly byId: ReadonlyMap<string, ProxyEntry>
}

export interface ProxyRegistryShape {
  readonly snapshot: Effect.Effect<ProxySnapshot>
  /** The snapshot when it is known fresh without reading anything (the request path). */
  readonly peek: () => ProxySnapshot | undefined
  readonly list: Effect.Effect<ReadonlyArray<ProxyView>>
  readonly get: (id: string) => Effect.Effect<ProxyView, NotFound>
  readonly create: (input: CreateProxy, actor: string) => Effect.Effect<ProxyView, BadRequest | Conflict>
  readonly update: (id: string, patch: PatchProxy, actor: string) => Effect.Effect<ProxyView, BadRequest | Conflict | NotFound>
  readonly remove: (id: string, actor: string) => Effect.Effect<ProxyView, Conflict | NotFound>
  /** Called after every change (the egress layer drops the dispatchers of changed entries). */
  readonly onChange: (listener: () => void) => void
  /** ENABLE_SOCKS5_PROXY (env, default on). */
  readonly socks5Enabled: boolean
}

interface Row {
  readonly id: string
  readonly name: string
  readonly type: string
  readonly host: string
  readonly port: number
  readonly username: string | null
  readonly password_enc: string | null
  readonly family: string
  readonly free: number
  readonly created_at: number
  readonly updated_at: number
}

export const SOCKS5_DISABLED = "SOCKS5 proxies are disabled (ENABLE_SOCKS5_PROXY=false)"

/** The URL of an entry with its credentials, for the dispatcher (never shown). */
export const entryUrl = (e: ProxyEntry, masked: boolean): string =>
  proxyUrl({
    type: e.type,
    host: e.host,
    port: e.port,
    username: e.username,
    password: e.password === null ? null : masked ? "****" : Redacted.value(e.password),
    family: e.family
  })

const view = (e: ProxyEntry, usedBy: ReadonlyArray<string>): ProxyView => ({
  id: e.id,
  name: e.name,
  type: e.type,
  host: e.host,
  port: e.port,
  username: e.username,
  password: e.password !== null || e.passwordError !== null ? "****" : null,
  family: e.family,
  free: e.free,
  url: entryUrl(e, true),
  usedBy,
  createdAt: toIso(e.createdAt) ?? "",
  updatedAt: toIso(e.updatedAt) ?? ""
})

const nameTaken =
  (name: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, Conflict, R> =>
    Effect.catchAll(effect, (e) => (isUniqueViolation(e) ? Effect.fail(new Conflict({ message: `a proxy named '${name}' already exists` })) : Effect.die(e)))

/**
 * The proxy registry (`/api/v1/management/proxies`): entries in the `proxies` table, the
 * password encrypted like provider API keys, read whole into a snapshot the request path peeks.
 */
export class ProxyRegistry extends Context.Tag("gateway/ProxyRegistry")<ProxyRegistry, ProxyRegistryShape>() {
  static readonly layer = Layer.effect(
    ProxyRegistry,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const version = yield* StoreVersion
      const writer = yield* BatchWriter
      const socks5Enabled = yield* Config.boolean("ENABLE_SOCKS5_PROXY").pipe(Config.withDefault(true))
      const listeners: Array<() => void> = []

      const load = Effect.gen(function* () {
        const rows = yield* sql<Row>`SELECT * FROM proxies ORDER BY created_at, id`.pipe(Effect.orDie)
        const all: Array<ProxyEntry> = []
        for (const row of rows) {
          let password: Redacted.Redacted<string> | null = null
          let passwordError: string | null = null
          if (row.password_enc !== null) {
            const d = yield* Effect.either(secrets.decrypt(row.password_enc))
            if (d._tag === "Right") password = d.right
            else passwordError = d.left.message
          }
          all.push({
            id: row.id,
            name: row.name,
            type: row.type === "https" || row.type === "socks5" ? row.type : "http",
            host: row.host,
            port: Number(row.port),
            username: row.username,
            password,
            passwordError,
            family: familyOf(row.family),
            free: Number(row.free) === 1,
            createdAt: Number(row.created_at),
            updatedAt: Number(row.updated_at)
          })
        }
        return { all, byId: new Map(all.map((e) => [e.id, e])) } satisfies ProxySnapshot
      })
      const cache = makeCachedLoad(version, load)
      const changed = Effect.zipRight(
        cache.invalidate,
        Effect.sync(() => {
          for (const l of listeners) l()
        })
      )
      const audit = (actor: string, action: string, target: string) => writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

      /** Connection names per proxy id, read now (connections change without telling the registry). */
      const usedBy = Effect.map(
        sql<{ proxy_id: string; name: string }>`SELECT proxy_id, name FROM connections WHERE proxy_id IS NOT NULL ORDER BY name`.pipe(Effect.orDie),
        (rows) => {
          const m = new Map<string, Array<string>>()
          for (const u of rows) m.set(u.proxy_id, [...(m.get(u.proxy_id) ?? []), u.name])
          return m
        }
      )
      const find = (id: string) =>
        Effect.flatMap(cache.get, (s) => {
          const e = s.byId.get(id)
          return e ? Effect.map(usedBy, (m) => ({ entry: e, usedBy: m.get(id) ?? [] })) : Effect.fail(new NotFound({ message: `no proxy with id '${id}'` }))
        })

      /** The entry's rules that a schema cannot see: SOCKS5 switched off, a literal host against its family. */
      const check = (type: ProxyType, host: string, family: ProxyFamily) => {
        if (type === "socks5" && !socks5Enabled) return Effect.fail(new BadRequest({ message: `type: ${SOCKS5_DISABLED}` }))
        const contradiction = literalContradiction(host, family)
        if (contradiction) return Effect.fail(new BadRequest({ message: `family: ${contradiction}` }))
        return Effect.void
      }

      const create: ProxyRegistryShape["create"] = (input, actor) =>
        Effect.gen(function* () {
          const family = input.family ?? "auto"
          yield* check(input.type, input.host, family)
          if (input.password && !input.username) return yield* new BadRequest({ message: "username: a password needs a username" })
          const id = "proxy_" + crypto.randomBytes(8).toString("hex")
          const t = Date.now()
          yield* sql`INSERT INTO proxies ${sql.insert({
            id,
            name: input.name,
            type: input.type,
            host: input.host,
            port: input.port,
            username: input.username || null,
            password_enc: input.password ? secrets.encrypt(input.password) : null,
            family,
            free: input.free ? 1 : 0,
            created_at: t,
            updated_at: t
          })}`.pipe(nameTaken(input.name))
          yield* changed
          audit(actor, "proxy.create", id)
          yield* Effect.logInfo(`proxy created: ${input.name} (${input.type} ${net.isIPv6(input.host) ? `[${input.host}]` : input.host}:${input.port}, family ${family})`)
          return yield* Effect.map(find(id).pipe(Effect.orDie), (f) => view(f.entry, f.usedBy))
        })

      const update: ProxyRegistryShape["update"] = (id, patch, actor) =>
        Effect.gen(function* () {
          if (patch.id !== undefined && patch.id !== id) return yield* new BadRequest({ message: `id: '${patch.id}' does not match the path ('${id}')` })
          const { entry } = yield* find(id)
          const type = patch.type ?? entry.type
          const host = patch.host ?? entry.host
          const family = patch.family ?? entry.family
          yield* check(type, host, family)
          const username = patch.username === undefined ? entry.username : patch.username || null
          const hasPassword = patch.password === undefined ? entry.password !== null || entry.passwordError !== null : !!patch.password
          if (hasPassword && !username) return yield* new BadRequest({ message: "username: a password needs a username" })
          const fields: Record<string, string | number | null> = { updated_at: Math.max(Date.now(), entry.updatedAt + 1) }
          if (patch.name !== undefined) fields["name"] = patch.name
          if (patch.type !== undefined) fields["type"] = patch.type
          if (patch.host !== undefined) fields["host"] = patch.host
          if (patch.port !== undefined) fields["port"] = patch.port
          if (patch.username !== undefined) fields["username"] = patch.username || null
          if (patch.password !== undefined) fields["password_enc"] = patch.password ? secrets.encrypt(patch.password) : null
          if (patch.family !== undefined) fields["family"] = patch.family
          if (patch.free !== undefined) fields["free"] = patch.free ? 1 : 0
          yield* sql`UPDATE proxies SET ${sql.update(fields)} WHERE id = ${id}`.pipe(nameTaken(patch.name ?? entry.name))
          yield* changed
          audit(actor, "proxy.update", id)
          return yield* Effect.map(find(id).pipe(Effect.orDie), (f) => view(f.entry, f.usedBy))
        })

      const remove: ProxyRegistryShape["remove"] = (id, actor) =>
        Effect.gen(function* () {
          const { entry } = yield* find(id)
          // Read now, not from the snapshot: a connection may have been pointed at it a moment ago.
          const users = yield* sql<{ name: string }>`SELECT name FROM connections WHERE proxy_id = ${id} ORDER BY name`.pipe(Effect.orDie)
          if (users.length > 0) {
            return yield* new Conflict({
              message: `proxy '${entry.name}' is used by connection${users.length > 1 ? "s" : ""} ${users.map((u) => `'${u.name}'`).join(", ")}; point them elsewhere (PUT /api/providers/{id} with proxyId) first`
            })
          }
          yield* sql`DELETE FROM proxies WHERE id = ${id}`.pipe(Effect.orDie)
          yield* changed
          audit(actor, "proxy.remove", id)
          return view(entry, [])
        })

      return {
        snapshot: cache.get,
        peek: cache.peek,
        list: Effect.flatMap(cache.get, (s) => Effect.map(usedBy, (m) => s.all.map((e) => view(e, m.get(e.id) ?? [])))),
        get: (id) => Effect.map(find(id), (f) => view(f.entry, f.usedBy)),
        create,
        update,
        remove,
        onChange: (l) => {
          listeners.push(l)
        },
        socks5Enabled
      } satisfies ProxyRegistryShape
    })
  )
}
