/**
 * This gateway's connection to a sync server, as stored in `kv` (namespace `sync`, never bundled):
 * the server, the space, the API key and passphrase encrypted with the storage key, and where the
 * last push or pull left the two sides.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../domain/errors.js"
import { ConflictReport } from "../../domain/sync.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"

export const SYNC_NAMESPACE = "sync"
const STATE_KEY = "state"

/** This gateway's connection to a sync server, in `kv` (namespace `sync`, never bundled); the key and passphrase encrypted with the storage
 * key. */
const SyncState = Schema.Struct({
  serverUrl: Schema.String,
  space: Schema.String,
  apiKeyEnc: Schema.String,
  passphraseEnc: Schema.String,
  /** The server version last pushed or pulled (0: none yet). */
  baseVersion: Schema.Number,
  /** The digest of this gateway's configuration at that version (or at initialize). */
  baseDigest: Schema.String,
  lastPush: Schema.NullOr(Schema.String),
  lastPull: Schema.NullOr(Schema.String),
  lastConflict: Schema.NullOr(ConflictReport)
})
export type SyncState = typeof SyncState.Type
const StateJson = Schema.parseJson(SyncState)

/** The stored connection: read, written, forgotten, and its secrets decrypted. */
export interface SyncStateStore {
  /** The connection, if set up (a record that does not decode counts as none). */
  readonly load: Effect.Effect<Option.Option<SyncState>>
  /** The connection, or BadRequest saying to initialize first. */
  readonly require: Effect.Effect<SyncState, BadRequest>
  readonly save: (state: SyncState) => Effect.Effect<void>
  /** Forgets the connection; answers whether there was one. */
  readonly forget: Effect.Effect<boolean>
  /** A stored secret in clear, or BadRequest when the storage key no longer opens it. */
  readonly reveal: (stored: string) => Effect.Effect<Redacted.Redacted<string>, BadRequest>
}

/** The sync connection's store over `kv`, its secrets decrypted with the storage key. */
export const makeSyncStateStore = ({ kv, secrets }: { readonly kv: KeyValueShape; readonly secrets: SecretsShape }): SyncStateStore => {
  const load: Effect.Effect<Option.Option<SyncState>> = Effect.map(kv.get(SYNC_NAMESPACE, STATE_KEY), (raw) =>
    Option.flatMap(raw, (text) => Option.getRight(Schema.decodeUnknownEither(StateJson)(text)))
  )
  return {
    load,
    require: Effect.flatMap(load, (s) =>
      Option.isSome(s)
        ? Effect.succeed(s.value)
        : Effect.fail(new BadRequest({ message: "cloud sync is not set up: POST /api/sync/initialize first" }))
    ),
    save: (state) => kv.set(SYNC_NAMESPACE, STATE_KEY, Schema.encodeSync(StateJson)(state)),
    forget: kv.remove(SYNC_NAMESPACE, STATE_KEY),
    reveal: (stored) =>
      Effect.mapError(
        secrets.decrypt(stored),
        () => new BadRequest({ message: "the stored sync credentials do not decrypt with this storage key: initialize again" })
      )
  }
}
