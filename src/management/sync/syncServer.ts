/**
 * The client of a sync server: the derived management client, pointed only at the operator's
 * server URL, through the control-plane egress (the global default proxy, docs/egress.md), each
 * call with a timeout and a transport retry, its failures told in the operator's terms.
 */
import * as Config from "effect/Config"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { SyncServerError } from "../../domain/sync.js"
import type { UpstreamHttpShape } from "../../upstream/client/UpstreamHttp.js"
import type { EgressShape } from "../../upstream/egress/Egress.js"
import type { SyncClient } from "./syncClient.js"

/** How long one call to the sync server may take (GATEWAY_SYNC_TIMEOUT_MS, default 10 s). */
export const SyncTimeout = Config.integer("GATEWAY_SYNC_TIMEOUT_MS").pipe(Config.withDefault(10_000))

/** A call that did not reach the server is tried twice more, 250 ms then 500 ms later. */
const transportRetry = Schedule.exponential("250 millis").pipe(Schedule.intersect(Schedule.recurs(2)))

const describe = (e: unknown): string => {
  const tag = (e as { _tag?: string })?._tag
  const message = (e as { message?: string })?.message
  if (tag === "RequestError") return `no answer (${message ?? "connection failed"})`
  if (tag === "TimeoutException") return "no answer within the timeout (GATEWAY_SYNC_TIMEOUT_MS)"
  if (tag === "Unauthorized" || tag === "Forbidden")
    return `the API key was refused (it must be an admin key of the sync server): ${message ?? ""}`.trim()
  if (tag === "EgressRefused") return `${(e as { code: string }).code}: ${message ?? ""}`
  if (tag === "ResponseError") return `unexpected answer: ${message ?? ""}`.trim()
  return `${tag ?? "error"}: ${message ?? String(e)}`
}

export interface SyncServerDeps {
  readonly egress: EgressShape
  readonly http: UpstreamHttpShape
  /** One call's time limit (SyncTimeout). */
  readonly timeout: Duration.Duration
}

/** A sync server's client for a URL and an admin API key: a space's versions, its latest bundle, and a put against a base version. */
export const makeSyncServer =
  ({ egress, http, timeout }: SyncServerDeps) =>
  (serverUrl: string, apiKey: string) => {
    // The API client and what it is made of (the cloud group's contract, the HTTP API client) load
    // with the first call: a start builds this service for every gateway, few sync.
    const client = Effect.flatMap(egress.control(null, serverUrl), (via) =>
      Effect.flatMap(
        Effect.promise(() => import("./syncClient.js")),
        ({ syncClient }) =>
          syncClient(
            serverUrl,
            apiKey,
            via ? (input, init) => http.fetch(input, { ...init, dispatcher: via } as unknown as RequestInit) : http.fetch
          )
      )
    )
    /** One call with the timeout and the transport retry; failures other than `keep` become SyncServerError. */
    const call = <A, E>(label: string, f: (c: SyncClient) => Effect.Effect<A, E>) =>
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

/** The client `makeSyncServer` makes for one server. */
export type SyncServer = ReturnType<ReturnType<typeof makeSyncServer>>
