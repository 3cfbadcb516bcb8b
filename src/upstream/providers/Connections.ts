import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type { CreateConnection, UpdateConnection } from "../../domain/connections.js"
import { type BadRequest, type Conflict, NotFound } from "../../domain/errors.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { findProvider, type ProviderSpec } from "../../domain/catalog/catalog.js"
import type { CustomModelRecord } from "./customModels.js"
import type { NodeRecord } from "./nodeRecords.js"
import { type UrlPolicyFlags, urlPolicyFlags } from "./urlPolicy.js"
import type { Connection, ModelNotFound, ResolvedTarget } from "./connection.js"
import { loadSnapshot, type Snapshot } from "./connectionSnapshot.js"
import { makeConnectionWrites } from "./connectionWrites.js"
import { targetsIn } from "./modelTargets.js"

export {
  type Connection,
  type ConnectionOAuth,
  connectionModelIds,
  connectionView,
  ModelNotFound,
  type ResolvedTarget
} from "./connection.js"

export interface ConnectionsShape {
  readonly list: Effect.Effect<ReadonlyArray<Connection>>
  readonly get: (idOrName: string) => Effect.Effect<Connection, NotFound>
  readonly create: (input: CreateConnection, actor?: string) => Effect.Effect<Connection, BadRequest | Conflict>
  readonly update: (
    idOrName: string,
    patch: UpdateConnection,
    actor?: string
  ) => Effect.Effect<Connection, BadRequest | NotFound | Conflict>
  readonly remove: (idOrName: string, actor?: string) => Effect.Effect<Connection, NotFound>
  readonly recordTest: (id: string, result: { readonly ok: boolean; readonly error: string | null }) => Effect.Effect<void>
  /** Resolves `<name or provider>/<model>`, or a bare model id that exactly one catalog entry serves. */
  readonly resolve: (model: string) => Effect.Effect<ResolvedTarget, ModelNotFound>
  /**
   * Every enabled connection that can serve a model id, best priority first: a connection
   * name gives that connection; a provider id gives all of the provider's connections (account
   * failover); a bare id gives every connection serving exactly that id.
   */
  readonly targets: (model: string) => Effect.Effect<ReadonlyArray<ResolvedTarget>, ModelNotFound>
  /** `targets` answered from memory when the cached connections are known fresh, else undefined (use `targets`). */
  readonly peekTargets: (model: string) => Either.Either<ReadonlyArray<ResolvedTarget>, ModelNotFound> | undefined
  readonly urlPolicy: Effect.Effect<UrlPolicyFlags>
  /** `urlPolicy` when the flags are known fresh, else undefined (use `urlPolicy`). */
  readonly peekUrlPolicy: () => UrlPolicyFlags | undefined
  /** Every connection when the cached snapshot is known fresh, else undefined (use `list`). */
  readonly peekList: () => ReadonlyArray<Connection> | undefined
  /** The list last loaded, fresh or not: what a request that has just routed through `list` saw. */
  readonly lastList: () => ReadonlyArray<Connection> | undefined
  /** Custom models and catalog overrides (`/api/provider-models`), as stored. */
  readonly customModels: Effect.Effect<ReadonlyArray<CustomModelRecord>>
  /** Drops the snapshot after a write elsewhere (custom models, provider nodes): the next read rebuilds it. */
  readonly reload: Effect.Effect<void>
  /** Provider nodes (`/api/provider-nodes`), as stored, and the provider spec each defines. */
  readonly nodes: Effect.Effect<ReadonlyArray<{ readonly record: NodeRecord; readonly spec: ProviderSpec }>>
  /** A catalog provider or a provider node, by id (a node also by its prefix). */
  readonly provider: (idOrPrefix: string) => Effect.Effect<ProviderSpec | undefined>
}

/**
 * Provider connections: a provider from the catalog plus credentials, base URL and limits.
 * Reads are served from an in-memory snapshot (decrypted once) that is rebuilt when this
 * process writes or another process commits.
 */
export class Connections extends Context.Tag("gateway/Connections")<Connections, ConnectionsShape>() {
  static readonly layer = Layer.effect(
    Connections,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const flags = yield* FeatureFlags
      const version = yield* StoreVersion
      const writer = yield* BatchWriter

      const snapshot = makeCachedLoad(version, loadSnapshot({ sql, secrets }))

      // Asked twice per upstream request: answers one of the shared policy objects, nothing allocated.
      const peekUrlPolicy = (): UrlPolicyFlags | undefined => {
        const guard = flags.peekEnabled("OUTBOUND_SSRF_GUARD_ENABLED")
        const allowLocal = flags.peekEnabled("GATEWAY_ALLOW_LOCAL_PROVIDER_URLS")
        const allowPrivate = flags.peekEnabled("GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS")
        return guard !== undefined && allowLocal !== undefined && allowPrivate !== undefined
          ? urlPolicyFlags(guard, allowLocal, allowPrivate)
          : undefined
      }
      const urlPolicy = Effect.suspend(() => {
        const known = peekUrlPolicy()
        return known ? Effect.succeed(known) : urlPolicyRead
      })
      const urlPolicyRead = Effect.flatMap(flags.enabled("OUTBOUND_SSRF_GUARD_ENABLED"), (guard) =>
        Effect.zipWith(
          flags.enabled("GATEWAY_ALLOW_LOCAL_PROVIDER_URLS"),
          flags.enabled("GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS"),
          (allowLocal, allowPrivate) => urlPolicyFlags(guard, allowLocal, allowPrivate)
        )
      )

      const find = (s: Snapshot, idOrName: string) => s.all.find((c) => c.id === idOrName) ?? s.byName.get(idOrName.toLowerCase())

      const get = (idOrName: string) =>
        Effect.flatMap(snapshot.get, (s) => {
          const c = find(s, idOrName)
          return c ? Effect.succeed(c) : Effect.fail(new NotFound({ message: `no provider connection with id or name '${idOrName}'` }))
        })

      const { create, update, remove, recordTest } = makeConnectionWrites({
        sql,
        secrets,
        flags,
        writer,
        snapshot: snapshot.get,
        invalidate: snapshot.invalidate,
        get,
        urlPolicy
      })

      const targets: ConnectionsShape["targets"] = (model) => Effect.flatMap(snapshot.get, (s) => targetsIn(s, model))

      const peekTargets: ConnectionsShape["peekTargets"] = (model) => {
        const s = snapshot.peek()
        return s === undefined ? undefined : targetsIn(s, model)
      }

      const resolve: ConnectionsShape["resolve"] = (model) => Effect.map(targets(model), (all) => all[0]!)

      return {
        list: Effect.map(snapshot.get, (s) => s.all),
        get,
        create,
        update,
        remove,
        recordTest,
        resolve,
        targets,
        peekTargets,
        urlPolicy,
        peekUrlPolicy,
        peekList: () => snapshot.peek()?.all,
        lastList: () => snapshot.last()?.all,
        customModels: Effect.map(snapshot.get, (s) => s.custom),
        reload: snapshot.invalidate,
        nodes: Effect.map(snapshot.get, (s) => s.nodes),
        provider: (idOrPrefix) => Effect.map(snapshot.get, (s) => findProvider(idOrPrefix) ?? s.nodeBy.get(idOrPrefix.toLowerCase()))
      }
    })
  )
}
