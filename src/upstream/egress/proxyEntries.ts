/**
 * The proxy registry's entries as read: the `proxies` table loaded whole into a snapshot (each
 * password decrypted, or the reason it cannot be), an entry's view for the management API, and
 * the reads that add the connections using each proxy.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { NotFound } from "../../domain/errors.js"
import { familyOf, type ProxyView } from "../../domain/proxies.js"
import { toIso } from "../../platform/store/Db.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { proxyUrl } from "./family.js"
import type { ProxyEntry, ProxySnapshot } from "./ProxyRegistry.js"

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

/** An entry as the management API shows it (the password masked), with the names of the connections using it. */
export const proxyView = (e: ProxyEntry, usedBy: ReadonlyArray<string>): ProxyView => ({
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

export interface ProxyEntriesDeps {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
}

/** Every entry, oldest first (created_at, then id), with its password decrypted. */
export const loadProxies = ({ sql, secrets }: ProxyEntriesDeps): Effect.Effect<ProxySnapshot> =>
  Effect.gen(function* () {
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

export interface ProxyReadsDeps {
  readonly sql: SqlClient.SqlClient
  /** The snapshot, cached until the store changes. */
  readonly snapshot: Effect.Effect<ProxySnapshot>
}

/** `find` an entry with the connections using it, and `list` them all (views). */
export const makeProxyReads = ({ sql, snapshot }: ProxyReadsDeps) => {
  /** Connection names per proxy id, read now (connections change without telling the registry). */
  const usedBy = Effect.map(
    sql<{ proxy_id: string; name: string }>`SELECT proxy_id, name FROM connections WHERE proxy_id IS NOT NULL ORDER BY name`.pipe(
      Effect.orDie
    ),
    (rows) => {
      const m = new Map<string, Array<string>>()
      for (const u of rows) m.set(u.proxy_id, [...(m.get(u.proxy_id) ?? []), u.name])
      return m
    }
  )

  const find = (id: string) =>
    Effect.flatMap(snapshot, (s) => {
      const e = s.byId.get(id)
      return e
        ? Effect.map(usedBy, (m) => ({ entry: e, usedBy: m.get(id) ?? [] }))
        : Effect.fail(new NotFound({ message: `no proxy with id '${id}'` }))
    })

  const list = Effect.flatMap(snapshot, (s) => Effect.map(usedBy, (m) => s.all.map((e) => proxyView(e, m.get(e.id) ?? []))))

  return { find, list }
}

export type ProxyFind = ReturnType<typeof makeProxyReads>["find"]
