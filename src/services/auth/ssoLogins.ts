/**
 * Sign-ins in progress (`oidc_logins`, migration 0027; docs/sso.md, "What is kept"): a browser's
 * state, nonce and PKCE verifier until the provider's redirect, a CLI's device code until it is
 * approved, a session waiting for the CLI's loopback hand-off. Each under the SHA-256 of its
 * one-time handle, sealed with the storage key, with a short expiry, in the database: the redirect
 * or the poll may reach another gateway process on the same database.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { rowsChanged } from "../../platform/store/dialect.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { sha256 } from "./password.js"

export type LoginKind = "browser" | "device" | "cli"

export const makeLoginStore = (deps: { readonly sql: SqlClient.SqlClient; readonly secrets: SecretsShape }) => {
  const { sql, secrets } = deps

  /** Keeps `data` under `handle` for `ttlMs`; the expired rows of any sign-in go at the same time. */
  const put = (kind: LoginKind, providerId: string, handle: string, data: unknown, ttlMs: number) =>
    Effect.gen(function* () {
      const t = Date.now()
      yield* sql`DELETE FROM oidc_logins WHERE expires_at <= ${t}`
      yield* sql`INSERT INTO oidc_logins ${sql.insert({
        handle_hash: sha256(handle),
        kind,
        provider_id: providerId,
        data_enc: secrets.encrypt(JSON.stringify(data)),
        created_at: t,
        expires_at: t + ttlMs
      })}`
    }).pipe(Effect.orDie)

  const read = <A>(kind: LoginKind, handle: string) =>
    Effect.gen(function* () {
      const rows = yield* sql<{
        kind: string
        provider_id: string
        data_enc: string
        expires_at: number | string
      }>`SELECT kind, provider_id, data_enc, expires_at FROM oidc_logins WHERE handle_hash = ${sha256(handle)}`.pipe(Effect.orDie)
      const row = rows[0]
      if (row === undefined || row.kind !== kind || Number(row.expires_at) <= Date.now()) return undefined
      const plain = yield* secrets.decrypt(row.data_enc).pipe(Effect.option)
      if (plain._tag === "None") return undefined
      return { providerId: row.provider_id, data: JSON.parse(Redacted.value(plain.value)) as A, expiresAt: Number(row.expires_at) }
    })

  /** The row under `handle`, read and removed in one step: a second use (or another process's) finds nothing. */
  const take = <A>(kind: LoginKind, handle: string) =>
    Effect.gen(function* () {
      const found = yield* read<A>(kind, handle)
      if (found === undefined) return undefined
      const gone = yield* sql`DELETE FROM oidc_logins WHERE handle_hash = ${sha256(handle)}`.raw.pipe(Effect.orDie)
      // Whoever deleted it owns it: a second process taking the same handle at once finds no row to delete.
      return rowsChanged(gone) > 0 ? found : undefined
    })

  const remove = (handle: string) => sql`DELETE FROM oidc_logins WHERE handle_hash = ${sha256(handle)}`.pipe(Effect.asVoid, Effect.orDie)

  return { put, read, take, remove }
}

export type LoginStore = ReturnType<typeof makeLoginStore>
