import * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type { CreateProxy, PatchProxy, ProxyFamily, ProxyType, ProxyView } from "../../domain/proxies.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { loadProxies, makeProxyReads, proxyView } from "./proxyEntries.js"
import { makeProxyWrites } from "./proxyWrites.js"

export { entryUrl } from "./proxyEntries.js"
export { SOCKS5_DISABLED } from "./proxyWrites.js"

/** One registry entry as the egress layer uses it (password decrypted). */
export interface ProxyEntry {
  readonly id: string
  readonly name: string
  readonly type: ProxyType
  readonly host: string
  readonly port: number
  readonly username: string | null
  readonly password: Redacted.Redacted<string> | null
  /** Set when the stored password cannot be decrypted with the current storage key. */
  readonly passwordError: string | null
  readonly family: ProxyFamily
  readonly free: boolean
  readonly createdAt: number
  readonly updatedAt: number
}

export interface ProxySnapshot {
  /** Oldest first (created_at, then id): the order auto-select tries them in. */
  readonly all: ReadonlyArray<ProxyEntry>
  readonly byId: ReadonlyMap<string, ProxyEntry>
}

export interface ProxyRegistryShape {
  readonly snapshot: Effect.Effect<ProxySnapshot>
  /** The snapshot when it is known fresh without reading anything (the request path). */
  readonly peek: () => ProxySnapshot | undefined
  readonly list: Effect.Effect<ReadonlyArray<ProxyView>>
  readonly get: (id: string) => Effect.Effect<ProxyView, NotFound>
  readonly create: (input: CreateProxy, actor: string) => Effect.Effect<ProxyView, BadRequest | Conflict>
  readonly update: (id: string, patch: PatchProxy, actor: string) => Effect.Effect<ProxyView, BadRequest | Conflict | NotFound>
  readonly remove: (id: string, actor: string) => Effect.Effect<ProxyView, Conflict | NotFound>
  /** Called after every change (the egress layer drops the dispatchers of changed entries). */
  readonly onChange: (listener: () => void) => void
  /** ENABLE_SOCKS5_PROXY (env, default on). */
  readonly socks5Enabled: boolean
}

/**
 * The proxy registry (`/api/v1/management/proxies`): entries in the `proxies` table, the
 * password encrypted like provider API keys, read whole into a snapshot the request path peeks.
 * The entries as read and shown are proxyEntries.ts, the checked changes proxyWrites.ts.
 */
export class ProxyRegistry extends Context.Tag("gateway/ProxyRegistry")<ProxyRegistry, ProxyRegistryShape>() {
  static readonly layer = Layer.effect(
    ProxyRegistry,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const version = yield* StoreVersion
      const writer = yield* BatchWriter
      const socks5Enabled = yield* Config.boolean("ENABLE_SOCKS5_PROXY").pipe(Config.withDefault(true))
      const listeners: Array<() => void> = []

      const cache = makeCachedLoad(version, loadProxies({ sql, secrets }))
      const changed = Effect.zipRight(
        cache.invalidate,
        Effect.sync(() => {
          for (const l of listeners) l()
        })
      )
      const { find, list } = makeProxyReads({ sql, snapshot: cache.get })
      const { create, update, remove } = makeProxyWrites({ sql, secrets, writer, socks5Enabled, find, changed })

      return {
        snapshot: cache.get,
        peek: cache.peek,
        list,
        get: (id) => Effect.map(find(id), (f) => proxyView(f.entry, f.usedBy)),
        create,
        update,
        remove,
        onChange: (l) => {
          listeners.push(l)
        },
        socks5Enabled
      } satisfies ProxyRegistryShape
    })
  )
}
