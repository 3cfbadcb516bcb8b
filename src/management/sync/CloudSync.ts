import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BadRequest } from "../../domain/errors.js"
import type { SyncConflict, SyncInitialize, SyncResult, SyncServerError, SyncStatus } from "../../domain/sync.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { Egress } from "../../upstream/egress/Egress.js"
import { ConfigBundle } from "./ConfigBundle.js"
import { makeSyncRun } from "./syncRun.js"
import { makeSyncServer, SyncTimeout } from "./syncServer.js"
import { makeSyncInitialize, makeSyncStatus } from "./syncSetup.js"
import { makeSyncStateStore } from "./syncState.js"

export { SYNC_NAMESPACE } from "./syncState.js"

type Failure = BadRequest | SyncConflict | SyncServerError

export interface CloudSyncShape {
  readonly status: Effect.Effect<SyncStatus>
  readonly initialize: (input: SyncInitialize) => Effect.Effect<SyncStatus, BadRequest | SyncServerError>
  readonly run: (action: "push" | "pull" | "sync", force: boolean) => Effect.Effect<SyncResult, Failure>
  /** Forgets the server, key and passphrase; answers whether there was a connection. */
  readonly disconnect: Effect.Effect<boolean>
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

      const state = makeSyncStateStore({ kv, secrets })
      const server = makeSyncServer({ egress, http, timeout })
      const serialized = lock.withPermits(1)
      const status = makeSyncStatus({ state, bundle, server })
      const initialize = makeSyncInitialize({ state, secrets, bundle, server, serialized }, status)
      const run = makeSyncRun({ state, bundle, server, serialized })
      const disconnect = Effect.tap(state.forget, (removed) => (removed ? Effect.logInfo("cloud sync disconnected") : Effect.void))

      return { status, initialize, run, disconnect } satisfies CloudSyncShape
    })
  )
}
