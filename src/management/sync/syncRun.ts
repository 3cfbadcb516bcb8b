/**
 * A push, a pull or a sync against the space. Versions decide: a side changed when its
 * configuration (digest) or the server's version moved since the last push or pull; both changed
 * is a SyncConflict with a report of what differs per section (stored as the last conflict),
 * resolved by a forced push or pull.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { BadRequest } from "../../domain/errors.js"
import { type BundleContent, SyncConflict, type SyncResult } from "../../domain/sync.js"
import { type ConfigBundleShape, counts, diff, digest, openBundle, sealBundle } from "./ConfigBundle.js"
import type { CloudSyncShape } from "./CloudSync.js"
import type { SyncServer } from "./syncServer.js"
import type { SyncState, SyncStateStore } from "./syncState.js"

export interface SyncRunDeps {
  readonly state: SyncStateStore
  readonly bundle: ConfigBundleShape
  readonly server: (serverUrl: string, apiKey: string) => SyncServer
  /** Runs one sync operation at a time. */
  readonly serialized: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
}

/** Both sides changed: the report stored as the last conflict, a warning logged, and the SyncConflict that carries it. */
const conflictOf =
  (state: SyncStateStore) =>
  (s: SyncState, action: string, local: BundleContent, remote: BundleContent, remoteVersion: number, localChanged: boolean) =>
    Effect.gen(function* () {
      const report = {
        at: new Date().toISOString(),
        action,
        baseVersion: s.baseVersion,
        remoteVersion,
        localChanged,
        remoteChanged: remoteVersion !== s.baseVersion,
        sections: diff(local, remote),
        resolve: 'keep this gateway\'s configuration: { action: "push", force: true }; take the server\'s: { action: "pull", force: true }'
      }
      yield* state.save({ ...s, lastConflict: report })
      yield* Effect.logWarning(`cloud sync conflict (${action}): ${report.sections.map((d) => d.section).join(", ")} differ`)
      return yield* new SyncConflict({
        message: `both this gateway's configuration and space ${s.space} (version ${remoteVersion}, last synced ${s.baseVersion}) changed: ${report.sections.map((d) => d.section).join(", ") || "nothing"} differ`,
        report
      })
    })

/** `run`: push, pull or sync (forced or not), one at a time; answers what was done, at which version, with the sections' counts. */
export const makeSyncRun = ({ state, bundle, server, serialized }: SyncRunDeps): CloudSyncShape["run"] => {
  const conflict = conflictOf(state)
  return (action, force) =>
    serialized(
      Effect.gen(function* () {
        const s = yield* state.require
        const passphrase = Redacted.value(yield* state.reveal(s.passphraseEnc))
        const remote = server(s.serverUrl, Redacted.value(yield* state.reveal(s.apiKeyEnc)))
        const local = yield* bundle.current("plain")
        const localDigest = digest(local)
        const localChanged = localDigest !== s.baseDigest
        const remoteVersion = (yield* remote.versions(s.space)).current
        const remoteChanged = remoteVersion !== s.baseVersion
        const now = () => new Date().toISOString()
        const result = (r: SyncResult["result"], version: number, content: BundleContent): SyncResult => ({
          action,
          result: r,
          version,
          counts: counts(content)
        })

        /** The space's latest bundle, opened. */
        const fetchRemote = Effect.gen(function* () {
          const latest = yield* remote.latest(s.space)
          if (!latest) return yield* new BadRequest({ message: `space ${s.space} has no bundle yet: push first` })
          return { version: latest.version, content: yield* openBundle(latest.ciphertext, passphrase) }
        })

        const push = (base: number) =>
          Effect.gen(function* () {
            const stored = yield* remote.put(s.space, base, sealBundle(local, passphrase))
            if (stored._tag === "Conflict") {
              const r = yield* fetchRemote
              return yield* conflict(s, action, local, r.content, r.version, localChanged)
            }
            yield* state.save({ ...s, baseVersion: stored.version, baseDigest: localDigest, lastPush: now() })
            yield* Effect.logInfo(`cloud sync: pushed version ${stored.version} to space ${s.space}`)
            return result("pushed", stored.version, local)
          })

        const pull = Effect.gen(function* () {
          const r = yield* fetchRemote
          if (!force && localChanged && digest(r.content) !== localDigest)
            return yield* conflict(s, action, local, r.content, r.version, localChanged)
          yield* bundle.apply(r.content)
          const after = digest(yield* bundle.current("plain"))
          yield* state.save({ ...s, baseVersion: r.version, baseDigest: after, lastPull: now() })
          return result("pulled", r.version, r.content)
        })

        /** Both sides moved; if they hold the same configuration, that version is the new base. */
        const sameAsRemote = Effect.gen(function* () {
          if (remoteVersion === 0) return false
          const r = yield* fetchRemote
          if (digest(r.content) !== localDigest) return false
          yield* state.save({ ...s, baseVersion: r.version, baseDigest: localDigest })
          return true
        })

        switch (action) {
          case "push": {
            if (force) return yield* push(remoteVersion)
            if (!remoteChanged)
              return localChanged || remoteVersion === 0 ? yield* push(s.baseVersion) : result("up-to-date", remoteVersion, local)
            if (yield* sameAsRemote) return result("up-to-date", remoteVersion, local)
            const r = yield* fetchRemote
            return yield* conflict(s, action, local, r.content, r.version, localChanged)
          }
          case "pull": {
            if (remoteVersion === 0) return yield* new BadRequest({ message: `space ${s.space} has no bundle yet: push first` })
            if (!force && !remoteChanged) return result("up-to-date", remoteVersion, local)
            return yield* pull
          }
          case "sync": {
            if (!remoteChanged && !localChanged) return result("up-to-date", remoteVersion, local)
            if (!remoteChanged) return yield* push(s.baseVersion)
            if (!localChanged) return yield* pull
            if (yield* sameAsRemote) return result("up-to-date", remoteVersion, local)
            const r = yield* fetchRemote
            return yield* conflict(s, action, local, r.content, r.version, localChanged)
          }
        }
      })
    ).pipe(Effect.withSpan("CloudSync.run", { attributes: { action, force } }))
}
