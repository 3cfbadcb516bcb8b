/**
 * On a shared (PostgreSQL) database, refuses to start a gateway whose storage key cannot decrypt the check value the first one
 * stored in `kv`, instead of failing its upstream calls later (docs/scale-out.md). SQLite keeps its key file beside it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { Secrets } from "./Secrets.js"

const CHECK = "gateway storage key check"

export class StorageKeyMismatch extends Error {
  readonly _tag = "StorageKeyMismatch"
}

export const SharedStorageKeyCheck = Layer.effectDiscard(
  Effect.gen(function* () {
    const shared = Option.isSome(yield* Config.option(Config.nonEmptyString("DATABASE_URL")))
    if (!shared) return
    const sql = yield* SqlClient.SqlClient
    const secrets = yield* Secrets
    yield* sql`INSERT INTO kv (namespace, key, value, updated_at) VALUES ('storage', 'key-check', ${secrets.encrypt(CHECK)}, ${Date.now()}) ON CONFLICT (namespace, key) DO NOTHING`
    const rows = yield* sql<{ value: string }>`SELECT value FROM kv WHERE namespace = 'storage' AND key = 'key-check'`
    const decrypted = rows.length === 0 ? undefined : yield* Effect.option(secrets.decrypt(rows[0]!.value))
    if (decrypted !== undefined && Option.isSome(decrypted) && Redacted.value(decrypted.value) === CHECK) return
    return yield* Effect.fail(
      new StorageKeyMismatch(
        secrets.source === "env"
          ? "the shared database's secrets were encrypted with another storage key than this STORAGE_ENCRYPTION_KEY: give every gateway on this database the same STORAGE_ENCRYPTION_KEY (docs/scale-out.md)"
          : `the shared database's secrets were encrypted with another storage key than this gateway's ${secrets.keyFile}: set STORAGE_ENCRYPTION_KEY, the same on every gateway on this database (docs/scale-out.md)`
      )
    )
  }).pipe(
    Effect.catchTag("SqlError", (e) =>
      Effect.fail(new StorageKeyMismatch(`the storage key check could not read the database: ${e.message}`))
    )
  )
)
