/**
 * The keys as the request path reads them, from memory: a presented secret verified, a key by id,
 * whether any key has shadow targets or the admin scope. The `peek*` facets answer synchronously
 * when the keys in memory are known fresh.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ApiKeyRecord } from "./ApiKeys.js"
import type { KeysByHash } from "./apiKeyRows.js"
import { sha256 } from "./password.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"

/**
 * How many presented secrets' digests are kept (`verifyIn`): a key's SHA-256 (a hash and its
 * 64-character hex text) was computed on every request. Only secrets that named a key are kept,
 * so unknown ones sent in bulk cannot push the clients' own out; a digest is the secret's alone,
 * so a key disabled, deleted or rotated since is found (or not) in the keys as they are now.
 */
const DIGESTS_KEPT = 1024

/** The lookups, made once per layer: `verify`/`peekVerify`, `byId`/`peekById`, `anyShadowed`, `hasAdminKey`, `keyCount`. */
export const makeKeyLookup = ({ byHash, touched }: { readonly byHash: KeysByHash; readonly touched: Map<string, number> }) => {
  // Keys by id, indexed once per loaded key set.
  const idIndex = new WeakMap<ReadonlyMap<string, ApiKeyRecord>, Map<string, ApiKeyRecord>>()
  const indexOf = (m: ReadonlyMap<string, ApiKeyRecord>) => {
    let index = idIndex.get(m)
    if (index === undefined) idIndex.set(m, (index = new Map(Array.from(m.values(), (r) => [r.id, r]))))
    return index
  }
  const peekById = (id: string) => {
    const m = byHash.peek()
    return m === undefined ? undefined : indexOf(m).get(id)
  }
  const byId = (id: string) => Effect.map(byHash.get, (m) => indexOf(m).get(id))
  const shadowedIn = new WeakMap<ReadonlyMap<string, ApiKeyRecord>, boolean>()
  const anyShadowed = Effect.map(byHash.get, (m) => {
    let any = shadowedIn.get(m)
    if (any === undefined) shadowedIn.set(m, (any = Array.from(m.values()).some((r) => r.shadow.length > 0)))
    return any
  })

  // The digests of the secrets that named a key lately, by the secret: a client presents the same key on every request.
  const digests = new BoundedMap<string, string>({ maxEntries: DIGESTS_KEPT })
  const verifyIn = (m: ReadonlyMap<string, ApiKeyRecord>, secret: string): Option.Option<ApiKeyRecord> => {
    const known = digests.peek(secret)
    const digest = known ?? sha256(secret)
    const record = m.get(digest)
    if (record !== undefined && known === undefined) digests.set(secret, digest)
    if (record === undefined || !record.enabled) return Option.none()
    const t = Date.now()
    if (record.expiresAt !== null && record.expiresAt <= t) return Option.none()
    touched.set(record.id, t)
    return Option.some(record)
  }
  const verify = (secret: string) => Effect.map(byHash.get, (m) => verifyIn(m, secret))
  const peekVerify = (secret: string) => {
    const m = byHash.peek()
    return m === undefined ? undefined : verifyIn(m, secret)
  }
  const hasAdminKey = Effect.map(byHash.get, (m) => Array.from(m.values()).some((r) => r.scopes.includes("admin")))
  const keyCount = Effect.map(byHash.get, (m) => m.size)

  return { peekById, byId, anyShadowed, verify, peekVerify, hasAdminKey, keyCount }
}
