import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Parsed } from "../handler.js"
import { orDash, printJson, table } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import type { cacheOptions, quotaOptions } from "./accounting.js"

const usd = (n: number | null | undefined) => (n === null || n === undefined ? "-" : `$${n.toFixed(4)}`)

export const quota = (opts: Parsed<typeof quotaOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const apiKeyId = Option.getOrUndefined(opts.apiKeyId)
    const query = apiKeyId ? { apiKeyId } : {}
    const [budgets, limits] = yield* Effect.all([
      client.accounting.budgets({ urlParams: query }),
      client.accounting.tokenLimits({ urlParams: query })
    ]).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson({ budgets: budgets.budgets, tokenLimits: limits.limits })
    if (budgets.budgets.length === 0 && limits.limits.length === 0)
      return yield* Console.log("no budgets or token limits are set (POST /api/usage/budget, POST /api/usage/token-limits)")
    if (budgets.budgets.length > 0) {
      yield* Console.log("Budgets (USD)")
      yield* Console.log(
        table(
          ["KEY", "WINDOW", "SPENT", "LIMIT", "REMAINING", "RESETS", "STATE"],
          budgets.budgets.flatMap((b) =>
            (["daily", "weekly", "monthly"] as const).flatMap((name) => {
              const w = b.windows[name]
              return w
                ? [
                    [
                      b.apiKeyId,
                      name,
                      usd(w.spentUsd),
                      usd(w.limitUsd),
                      usd(w.remainingUsd),
                      w.resetsAt,
                      w.exceeded ? "exceeded" : w.warning ? "warning" : "ok"
                    ]
                  ]
                : []
            })
          )
        )
      )
    }
    if (limits.limits.length > 0) {
      yield* Console.log(budgets.budgets.length > 0 ? "\nToken limits" : "Token limits")
      yield* Console.log(
        table(
          ["ID", "KEY", "SCOPE", "TARGET", "USED", "LIMIT", "WINDOW", "RESETS"],
          limits.limits.map((l) => [
            l.id,
            l.apiKeyId,
            l.scope,
            orDash(l.provider ?? l.model),
            String(l.usedTokens),
            String(l.maxTokens),
            l.window,
            l.resetsAt
          ])
        )
      )
    }
  }).pipe(withHttp)

export const cacheStats = (opts: Parsed<typeof cacheOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const s = yield* client.accounting.cacheStats().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(s)
    const c = s.semanticCache
    yield* Console.log(
      `response cache: ${c.memorySize} of ${c.memoryMaxSize} in memory, ${c.dbSize} in the database, TTL ${c.ttlSeconds} s`
    )
    yield* Console.log(
      `hits ${c.hits} (${c.similarHits} by similarity), misses ${c.misses}, hit rate ${(c.hitRate * 100).toFixed(1)}%${c.embeddingModel ? `, embeddings by ${c.embeddingModel}` : ", exact match only"}`
    )
    yield* Console.log(`idempotency: ${s.idempotency.activeKeys} active keys, window ${s.idempotency.windowMs} ms`)
  }).pipe(withHttp)

export const cacheClear = (opts: Parsed<typeof cacheOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const r = yield* client.accounting.clearCache().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(r)
    yield* Console.log(
      `cleared ${r.cleared.memory} cached answers in memory, ${r.cleared.db} in the database, ${r.cleared.idempotencyKeys} idempotency keys`
    )
  }).pipe(withHttp)
