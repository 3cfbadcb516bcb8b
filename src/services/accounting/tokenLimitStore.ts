import type * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { findProvider } from "../../domain/catalog/catalog.js"
import { decodeCreateTokenLimit } from "../../domain/accounting.js"
import { NotFound } from "../../domain/errors.js"
import { fromRow, type LimitBase, type LimitState, type Row, roll, view } from "./tokenLimitWindows.js"
import type { TokenLimitsShape } from "./TokenLimits.js"
import { fixedWindow } from "./windows.js"

/**
 * The database side of token limits (docs/accounting.md, "Token limits"): the `token_limits` table
 * read into `byId` (each limit's used tokens summed from the `usage` table when it appears) and
 * indexed by key in `byKey`, oldest first, and the management API's writes and reads.
 */
export const makeTokenLimitStore = (deps: {
  readonly sql: SqlClient.SqlClient
  /** Every limit in memory, by id. */
  readonly byId: Map<string, LimitState>
  /** The same limits by API key id, oldest first (what the request path reads). */
  readonly byKey: Map<string, Array<LimitState>>
}): Pick<TokenLimitsShape, "list" | "create" | "remove"> & { readonly loadAll: Effect.Effect<void> } => {
  const { sql, byId, byKey } = deps

  const index = () => {
    byKey.clear()
    // Oldest first; limits created in the same millisecond keep their creation order (stable sort).
    const all = [...byId.values()].sort((a, b) => a.createdAt - b.createdAt)
    for (const l of all) {
      const list = byKey.get(l.apiKeyId)
      if (list) list.push(l)
      else byKey.set(l.apiKeyId, [l])
    }
  }

  const usedSince = (l: LimitBase, since: number) => {
    const tokens = sql`COALESCE(SUM(COALESCE(tokens_in, 0) + COALESCE(tokens_out, 0)), 0)`
    // Cache hits cost no upstream tokens: they are not counted at run time either.
    const query =
      l.scope === "provider"
        ? sql<{
            used: number
          }>`SELECT ${tokens} AS used FROM usage WHERE api_key_id = ${l.apiKeyId} AND ts >= ${since} AND cache_hit = 0 AND lower(provider) = ${(l.provider ?? "").toLowerCase()}`
        : l.scope === "model"
          ? sql<{ used: number }>`SELECT ${tokens} AS used FROM usage WHERE api_key_id = ${l.apiKeyId} AND ts >= ${since} AND cache_hit = 0
                  AND (requested_model = ${l.model} OR model = ${l.model} OR (provider || '/' || model) = ${l.model}
                    OR ((SELECT name FROM connections WHERE connections.id = usage.connection_id) || '/' || model) = ${l.model})`
          : sql<{ used: number }>`SELECT ${tokens} AS used FROM usage WHERE api_key_id = ${l.apiKeyId} AND ts >= ${since} AND cache_hit = 0`
    return query.pipe(
      Effect.map((rows) => Number(rows[0]?.used ?? 0)),
      Effect.orDie
    )
  }

  const load = (base: LimitBase, now: number) =>
    Effect.map(
      Effect.suspend(() => usedSince(base, fixedWindow(base.window, now).start)),
      (used): LimitState => {
        const w = fixedWindow(base.window, now)
        return { ...base, start: w.start, end: w.end, used, notified: used >= base.maxTokens }
      }
    )

  /** Every stored limit (one already in memory keeps its count); one no longer stored goes. */
  const loadAll = Effect.gen(function* () {
    const rows = yield* sql<Row>`SELECT * FROM token_limits ORDER BY created_at, id`.pipe(Effect.orDie)
    const now = yield* Clock.currentTimeMillis
    const seen = new Set<string>()
    for (const row of rows) {
      seen.add(row.id)
      if (!byId.has(row.id)) byId.set(row.id, yield* load(fromRow(row), now))
    }
    for (const id of [...byId.keys()]) if (!seen.has(id)) byId.delete(id)
    index()
  })

  const list = (apiKeyId?: string) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const limits = apiKeyId === undefined ? [...byKey.values()].flat() : (byKey.get(apiKeyId) ?? [])
      return limits.map((l) => {
        roll(l, now)
        return view(l)
      })
    })

  const create = (input: unknown) =>
    Effect.gen(function* () {
      const c = yield* decodeCreateTokenLimit(input)
      const keys = yield* sql<{ id: string }>`SELECT id FROM api_keys WHERE id = ${c.apiKeyId}`.pipe(Effect.orDie)
      if (keys.length === 0) return yield* new NotFound({ message: `no API key with id '${c.apiKeyId}'` })
      const now = yield* Clock.currentTimeMillis
      const provider = c.provider === undefined ? null : (findProvider(c.provider)?.id ?? c.provider.toLowerCase())
      const base = {
        id: "tl_" + crypto.randomBytes(6).toString("hex"),
        apiKeyId: c.apiKeyId,
        scope: c.scope,
        provider: c.scope === "provider" ? provider : null,
        model: c.scope === "model" ? (c.model ?? null) : null,
        maxTokens: c.maxTokens,
        window: c.window ?? "day",
        createdAt: now
      }
      yield* sql`INSERT INTO token_limits ${sql.insert({
        id: base.id,
        api_key_id: base.apiKeyId,
        scope: base.scope,
        target: base.provider ?? base.model,
        max_tokens: base.maxTokens,
        window: base.window,
        created_at: now
      })}`.pipe(Effect.orDie)
      const state = yield* load(base, now)
      byId.set(state.id, state)
      index()
      return view(state)
    })

  const remove = (id: string) =>
    Effect.gen(function* () {
      const rows = yield* sql<Row>`SELECT * FROM token_limits WHERE id = ${id}`.pipe(Effect.orDie)
      const state = byId.get(id)
      const row = rows[0]
      if (!row && !state) return yield* new NotFound({ message: `no token limit with id '${id}'` })
      yield* sql`DELETE FROM token_limits WHERE id = ${id}`.pipe(Effect.orDie)
      byId.delete(id)
      index()
      const now = yield* Clock.currentTimeMillis
      const removed = state ?? (yield* load(fromRow(row!), now))
      roll(removed, now)
      return view(removed)
    })

  return { loadAll, list, create, remove }
}
