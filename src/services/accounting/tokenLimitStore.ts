import type * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { findProvider } from "../../domain/catalog/catalog.js"
import { decodeCreateTokenLimit, subjectRef, type TokenLimitView } from "../../domain/accounting.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { levelOf } from "../../domain/teams.js"
import type { LevelsShape } from "./Levels.js"
import { usageOfSubject } from "./levelUsage.js"
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
  /** The same limits by subject id (a key's, `team_…`, `usr_…`, `org`), oldest first (what the request path reads). */
  readonly byKey: Map<string, Array<LimitState>>
  readonly levels: LevelsShape | undefined
}): Pick<TokenLimitsShape, "list" | "create" | "remove"> & {
  readonly loadAll: Effect.Effect<void>
  /** How many subjects above the key level have limits (none: the request path looks no further than the key). */
  readonly levelled: () => number
} => {
  const { sql, byId, byKey, levels } = deps
  let levelledCount = 0

  const index = () => {
    byKey.clear()
    levelledCount = 0
    // Oldest first; limits created in the same millisecond keep their creation order (stable sort).
    const all = [...byId.values()].sort((a, b) => a.createdAt - b.createdAt)
    for (const l of all) {
      const list = byKey.get(l.apiKeyId)
      if (list) list.push(l)
      else {
        byKey.set(l.apiKeyId, [l])
        if (levelOf(l.apiKeyId) !== "key") levelledCount++
      }
    }
  }

  /** A limit's view; a level's names its subject (a key's is as before). */
  const viewOf = (l: LimitState): TokenLimitView => {
    const v = view(l)
    const level = levelOf(l.apiKeyId)
    if (level === "key") return v
    return {
      ...v,
      level,
      ...(level === "team" ? { teamId: l.apiKeyId } : level === "user" ? { userId: l.apiKeyId } : { organisation: true as const }),
      ...(levels !== undefined ? { subjectName: levels.name(l.apiKeyId) } : {})
    }
  }

  const usedSince = (l: LimitBase, since: number) => {
    const tokens = sql`COALESCE(SUM(COALESCE(tokens_in, 0) + COALESCE(tokens_out, 0)), 0)`
    // The subject's rows: a key's own, or those of the keys a level counts (levelUsage.ts).
    const whose = usageOfSubject(sql, l.apiKeyId)
    // Cache hits cost no upstream tokens: they are not counted at run time either.
    const query =
      l.scope === "provider"
        ? sql<{
            used: number
          }>`SELECT ${tokens} AS used FROM usage WHERE ${whose} AND ts >= ${since} AND cache_hit = 0 AND lower(provider) = ${(l.provider ?? "").toLowerCase()}`
        : l.scope === "model"
          ? sql<{ used: number }>`SELECT ${tokens} AS used FROM usage WHERE ${whose} AND ts >= ${since} AND cache_hit = 0
                  AND (requested_model = ${l.model} OR model = ${l.model} OR (provider || '/' || model) = ${l.model}
                    OR ((SELECT name FROM connections WHERE connections.id = usage.connection_id) || '/' || model) = ${l.model})`
          : sql<{ used: number }>`SELECT ${tokens} AS used FROM usage WHERE ${whose} AND ts >= ${since} AND cache_hit = 0`
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

  const list: TokenLimitsShape["list"] = (subject) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const level = typeof subject === "string" ? undefined : (subject?.level ?? "key")
      const limits =
        typeof subject === "string"
          ? (byKey.get(subject) ?? [])
          : [...byKey.values()].flat().filter((l) => level === "all" || levelOf(l.apiKeyId) === level)
      return limits.map((l) => {
        roll(l, now)
        return viewOf(l)
      })
    })

  /** Why a limit may not be set on `subjectId`: one of the same scope, target and window above it allows fewer tokens. */
  const ceiling = (subjectId: string, base: Omit<LimitBase, "id" | "createdAt" | "apiKeyId">): string | undefined => {
    if (levels === undefined) return undefined
    for (const a of levels.ancestors(subjectId)) {
      for (const l of byKey.get(a) ?? []) {
        if (l.scope !== base.scope || l.provider !== base.provider || l.model !== base.model || l.window !== base.window) continue
        if (base.maxTokens > l.maxTokens)
          return `maxTokens ${base.maxTokens} is above ${levels.label(a)}'s ${l.maxTokens} (${l.scope}${l.provider ? ` ${l.provider}` : ""}${l.model ? ` ${l.model}` : ""} per ${l.window})`
      }
    }
    return undefined
  }

  const create = (input: unknown) =>
    Effect.gen(function* () {
      const c = yield* decodeCreateTokenLimit(input)
      const subject = subjectRef(c)
      let subjectId: string
      if (levels !== undefined) {
        yield* levels.reload
        subjectId = yield* levels.resolve(subject)
      } else {
        if (typeof subject === "string" || subject.level !== "key")
          return yield* new BadRequest({ message: "token limits are set on API keys here" })
        const keys = yield* sql<{ id: string }>`SELECT id FROM api_keys WHERE id = ${subject.ref}`.pipe(Effect.orDie)
        if (keys.length === 0) return yield* new NotFound({ message: `no API key with id '${subject.ref}'` })
        subjectId = subject.ref
      }
      const now = yield* Clock.currentTimeMillis
      const provider = c.provider === undefined ? null : (findProvider(c.provider)?.id ?? c.provider.toLowerCase())
      const base = {
        id: "tl_" + crypto.randomBytes(6).toString("hex"),
        apiKeyId: subjectId,
        scope: c.scope,
        provider: c.scope === "provider" ? provider : null,
        model: c.scope === "model" ? (c.model ?? null) : null,
        maxTokens: c.maxTokens,
        window: c.window ?? "day",
        createdAt: now
      }
      const above = ceiling(subjectId, base)
      if (above !== undefined) return yield* new BadRequest({ message: above })
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
      return viewOf(state)
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
      return viewOf(removed)
    })

  return { loadAll, list, create, remove, levelled: () => levelledCount }
}
