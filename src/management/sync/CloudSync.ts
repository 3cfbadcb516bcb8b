import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../domain/errors.js"
import { type BundleContent, ConflictReport, SyncConflict, type SyncInitialize, type SyncResult, SyncServerError, type SyncStatus } from "../../domain/sync.js"
import { ManagementApi } from "../api/Api.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { Egress } from "../../upstream/egress/Egress.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { ConfigBundle, counts, diff, digest, openBundle, sealBundle } from "./Bundle.js"

export const SYNC_NAMESPACE = "sync"
const STATE_KEY = "state"

/** This gateway's connection to a sync server, in `kv` (namespace `sync`, never bundled); the key and passphrase encrypted with the storage key. */
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
type SyncState = typeof SyncState.Type
const StateJson = Schema.parseJson(SyncState)

/** How long one call to the sync server may take (GATEWAY_SYNC_TIMEOUT_MS, default 10 s). */
const SyncTimeout = Config.integer("GATEWAY_SYNC_TIMEOUT_MS").pipe(Config.withDefault(10_000))

/** A call that did not reach the server is tried twice more, 250 ms then 500 ms later. */
const transportRetry = Schedule.exponential("250 millis").pipe(Schedule.intersect(Schedule.recurs(2)))

type Failure = BadRequest | SyncConflict | SyncServerError

export interface CloudSyncShape {
  readonly status: Effect.Effect<SyncStatus>
  readonly initialize: (input: SyncInitialize) => Effect.Effect<SyncStatus, BadRequest | SyncServerError>
  readonly run: (action: "push" | "pull" | "sync", force: boolean) => Effect.Effect<SyncResult, Failure>
  /** Forgets the server, key and passphrase; answers whether there was a connection. */
  readonly disconnect: Effect.Effect<boolean>
}

const describe = (e: unknown): string => {
  const tag = (e as { _tag?: string })?._tag
  const message = (e as { message?: string })?.message
  if (tag === "RequestError") return `no answer (${message ?? "connection failed"})`
  if (tag === "TimeoutException") return "no answer within the timeout (GATEWAY_SYNC_TIMEOUT_MS)"
  if (tag === "Unauthorized" || tag === "Forbidden") return `the API key was refused (it must be an admin key of the sync server): ${message ?? ""}`.trim()
  if (tag === "EgressRefused") return `${(e as { code: string }).code}: ${message ?? ""}`
  if (tag === "ResponseError") return `unexpected answer: ${message ?? ""}`.trim()
  return `${tag ?? "error"}: ${message ?? String(e)}`
}

/**
 * The sync client (docs/operations.md, "Cloud sync"): pushes this gateway's configuration,
 * sealed with the passphrase, to the space on the sync server, and pulls and applies the
 * space's latest bundle. Versions decide: a side changed when its configuration (digest) or the
 * server's version moved since the last push or pull; both changed is a 409 with a report of
 * what differs per section, resolved by a forced push or pull.
 */
export class CloudSync extends Context.Tag("gateway/CloudSync")<CloudSync, CloudSyncShape>() {
  static readonly layer = Layer.effect(
    CloudSync,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const secrets = yield* Secrets
      const bundle = yield* ConfigBundle
      const timeout = Duration.millis(yield* Effect.orDie(SyncTimeout))
      const lock = yield* Effect.makeSemaphore(1)
      // The sync server is an outbound call like any other: through the agent that enforces the SSRF guard.
      const http = yield* UpstreamHttp
      const egress = yield* Egress

      const load: Effect.Effect<Option.Option<SyncState>> = Effect.map(kv.get(SYNC_NAMESPACE, STATE_KEY), (raw) =>
        Option.flatMap(raw, (text) => Option.getRight(Schema.decodeUnknownEither(StateJson)(text)))
      )
      const save = (state: SyncState) => kv.set(SYNC_NAMESPACE, STATE_KEY, Schema.encodeSync(StateJson)(state))

      const reveal = (stored: string) =>
        Effect.mapError(secrets.decrypt(stored), () => new BadRequest({ message: "the stored sync credentials do not decrypt with this storage key: initialize again" }))

      /**
       * The sync server's client: the derived management client, pointed only at the operator's
       * server URL, through the control-plane egress (the global default proxy, docs/egress.md).
       */
      const server = (serverUrl: string, apiKey: string) => {
        const client = Effect.flatMap(egress.control(null, serverUrl), (via) =>
          HttpApiClient.make(ManagementApi, {
            baseUrl: serverUrl.replace(/\/+$/, ""),
            transformClient: (c) => HttpClient.mapRequest(c, HttpClientRequest.bearerToken(apiKey))
          }).pipe(
            Effect.provide(FetchHttpClient.layer),
            Effect.provideService(FetchHttpClient.Fetch, via ? (input, init) => http.fetch(input, { ...init, dispatcher: via } as unknown as RequestInit) : http.fetch)
          )
        )
        /** One call with the timeout and the transport retry; failures other than `keep` become SyncServerError. */
        const call = <A, E>(label: string, f: (c: Effect.Effect.Success<typeof client>) => Effect.Effect<A, E>) =>
          Effect.flatMap(client, (c) =>
            f(c).pipe(
              Effect.timeoutFail({ duration: timeout, onTimeout: () => ({ _tag: "TimeoutException" as const, message: "timeout" }) }),
              Effect.retry({ schedule: transportRetry, while: (e) => (e as { _tag?: string })?._tag === "RequestError" })
            )
          ).pipe(Effect.withSpan(`CloudSync.${label}`))
        return {
          versions: (space: string) =>
            call("versions", (c) => c.cloud.versions({ path: { space } })).pipe(
              Effect.mapError((e) => new SyncServerError({ message: `sync server ${serverUrl}: ${describe(e)}` }))
            ),
          latest: (space: string) =>
            call("latest", (c) => c.cloud.latest({ path: { space } })).pipe(
              Effect.catchIf(
                (e) => (e as { _tag?: string })._tag === "NotFound",
                () => Effect.succeed(undefined)
              ),
              Effect.mapError((e) => new SyncServerError({ message: `sync server ${serverUrl}: ${describe(e)}` }))
            ),
          put: (space: string, baseVersion: number, ciphertext: string) =>
            call("put", (c) => c.cloud.put({ path: { space }, payload: { baseVersion, ciphertext } })).pipe(
              Effect.map((v) => ({ _tag: "Stored" as const, version: v.version })),
              Effect.catchIf(
                (e) => (e as { _tag?: string })._tag === "VersionConflict",
                (e) => Effect.succeed({ _tag: "Conflict" as const, version: (e as unknown as { currentVersion: number }).currentVersion })
              ),
              Effect.mapError((e) => new SyncServerError({ message: `sync server ${serverUrl}: ${describe(e)}` }))
            )
        }
      }

      const requireState = Effect.flatMap(load, (s) =>
        Option.isSome(s) ? Effect.succeed(s.value) : Effect.fail(new BadRequest({ message: "cloud sync is not set up: POST /api/sync/initialize first" }))
      )

      const status = Effect.gen(function* () {
        const found = yield* load
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
        const remote = yield* Effect.either(Effect.flatMap(reveal(s.apiKeyEnc), (key) => Effect.map(server(s.serverUrl, Redacted.value(key)).versions(s.space), (v) => v.current)))
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

      const initialize = (input: SyncInitialize) =>
        lock
          .withPermits(1)(
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
              yield* save({
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
          )
          .pipe(Effect.zipRight(status))

      const conflict = (s: SyncState, action: string, local: BundleContent, remote: BundleContent, remoteVersion: number, localChanged: boolean) =>
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
          yield* save({ ...s, lastConflict: report })
          yield* Effect.logWarning(`cloud sync conflict (${action}): ${report.sections.map((d) => d.section).join(", ")} differ`)
          return yield* new SyncConflict({
            message: `both this gateway's configuration and space ${s.space} (version ${remoteVersion}, last synced ${s.baseVersion}) changed: ${report.sections.map((d) => d.section).join(", ") || "nothing"} differ`,
            report
          })
        })

      const run = (action: "push" | "pull" | "sync", force: boolean) =>
        lock
          .withPermits(1)(
            Effect.gen(function* () {
              const s = yield* requireState
              const passphrase = Redacted.value(yield* reveal(s.passphraseEnc))
              const remote = server(s.serverUrl, Redacted.value(yield* reveal(s.apiKeyEnc)))
              const local = yield* bundle.current("plain")
              const localDigest = digest(local)
              const localChanged = localDigest !== s.baseDigest
              const remoteVersion = (yield* remote.versions(s.space)).current
              const remoteChanged = remoteVersion !== s.baseVersion
              const now = () => new Date().toISOString()
              const result = (r: SyncResult["result"], version: number, content: BundleContent): SyncResult => ({ action, result: r, version, counts: counts(content) })

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
                  yield* save({ ...s, baseVersion: stored.version, baseDigest: localDigest, lastPush: now() })
                  yield* Effect.logInfo(`cloud sync: pushed version ${stored.version} to space ${s.space}`)
                  return result("pushed", stored.version, local)
                })

              const pull = Effect.gen(function* () {
                const r = yield* fetchRemote
                if (!force && localChanged && digest(r.content) !== localDigest) return yield* conflict(s, action, local, r.content, r.version, localChanged)
                yield* bundle.apply(r.content)
                const after = digest(yield* bundle.current("plain"))
                yield* save({ ...s, baseVersion: r.version, baseDigest: after, lastPull: now() })
                return result("pulled", r.version, r.content)
              })

              /** Both sides moved; if they hold the same configuration, that version is the new base. */
              const sameAsRemote = Effect.gen(function* () {
                if (remoteVersion === 0) return false
                const r = yield* fetchRemote
                if (digest(r.content) !== localDigest) return false
                yield* save({ ...s, baseVersion: r.version, baseDigest: localDigest })
                return true
              })

              switch (action) {
                case "push": {
                  if (force) return yield* push(remoteVersion)
                  if (!remoteChanged) return localChanged || remoteVersion === 0 ? yield* push(s.baseVersion) : result("up-to-date", remoteVersion, local)
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
          )
          .pipe(Effect.withSpan("CloudSync.run", { attributes: { action, force } }))

      const disconnect = Effect.tap(kv.remove(SYNC_NAMESPACE, STATE_KEY), (removed) => (removed ? Effect.logInfo("cloud sync disconnected") : Effect.void))

      return { status, initialize, run, disconnect } satisfies CloudSyncShape
    })
  )
}
