import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as crypto from "node:crypto"
import { decodeCreateTokenLimit, TOKEN_LIMIT_SCOPES, TOKEN_LIMIT_WINDOWS, type TokenLimitScope, type TokenLimitView, type TokenLimitWindow } from "../../domain/accounting.js"
import { type BadRequest, NotFound } from "../../domain/errors.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { findProvider } from "../../domain/catalog/catalog.js"
import { SharedState, type TotalEntry } from "../../platform/state/SharedState.js"
import { toIso } from "../../platform/store/Db.js"
import { makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import { fixedWindow } from "./windows.js"

/** What a request is sent to: the provider id, the upstream model id, and the model as the client wrote it. */
export interface LimitTarget {
  readonly provider: string
  readonly model: string
  readonly requestedModel: string
  /** The connection's name: a limit on `<connection>/<model>` (the catalog's form) applies too. */
  readonly connection?: string
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): tokens a request used, which
 * every process adds to the applicable limits' windows. The limits themselves live in the
 * database and are picked up through `refresh`.
 */
export interface TokenUse {
  readonly apiKeyId: string
  readonly target: LimitTarget
  readonly tokens: number
  readonly at: number
}

export type TokenLimitCheck = { readonly ok: true } | { readonly ok: false; readonly limit: TokenLimitView; readonly retryAfterMs: number }

export interface TokenLimitsShape {
  /** `GET /api/usage/token-limits`: every limit, or those of one key; oldest first. */
  readonly list: (apiKeyId?: string) => Effect.Effect<ReadonlyArray<TokenLimitView>>
  /** `POST /api/usage/token-limits` and the CLI: decodes `CreateTokenLimit`; an unknown key is NotFound. */
  readonly create: (input: unknown) => Effect.Effect<TokenLimitView, BadRequest | NotFound>
  /** `DELETE /api/usage/token-limits`: the removed limit. */
  readonly remove: (id: string) => Effect.Effect<TokenLimitView, NotFound>
  /** Request path, synchronous: refused while an applicable limit's used tokens are at or above maxTokens. */
  /** `reserved`: tokens of this key's requests still in flight, counted as if already used. */
  readonly check: (apiKeyId: string | null, target: LimitTarget, now: number, reserved?: number) => TokenLimitCheck
  /** Request path: adds input + output tokens to every applicable limit's current window (memory only). */
  readonly record: (apiKeyId: string | null, target: LimitTarget, tokens: number) => Effect.Effect<void>
  /** `record` at `now`, synchronously (the request path). */
  readonly unsafeRecord: (apiKeyId: string | null, target: LimitTarget, tokens: number, now: number) => void
  /** True when token use is exact across processes (`SharedState.totals` on Redis): the pipeline calls `claim`. */
  readonly exact: boolean
  /**
   * Across processes, atomically: refuses while an applicable limit's use plus every process's
   * holds has reached it; else holds `estimate` tokens in each until `release`. `undefined` when
   * the shared store is unreachable (the caller checks its own view with `check`).
   */
  readonly claim: (apiKeyId: string, target: LimitTarget, estimate: number, now: number) => Effect.Effect<TokenLimitClaim | undefined>
  /** Whether the key has a token limit (its `claim` is then a round trip when `exact`). */
  readonly has: (apiKeyId: string) => boolean
  /** Picks up limits another process wrote (only with `StoreVersion` provided; otherwise a no-op). */
  readonly refresh: Effect.Effect<void>
}

export interface TokenLimitClaim {
  readonly check: TokenLimitCheck
  readonly release: () => void
}

const NOTHING_HELD = () => {}

interface Row {
  readonly id: string
  readonly api_key_id: string
  readonly scope: string
  readonly target: string | null
  readonly max_tokens: number
  readonly window: string
  readonly created_at: number
}

interface LimitState {
  readonly id: string
  readonly apiKeyId: string
  readonly scope: TokenLimitScope
  readonly provider: string | null
  readonly model: string | null
  readonly maxTokens: number
  readonly window: TokenLimitWindow
  readonly createdAt: number
  start: number
  end: number
  used: number
  /** `quota.exceeded` was published for this window (or the window was already full at load). */
  notified: boolean
}

/**
 * Whether a limit applies to a request. Provider: the target's provider id (case-insensitive).
 * Model (case-sensitive, exact): the model as the client wrote it, `<provider>/<model>` of the
 * target, or the target's bare model id.
 */
export const limitApplies = (limit: { readonly scope: TokenLimitScope; readonly provider: string | null; readonly model: string | null }, target: LimitTarget): boolean => {
  switch (limit.scope) {
    case "global":
      return true
    case "provider":
      return limit.provider !== null && limit.provider.toLowerCase() === target.provider.toLowerCase()
    case "model":
      return (
        limit.model !== null &&
        (limit.model === target.requestedModel ||
          limit.model === `${target.provider}/${target.model}` ||
          limit.model === target.model ||
          (target.connection !== undefined && limit.model === `${target.connection}/${target.model}`))
      )
  }
}

const fromRow = (row: Row): Omit<LimitState, "start" | "end" | "used" | "notified"> => {
  const scope = (TOKEN_LIMIT_SCOPES as ReadonlyArray<string>).includes(row.scope) ? (row.scope as TokenLimitScope) : "global"
  const window = (TOKEN_LIMIT_WINDOWS as ReadonlyArray<string>).includes(row.window) ? (row.window as TokenLimitWindow) : "day"
  return {
    id: row.id,
    apiKeyId: row.api_key_id,
    scope,
    provider: scope === "provider" ? row.target : null,
    model: scope === "model" ? row.target : null,
    maxTokens: row.max_tokens,
    window,
    createdAt: row.created_at
  }
}

const roll = (l: LimitState, now: number) => {
  if (now < l.end) return
  const w = fixedWindow(l.window, now)
  l.start = w.start
  l.end = w.end
  l.used = 0
  l.notified = false
}

const view = (l: LimitState): TokenLimitView => ({
  id: l.id,
  apiKeyId: l.apiKeyId,
  scope: l.scope,
  provider: l.provider,
  model: l.model,
  maxTokens: l.maxTokens,
  window: l.window,
  usedTokens: l.used,
  windowStart: toIso(l.start)!,
  resetsAt: toIso(l.end)!,
  createdAt: toIso(l.createdAt)!
})

/**
 * Per-key token limits. Used tokens per limit are loaded from the `usage` table at start (and
 * when a limit is created), then kept in memory: `check` and `record` never touch the database.
 * Recorded use also goes to the other gateway processes on the `token-limits` channel (`SharedState`).
 */
export class TokenLimits extends Context.Tag("gateway/TokenLimits")<TokenLimits, TokenLimitsShape>() {
  static readonly layer = Layer.effect(
    TokenLimits,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* Effect.serviceOption(StoreVersion)
      const bus = yield* Effect.serviceOption(EventBus)
      const shared = yield* SharedState.orLocal
      const byId = new Map<string, LimitState>()
      const byKey = new Map<string, Array<LimitState>>()

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

      const usedSince = (l: Omit<LimitState, "start" | "end" | "used" | "notified">, since: number) => {
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

      const load = (base: Omit<LimitState, "start" | "end" | "used" | "notified">, now: number) =>
        Effect.map(
          Effect.suspend(() => usedSince(base, fixedWindow(base.window, now).start)),
          (used): LimitState => {
            const w = fixedWindow(base.window, now)
            return { ...base, start: w.start, end: w.end, used, notified: used >= base.maxTokens }
          }
        )

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

      const refresh = yield* makeVersionedReload(version, loadAll)

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

      const check = (apiKeyId: string | null, target: LimitTarget, now: number, reserved = 0): TokenLimitCheck => {
        if (apiKeyId === null) return { ok: true }
        const limits = byKey.get(apiKeyId)
        if (!limits) return { ok: true }
        let worst: { limit: LimitState; retryAfterMs: number } | undefined
        for (const l of limits) {
          if (!limitApplies(l, target)) continue
          roll(l, now)
          if (l.used + reserved < l.maxTokens) continue
          const retryAfterMs = Math.max(0, l.end - now)
          if (!worst || retryAfterMs > worst.retryAfterMs) worst = { limit: l, retryAfterMs }
        }
        return worst ? { ok: false, limit: view(worst.limit), retryAfterMs: worst.retryAfterMs } : { ok: true }
      }

      /** Adds tokens at `now`; `local` as in Budgets (only this process's own use is announced and published). */
      const add = (apiKeyId: string, target: LimitTarget, tokens: number, now: number, local: boolean): void => {
        const limits = byKey.get(apiKeyId)
        if (!limits) return
        for (const l of limits) {
          if (!limitApplies(l, target)) continue
          roll(l, now)
          l.used += tokens
          if (!l.notified && l.used >= l.maxTokens) {
            l.notified = true
            if (local && Option.isSome(bus)) {
              bus.value.publish("quota.exceeded", {
                source: "token_limit",
                api_key_id: apiKeyId,
                kind: "exceeded",
                limit_id: l.id,
                scope: l.scope,
                provider: l.provider,
                model: l.model,
                window: l.window,
                used_tokens: l.used,
                max_tokens: l.maxTokens,
                window_start: toIso(l.start),
                resets_at: toIso(l.end)
              })
            }
          }
        }
        if (local && channel.shared) channel.publish({ apiKeyId, target, tokens, at: now })
        if (local && totals.exact) totals.add(entries(limits, target, now), tokens)
      }

      const totals = shared.totals
      /** The shared totals of the limits that apply to `target` at `now` (each starts from this process's view). */
      const entries = (limits: ReadonlyArray<LimitState>, target: LimitTarget, now: number) => {
        const out: Array<TotalEntry & { readonly state: LimitState }> = []
        for (const l of limits) {
          if (!limitApplies(l, target)) continue
          roll(l, now)
          out.push({ key: `tokens:${l.id}:${l.start}`, limit: l.maxTokens, init: l.used, expireAt: l.end + 3_600_000, state: l })
        }
        return out
      }

      const claim = (apiKeyId: string, target: LimitTarget, estimate: number, now: number): Effect.Effect<TokenLimitClaim | undefined> => {
        const limits = byKey.get(apiKeyId)
        const held = limits === undefined ? [] : entries(limits, target, now)
        if (held.length === 0) return Effect.succeed({ check: { ok: true }, release: NOTHING_HELD })
        const by = Number.isFinite(estimate) && estimate > 0 ? estimate : 0
        return Effect.map(totals.claim(held, by), (claimed): TokenLimitClaim | undefined => {
          if (claimed === undefined) return undefined
          if (claimed.ok) return { check: { ok: true }, release: by === 0 ? NOTHING_HELD : () => totals.add(held, -by) }
          let worst: { limit: LimitState; retryAfterMs: number } | undefined
          held.forEach((e, i) => {
            if ((claimed.values[i] ?? 0) < e.limit - 1e-10) return
            const retryAfterMs = Math.max(0, e.state.end - now)
            if (!worst || retryAfterMs > worst.retryAfterMs) worst = { limit: e.state, retryAfterMs }
          })
          const w = worst as { limit: LimitState; retryAfterMs: number } | undefined
          return { check: w ? { ok: false, limit: view(w.limit), retryAfterMs: w.retryAfterMs } : { ok: true }, release: NOTHING_HELD }
        })
      }

      const channel = shared.channel<TokenUse>("token-limits", (u) => {
        if (Number.isFinite(u.tokens) && u.tokens > 0) add(u.apiKeyId, u.target, u.tokens, u.at, false)
      })

      const unsafeRecord = (apiKeyId: string | null, target: LimitTarget, tokens: number, now: number): void => {
        if (apiKeyId === null || !(tokens > 0) || !Number.isFinite(tokens)) return
        add(apiKeyId, target, tokens, now, true)
      }

      const record = (apiKeyId: string | null, target: LimitTarget, tokens: number) => Effect.map(Clock.currentTimeMillis, (now) => unsafeRecord(apiKeyId, target, tokens, now))

      return { list, create, remove, check, record, unsafeRecord, refresh, exact: totals.exact, claim, has: (apiKeyId: string) => (byKey.get(apiKeyId)?.length ?? 0) > 0 }
    })
  )
}
