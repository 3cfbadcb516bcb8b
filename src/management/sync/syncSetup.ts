/**
 * Setting up cloud sync and reading where it stands: `initialize` checks the server, the key and
 * (when the space holds a bundle) the passphrase before storing the connection; `status` compares
 * this gateway's configuration and the space's version with the last push or pull.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { BadRequest } from "../../domain/errors.js"
import type { SyncInitialize, SyncServerError, SyncStatus } from "../../domain/sync.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { type ConfigBundleShape, digest, openBundle } from "./ConfigBundle.js"
import type { SyncServer } from "./syncServer.js"
import type { SyncStateStore } from "./syncState.js"

export interface SyncSetupDeps {
  readonly state: SyncStateStore
  readonly secrets: SecretsShape
  readonly bundle: ConfigBundleShape
  readonly server: (serverUrl: string, apiKey: string) => SyncServer
  /** Runs one sync operation at a time. */
  readonly serialized: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
}

/** `status`: not configured, or the versions on both sides, whether this side changed, and the last push, pull and conflict (the server's
 * error if it could not be asked). */
export const makeSyncStatus = ({ state, bundle, server }: Omit<SyncSetupDeps, "secrets" | "serialized">): Effect.Effect<SyncStatus> =>
  Effect.gen(function* () {
    const found = yield* state.load
    if (Option.isNone(found)) {
      return {
        configured: false,
        serverUrl: null,
        space: null,
        localVersion: 0,
        remoteVersion: null,
        remoteError: null,
        localChanged: false,
        lastPush: null,
        lastPull: null,
        lastConflict: null
      }
    }
    const s = found.value
    const local = digest(yield* bundle.current("plain"))
    const remote = yield* Effect.either(
      Effect.flatMap(state.reveal(s.apiKeyEnc), (key) =>
        Effect.map(server(s.serverUrl, Redacted.value(key)).versions(s.space), (v) => v.current)
      )
    )
    return {
      configured: true,
      serverUrl: s.serverUrl,
      space: s.space,
      localVersion: s.baseVersion,
      remoteVersion: remote._tag === "Right" ? remote.right : null,
      remoteError: remote._tag === "Left" ? remote.left.message : null,
      localChanged: local !== s.baseDigest,
      lastPush: s.lastPush,
      lastPull: s.lastPull,
      lastConflict: s.lastConflict
    } satisfies SyncStatus
  }).pipe(Effect.withSpan("CloudSync.status"))

/** `initialize`: the server asked (and the space's bundle opened with the passphrase, if there is one), the connection stored, then the
 * status. */
export const makeSyncInitialize =
  ({ state, secrets, bundle, server, serialized }: SyncSetupDeps, status: Effect.Effect<SyncStatus>) =>
  (input: SyncInitialize): Effect.Effect<SyncStatus, BadRequest | SyncServerError> =>
    serialized(
      Effect.gen(function* () {
        const remote = server(input.serverUrl, input.apiKey)
        const versions = yield* Effect.mapError(
          remote.versions(input.space),
          (e) => new BadRequest({ message: `serverUrl, apiKey: cannot use the sync server: ${e.message}` })
        )
        if (versions.current > 0) {
          // A passphrase that does not open the space's bundle is refused now, not at the first pull.
          const latest = yield* remote.latest(input.space)
          if (latest) yield* openBundle(latest.ciphertext, input.passphrase)
        }
        yield* state.save({
          serverUrl: input.serverUrl.replace(/\/+$/, ""),
          space: input.space,
          apiKeyEnc: secrets.encrypt(input.apiKey),
          passphraseEnc: secrets.encrypt(input.passphrase),
          baseVersion: 0,
          baseDigest: digest(yield* bundle.current("plain")),
          lastPush: null,
          lastPull: null,
          lastConflict: null
        })
        yield* Effect.logInfo(`cloud sync set up: ${input.serverUrl} space ${input.space} (version ${versions.current} there)`)
      })
    ).pipe(Effect.zipRight(status))
