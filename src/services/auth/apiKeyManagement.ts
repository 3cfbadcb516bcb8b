/**
 * The keys as the management API changes them: create (or adopt a chosen secret), list, update and
 * remove, by id or by name, each change audited.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { type BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type { ApiKeyScope } from "../../domain/keys.js"
import { maskSecret } from "../../kernel/redact.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import { storeUnavailable } from "../../platform/store/dialect.js"
import type { DirectoryShape, KeyOwner, KeyOwnerInput } from "../teams/Directory.js"
import type { ApiKeyRecord, ApiKeysShape } from "./ApiKeys.js"
import { type KeysByHash, mcpAllowColumn, shadowColumn, toView } from "./apiKeyRows.js"
import { randomToken, sha256 } from "./password.js"

export const KEY_PREFIX = "gwk_"

export interface KeyManagementDeps {
  readonly sql: SqlClient.SqlClient
  readonly writer: BatchWriterShape
  readonly byHash: KeysByHash
  /** The last-used times not yet written (apiKeyUsage.ts). */
  readonly touched: Map<string, number>
  /** The users and teams a key may belong to (docs/teams.md, "Keys and their owners"). */
  readonly directory: Pick<DirectoryShape, "keyOwner" | "firstAdmin">
}

/** `create`, `list`, `update` and `remove`: each write invalidates the keys in memory. */
export const makeKeyManagement = ({ sql, writer, byHash, touched, directory }: KeyManagementDeps) => {
  /** The owner a create or update asks for (checked), else `otherwise`. */
  const ownerOf = (input: KeyOwnerInput, otherwise: () => KeyOwner): Effect.Effect<KeyOwner, BadRequest> =>
    input.userId === undefined && input.teamId === undefined ? Effect.sync(otherwise) : directory.keyOwner(input)
  const setOwner = (id: string, owner: KeyOwner) =>
    sql`UPDATE api_keys SET user_id = ${owner.userId}, team_id = ${owner.teamId} WHERE id = ${id}`.pipe(Effect.orDie)

  const audit = (actor: string, action: string, target: string) =>
    writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

  const create: ApiKeysShape["create"] = (input, options = {}) =>
    Effect.gen(function* () {
      const secret = options.secret ?? KEY_PREFIX + randomToken(32)
      const hash = sha256(secret)
      const scopes: Array<ApiKeyScope> = Array.from(new Set<ApiKeyScope>(input.scopes ?? ["inference"]))
      const existing = (yield* byHash.get).get(hash)
      const owner = yield* ownerOf(input, () =>
        existing
          ? { userId: existing.userId, teamId: existing.teamId }
          : { userId: options.owner ?? directory.firstAdmin().id, teamId: null }
      )
      if (existing) {
        // Adopting the same secret twice (re-running setup) updates the key instead of failing.
        const merged: Array<ApiKeyScope> = Array.from(new Set([...existing.scopes, ...scopes]))
        const rpm = input.rpm === undefined ? existing.rpm : input.rpm
        const tpm = input.tpm === undefined ? existing.tpm : input.tpm
        const shadow = input.shadow === undefined ? existing.shadow : (input.shadow ?? [])
        const mcpAllow = input.mcp === undefined ? existing.mcpAllow : (input.mcp?.allow ?? null)
        const maxQueueWaitSeconds =
          input.maxQueueWaitSeconds === undefined ? existing.maxQueueWaitSeconds : input.maxQueueWaitSeconds || null
        yield* sql`UPDATE api_keys SET scopes = ${JSON.stringify(merged)}, enabled = 1, rpm_limit = ${rpm}, tpm_limit = ${tpm}, shadow = ${shadowColumn(shadow)}, mcp_allow = ${mcpAllowColumn(mcpAllow)}, max_queue_wait_s = ${maxQueueWaitSeconds} WHERE id = ${existing.id}`.pipe(
          Effect.orDie
        )
        yield* setOwner(existing.id, owner)
        yield* byHash.invalidate
        const record = { ...existing, scopes: merged, enabled: true, rpm, tpm, shadow, mcpAllow, maxQueueWaitSeconds }
        return { ...(yield* viewOf({ ...record, ...owner })), secret }
      }
      const record: ApiKeyRecord = {
        id: "key_" + crypto.randomBytes(8).toString("hex"),
        name: input.name ?? "default",
        masked: maskSecret(secret),
        scopes,
        enabled: true,
        createdAt: Date.now(),
        expiresAt: input.expiresAt ? input.expiresAt.getTime() : null,
        lastUsedAt: null,
        userId: owner.userId,
        teamId: owner.teamId,
        rpm: input.rpm ?? null,
        tpm: input.tpm ?? null,
        shadow: input.shadow ?? [],
        mcpAllow: input.mcp?.allow ?? null,
        maxQueueWaitSeconds: input.maxQueueWaitSeconds || null
      }
      yield* sql`INSERT INTO api_keys ${sql.insert({
        id: record.id,
        name: record.name,
        key_hash: hash,
        user_id: owner.userId,
        team_id: owner.teamId,
        masked: record.masked,
        scopes: JSON.stringify(record.scopes),
        enabled: 1,
        created_at: record.createdAt,
        expires_at: record.expiresAt,
        rpm_limit: record.rpm,
        tpm_limit: record.tpm,
        shadow: shadowColumn(record.shadow),
        mcp_allow: mcpAllowColumn(record.mcpAllow),
        max_queue_wait_s: record.maxQueueWaitSeconds
      })}`.pipe(Effect.orDie)
      yield* byHash.invalidate
      audit(options.actor ?? "system", "api_key.create", record.id)
      yield* Effect.logInfo(`api key created: ${record.id} (${record.name}, scopes ${scopes.join(",")})`)
      return { ...toView(record), secret }
    })

  /**
   * The last-used times as written (by any process): the keys in memory are not loaded again when
   * one is written (a hint, migration 0029), so what they hold may be older. With the store down,
   * none: the answer then shows what memory holds, as the keys themselves come from memory then.
   */
  const lastUsedWritten = sql<{ id: string; last_used_at: number | string | null }>`SELECT id, last_used_at FROM api_keys`.pipe(
    Effect.map((rows) => new Map(rows.map((r) => [r.id, r.last_used_at === null ? null : Number(r.last_used_at)]))),
    Effect.catchAllCause((cause) =>
      storeUnavailable(cause) === undefined ? Effect.failCause(cause) : Effect.succeed(new Map<string, number | null>())
    ),
    Effect.orDie
  )
  /** A key's last use: the latest of this process's (not written yet), the one written (by any process) and what memory holds. */
  const lastUsed = (r: ApiKeyRecord, written: ReadonlyMap<string, number | null>): number | null => {
    const times = [touched.get(r.id), written.get(r.id), r.lastUsedAt].filter((t): t is number => typeof t === "number")
    return times.length === 0 ? null : Math.max(...times)
  }
  /** A key's view with its last use as `lastUsed` reads it. */
  const viewOf = (r: ApiKeyRecord) => Effect.map(lastUsedWritten, (written) => toView({ ...r, lastUsedAt: lastUsed(r, written) }))

  const list = Effect.gen(function* () {
    const m = yield* byHash.get
    const written = yield* lastUsedWritten
    return Array.from(m.values())
      .sort((a, b) => a.createdAt - b.createdAt)
      .map((r) => toView({ ...r, lastUsedAt: lastUsed(r, written) }))
  })

  const find = (idOrName: string) =>
    Effect.gen(function* () {
      const all = Array.from((yield* byHash.get).values())
      const byId = all.find((r) => r.id === idOrName)
      const byName = all.filter((r) => r.name === idOrName)
      if (!byId && byName.length > 1) {
        return yield* new Conflict({
          message: `several keys are named '${idOrName}'; name one by id (${byName.map((r) => r.id).join(", ")})`
        })
      }
      const target = byId ?? byName[0]
      if (!target) return yield* new NotFound({ message: `no API key with id or name '${idOrName}'` })
      return target
    })

  const update: ApiKeysShape["update"] = (idOrName, input, actor = "system") =>
    Effect.gen(function* () {
      const target = yield* find(idOrName)
      const owner = yield* ownerOf(input, () => ({ userId: target.userId, teamId: target.teamId }))
      const next: ApiKeyRecord = {
        ...target,
        ...owner,
        name: input.name ?? target.name,
        rpm: input.rpm === undefined ? target.rpm : input.rpm,
        tpm: input.tpm === undefined ? target.tpm : input.tpm,
        enabled: input.enabled ?? target.enabled,
        expiresAt: input.expiresAt === undefined ? target.expiresAt : input.expiresAt === null ? null : input.expiresAt.getTime(),
        shadow: input.shadow === undefined ? target.shadow : (input.shadow ?? []),
        mcpAllow: input.mcp === undefined ? target.mcpAllow : (input.mcp?.allow ?? null),
        maxQueueWaitSeconds: input.maxQueueWaitSeconds === undefined ? target.maxQueueWaitSeconds : input.maxQueueWaitSeconds || null
      }
      yield* sql`UPDATE api_keys SET name = ${next.name}, rpm_limit = ${next.rpm}, tpm_limit = ${next.tpm}, enabled = ${next.enabled ? 1 : 0}, expires_at = ${next.expiresAt}, shadow = ${shadowColumn(next.shadow)}, mcp_allow = ${mcpAllowColumn(next.mcpAllow)}, max_queue_wait_s = ${next.maxQueueWaitSeconds} WHERE id = ${target.id}`.pipe(
        Effect.orDie
      )
      if (owner.userId !== target.userId || owner.teamId !== target.teamId) yield* setOwner(target.id, owner)
      yield* byHash.invalidate
      audit(actor, "api_key.update", target.id)
      return yield* viewOf(next)
    })

  const remove: ApiKeysShape["remove"] = (idOrName, actor = "system") =>
    Effect.gen(function* () {
      const target = yield* find(idOrName)
      // Read before the row goes.
      const view = yield* viewOf(target)
      yield* sql`DELETE FROM api_keys WHERE id = ${target.id}`.pipe(Effect.orDie)
      touched.delete(target.id)
      yield* byHash.invalidate
      audit(actor, "api_key.remove", target.id)
      return view
    })

  return { create, list, update, remove }
}
