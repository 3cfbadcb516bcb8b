/**
 * Gateway API keys: the rows and the keys in memory (apiKeyRows.ts), their last-used times
 * (apiKeyUsage.ts), the management API's changes (apiKeyManagement.ts) and the request path's
 * lookups (apiKeyLookup.ts).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type { ApiKeyScope, ApiKeyView, CreateApiKey, CreatedApiKey, UpdateApiKey } from "../../domain/keys.js"
import type { ShadowTarget } from "../../domain/shadow.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { StoreHealth } from "../../platform/store/StoreHealth.js"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import { Directory } from "../teams/Directory.js"
import { makeKeyLookup } from "./apiKeyLookup.js"
import { makeKeyManagement } from "./apiKeyManagement.js"
import { loadKeysByHash } from "./apiKeyRows.js"
import { makeKeyUsage } from "./apiKeyUsage.js"

export { KEY_PREFIX } from "./apiKeyManagement.js"
export { toView } from "./apiKeyRows.js"

export interface ApiKeyRecord {
  readonly id: string
  readonly name: string
  readonly masked: string
  readonly scopes: ReadonlyArray<ApiKeyScope>
  readonly enabled: boolean
  readonly createdAt: number
  readonly expiresAt: number | null
  readonly lastUsedAt: number | null
  /** Inbound limits per minute set on the key (null: none). */
  readonly rpm: number | null
  readonly tpm: number | null
  /** Shadow targets for this key's requests (docs/shadow.md). */
  readonly shadow: ReadonlyArray<ShadowTarget>
  /** The MCP ceiling: patterns `<server>`, `<server>__<tool>`, `<server>__*`, `*` (docs/mcp.md); null: every allowed tool. */
  readonly mcpAllow: ReadonlyArray<string> | null
  /** The user who owns the key (docs/teams.md, "Keys and their owners"); null: none. */
  readonly userId: string | null
  /** The team who owns the key; null: none (on both: nobody's, acting as the first admin). */
  readonly teamId: string | null
  /** Longest wait for a quota to reset, in seconds (docs/resilience.md, "Waiting out a quota"); null: off. */
  readonly maxQueueWaitSeconds: number | null
}

export interface ApiKeysShape {
  /**
   * Creates a key; `secret` adopts a caller-chosen value (GATEWAY_API_KEY) instead of generating one. A key given neither
   * `userId` nor `teamId` belongs to `owner` (the caller's user id; default: the first admin). An unknown owner is a 400.
   */
  readonly create: (
    input: CreateApiKey,
    options?: { readonly secret?: string; readonly actor?: string; readonly owner?: string }
  ) => Effect.Effect<CreatedApiKey, BadRequest>
  readonly list: Effect.Effect<ReadonlyArray<ApiKeyView>>
  /** Whether any key has shadow targets (from memory, worked out once per loaded key set). */
  readonly anyShadowed: Effect.Effect<boolean>
  /** Removes a key by id or by name. */
  readonly remove: (idOrName: string, actor?: string) => Effect.Effect<ApiKeyView, NotFound | Conflict>
  /** Changes a key's name or limits, by id or by name. */
  readonly update: (idOrName: string, input: UpdateApiKey, actor?: string) => Effect.Effect<ApiKeyView, BadRequest | NotFound | Conflict>
  /** A key by id from memory when the cached keys are known fresh (undefined: unknown or not fresh; use `byId`). */
  readonly peekById: (id: string) => ApiKeyRecord | undefined
  readonly byId: (id: string) => Effect.Effect<ApiKeyRecord | undefined>
  /** The active key for a presented secret, if any. Expired and disabled keys do not verify. */
  readonly verify: (secret: string) => Effect.Effect<Option.Option<ApiKeyRecord>>
  /** `verify` from memory when the cached keys are known fresh, else undefined (use `verify`). */
  readonly peekVerify: (secret: string) => Option.Option<ApiKeyRecord> | undefined
  /** Whether any key with the admin scope exists. */
  readonly hasAdminKey: Effect.Effect<boolean>
  /** How many keys there are, from memory (the listing reads the database besides). */
  readonly keyCount: Effect.Effect<number>
}

/**
 * Gateway API keys. Only a SHA-256 of each key is stored (keys are 256-bit random, so a fast
 * hash is enough; passwords get scrypt). Lookups on the request path hit an in-memory map;
 * `last_used_at` is collected in memory and written every 30 s and at shutdown.
 */
export class ApiKeys extends Context.Tag("gateway/ApiKeys")<ApiKeys, ApiKeysShape>() {
  static readonly layer = Layer.scoped(
    ApiKeys,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      const writer = yield* BatchWriter
      const byHash = loadKeysByHash({ sql, version })
      const health = yield* StoreHealth
      const { touched, flushTouched } = makeKeyUsage({ sql, health })
      yield* Effect.addFinalizer(() => flushTouched)
      yield* flushTouched.pipe(Effect.repeat(Schedule.spaced("30 seconds")), Effect.forkScoped)

      // The parts: the management API's changes, the request path's lookups.
      const directory = yield* Directory
      const { create, list, update, remove } = makeKeyManagement({ sql, writer, byHash, touched, directory })
      const { peekById, byId, anyShadowed, verify, peekVerify, hasAdminKey, keyCount } = makeKeyLookup({ byHash, touched })

      return {
        create,
        list,
        anyShadowed,
        remove,
        update,
        peekById,
        byId,
        verify,
        peekVerify,
        hasAdminKey,
        keyCount
      } satisfies ApiKeysShape
    })
  )
}
