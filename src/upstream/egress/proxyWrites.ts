/**
 * The changes to the proxy registry: an entry created, updated or removed (refused while a
 * connection uses it), checked for what a schema cannot see (SOCKS5 switched off, a literal host
 * against its family, a password without a username), then the cache dropped, the listeners
 * told and the change audited.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import * as net from "node:net"
import { BadRequest, Conflict } from "../../domain/errors.js"
import type { ProxyFamily, ProxyType } from "../../domain/proxies.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { literalContradiction } from "./family.js"
import { type ProxyFind, proxyView } from "./proxyEntries.js"
import type { ProxyRegistryShape } from "./ProxyRegistry.js"

export const SOCKS5_DISABLED = "SOCKS5 proxies are disabled (ENABLE_SOCKS5_PROXY=false)"

const nameTaken =
  (name: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, Conflict, R> =>
    Effect.catchAll(effect, (e) =>
      isUniqueViolation(e) ? Effect.fail(new Conflict({ message: `a proxy named '${name}' already exists` })) : Effect.die(e)
    )

export interface ProxyWritesDeps {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly writer: BatchWriterShape
  /** ENABLE_SOCKS5_PROXY. */
  readonly socks5Enabled: boolean
  readonly find: ProxyFind
  /** After a change: the cached snapshot dropped and the listeners called. */
  readonly changed: Effect.Effect<void>
}

/** `create`, `update` and `remove`. */
export const makeProxyWrites = ({ sql, secrets, writer, socks5Enabled, find, changed }: ProxyWritesDeps) => {
  const audit = (actor: string, action: string, target: string) =>
    writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

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
      yield* Effect.logInfo(
        `proxy created: ${input.name} (${input.type} ${net.isIPv6(input.host) ? `[${input.host}]` : input.host}:${input.port}, family ${family})`
      )
      return yield* Effect.map(find(id).pipe(Effect.orDie), (f) => proxyView(f.entry, f.usedBy))
    })

  const update: ProxyRegistryShape["update"] = (id, patch, actor) =>
    Effect.gen(function* () {
      if (patch.id !== undefined && patch.id !== id)
        return yield* new BadRequest({ message: `id: '${patch.id}' does not match the path ('${id}')` })
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
      return yield* Effect.map(find(id).pipe(Effect.orDie), (f) => proxyView(f.entry, f.usedBy))
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
      return proxyView(entry, [])
    })

  return { create, update, remove }
}
