import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import type { ContextAnalytics } from "../../../domain/context.js"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import { toIso } from "../../../platform/store/Db.js"
import { transaction } from "../../../platform/store/dialect.js"
import type { PricingShape } from "../../accounting/Pricing.js"
import { type EngineRun, tokensOf } from "./run.js"

/** How long a raw tool output rtk cut stays retrievable. */
export const RAW_OUTPUT_TTL_MS = 24 * 3_600_000
/** Requests' changes waiting to be counted by the flush; past it, counted at once by the approximation. */
const MAX_UNCOUNTED = 2_000

interface StatRow {
  requests: number
  tokensBefore: number
  tokensAfter: number
  savedUsd: number
  injectedTokens: number
}

interface Uncounted {
  readonly d: string
  readonly combo: string
  readonly model: string
  readonly inputPrice: number | undefined
  readonly runs: ReadonlyArray<EngineRun>
}

/** What one compressed request (or injected context) adds to the day's savings. */
export interface CompressionRecord {
  readonly combo: string
  readonly model: string
  readonly engines: ReadonlyArray<EngineRun>
  readonly injected?: { readonly kind: "memory" | "skills"; readonly tokens: number }
  readonly provider?: string | undefined
  readonly upstreamModel?: string | undefined
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/** Tokens by length alone (4 characters a token): for a burst past the bound, counted at once. */
const approximately = (run: EngineRun) => {
  let tokensBefore = 0
  let tokensAfter = 0
  for (const [b, a] of run.pairs) {
    tokensBefore += Math.ceil(b.length / 4)
    tokensAfter += Math.ceil(a.length / 4)
  }
  return { tokensBefore, tokensAfter }
}

interface StatsRow {
  day: string
  engine: string
  combo: string
  model: string
  requests: number
  tokens_before: number
  tokens_after: number
  saved_usd: number
  injected_tokens: number
}

/** The savings between two days, in total and by engine, combo, model and day. */
const summed = (from: string, to: string, rows: ReadonlyArray<StatsRow>): ContextAnalytics => {
  const zero = () => ({ requests: 0, tokensBefore: 0, tokensAfter: 0, tokensSaved: 0, savedUsd: 0, injectedTokens: 0 })
  const add = (a: ReturnType<typeof zero>, r: StatsRow) => {
    a.requests += Number(r.requests)
    a.tokensBefore += Number(r.tokens_before)
    a.tokensAfter += Number(r.tokens_after)
    a.tokensSaved += Number(r.tokens_before) - Number(r.tokens_after)
    a.savedUsd += Number(r.saved_usd)
    a.injectedTokens += Number(r.injected_tokens)
  }
  const group = <K extends string>(field: "engine" | "combo" | "model" | "day", name: K) => {
    const m = new Map<string, ReturnType<typeof zero>>()
    for (const r of rows) {
      let a = m.get(r[field])
      if (!a) m.set(r[field], (a = zero()))
      add(a, r)
    }
    return [...m].map(([k, v]) => ({ [name]: k, ...v }) as { [P in K]: string } & ReturnType<typeof zero>)
  }
  const totals = zero()
  for (const r of rows) add(totals, r)
  return {
    from,
    to,
    rows: rows.map((r) => {
      const a = zero()
      add(a, r)
      return { day: r.day, engine: r.engine, combo: r.combo, model: r.model, ...a }
    }),
    totals,
    byEngine: group("engine", "engine"),
    byCombo: group("combo", "combo"),
    byModel: group("model", "model"),
    byDay: group("day", "day")
  }
}

/**
 * The savings per day, engine, combo and model, and the raw tool outputs rtk cut: kept in memory
 * by the request path and written by `flush` (a database that is busy or away loses nothing:
 * what was not written waits for the next flush).
 */
export const makeCompressionStats = (deps: { readonly sql: SqlClient.SqlClient; readonly pricing: PricingShape }) => {
  const { sql, pricing } = deps
  const stats = new Map<string, StatRow>()
  const pendingRaw = new Map<string, { text: string; at: number }>()
  const uncounted: Array<Uncounted> = []

  const bump = (d: string, engine: string, combo: string, model: string, f: (r: StatRow) => void) => {
    const key = `${d}\u0000${engine}\u0000${combo}\u0000${model}`
    let r = stats.get(key)
    if (!r) stats.set(key, (r = { requests: 0, tokensBefore: 0, tokensAfter: 0, savedUsd: 0, injectedTokens: 0 }))
    f(r)
  }

  const count = (u: Uncounted, tokens: (run: EngineRun) => { tokensBefore: number; tokensAfter: number }) => {
    for (const run of u.runs) {
      const t = tokens(run)
      bump(u.d, run.engine, u.combo, u.model, (x) => {
        x.requests++
        x.tokensBefore += t.tokensBefore
        x.tokensAfter += t.tokensAfter
        x.savedUsd += u.inputPrice !== undefined ? ((t.tokensBefore - t.tokensAfter) * u.inputPrice) / 1_000_000 : 0
      })
    }
  }

  /** Keeps a raw output rtk cut; its id names its content (the same output cut again gives the same marker, so prompt caches still hit). */
  const keepRaw = (text: string): string => {
    const id = "raw_" + crypto.createHash("sha256").update(text).digest("hex").slice(0, 24)
    pendingRaw.set(id, { text, at: Date.now() })
    return id
  }

  /** Counted later (the flush), off the request path: o200k costs milliseconds on a long prompt. */
  const record = (r: CompressionRecord) => {
    const d = day(Date.now())
    if (r.engines.length > 0) {
      const price = r.provider && r.upstreamModel ? pricing.priceOf(r.provider, r.upstreamModel) : undefined
      const u = { d, combo: r.combo, model: r.model, inputPrice: price?.input, runs: r.engines }
      if (uncounted.length < MAX_UNCOUNTED) uncounted.push(u)
      else count(u, approximately)
    }
    if (r.injected && r.injected.tokens > 0) {
      const tokens = r.injected.tokens
      bump(d, r.injected.kind, "-", r.model, (x) => {
        x.requests++
        x.injectedTokens += tokens
      })
    }
  }

  /** Puts rows a failed write took back, for the next flush. */
  const keepForNext = (
    rows: ReadonlyArray<readonly [string, StatRow]>,
    raws: ReadonlyArray<readonly [string, { text: string; at: number }]>
  ) => {
    for (const [k, r] of rows) {
      const [d, engine, combo, model] = k.split("\u0000") as [string, string, string, string]
      bump(d, engine, combo, model, (x) => {
        x.requests += r.requests
        x.tokensBefore += r.tokensBefore
        x.tokensAfter += r.tokensAfter
        x.savedUsd += r.savedUsd
        x.injectedTokens += r.injectedTokens
      })
    }
    for (const [id, r] of raws) if (!pendingRaw.has(id)) pendingRaw.set(id, r)
  }

  const flush = Effect.gen(function* () {
    const now = Date.now()
    for (const u of uncounted.splice(0)) count(u, tokensOf)
    const rows = [...stats]
    stats.clear()
    const raws = [...pendingRaw]
    pendingRaw.clear()
    if (rows.length === 0 && raws.length === 0) return
    yield* transaction(
      sql,
      Effect.gen(function* () {
        for (const [key, r] of rows) {
          const [d, engine, combo, model] = key.split("\u0000") as [string, string, string, string]
          yield* sql`INSERT INTO compression_stats (day, engine, combo, model, requests, tokens_before, tokens_after, saved_usd, injected_tokens)
            VALUES (${d}, ${engine}, ${combo}, ${model}, ${r.requests}, ${r.tokensBefore}, ${r.tokensAfter}, ${r.savedUsd}, ${r.injectedTokens})
            ON CONFLICT (day, engine, combo, model) DO UPDATE SET
              requests = compression_stats.requests + excluded.requests,
              tokens_before = compression_stats.tokens_before + excluded.tokens_before,
              tokens_after = compression_stats.tokens_after + excluded.tokens_after,
              saved_usd = compression_stats.saved_usd + excluded.saved_usd,
              injected_tokens = compression_stats.injected_tokens + excluded.injected_tokens`
        }
        for (const [id, r] of raws) {
          yield* sql`INSERT INTO rtk_raw_outputs (id, text, created_at, expires_at) VALUES (${id}, ${r.text}, ${r.at}, ${r.at + RAW_OUTPUT_TTL_MS})
            ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`
        }
      })
    ).pipe(
      Effect.catchAll((e) =>
        Effect.sync(() => keepForNext(rows, raws)).pipe(
          Effect.zipRight(Effect.logWarning(`compression stats not written yet: ${e.message}`))
        )
      )
    )
    yield* sql`DELETE FROM rtk_raw_outputs WHERE expires_at < ${now}`.pipe(Effect.ignore)
  })

  const analytics = (q: { readonly from?: string; readonly to?: string }) =>
    Effect.gen(function* () {
      const to = q.to ?? day(Date.now())
      const from = q.from ?? day(Date.now() - 29 * 86_400_000)
      if (Number.isNaN(Date.parse(from)) || Number.isNaN(Date.parse(to)))
        return yield* new BadRequest({ message: "from and to must be real days (YYYY-MM-DD)" })
      if (from > to) return yield* new BadRequest({ message: `from (${from}) is after to (${to})` })
      yield* flush
      const rows = yield* sql<StatsRow>`
        SELECT * FROM compression_stats WHERE day >= ${from} AND day <= ${to} ORDER BY day, engine, combo, model`.pipe(Effect.orDie)
      return summed(from, to, rows)
    })

  const rawOutput = (id: string) =>
    Effect.gen(function* () {
      const pending = pendingRaw.get(id)
      if (pending) return { id, text: pending.text, createdAt: toIso(pending.at)!, expiresAt: toIso(pending.at + RAW_OUTPUT_TTL_MS)! }
      const rows = yield* sql<{
        id: string
        text: string
        created_at: number
        expires_at: number
      }>`SELECT * FROM rtk_raw_outputs WHERE id = ${id} AND expires_at >= ${Date.now()}`.pipe(Effect.orDie)
      const r = rows[0]
      if (!r) return yield* new NotFound({ message: `no raw output '${id}' (raw outputs are kept ${RAW_OUTPUT_TTL_MS / 3_600_000} hours)` })
      return { id: r.id, text: r.text, createdAt: toIso(Number(r.created_at))!, expiresAt: toIso(Number(r.expires_at))! }
    })

  return { keepRaw, record, flush, analytics, rawOutput }
}
