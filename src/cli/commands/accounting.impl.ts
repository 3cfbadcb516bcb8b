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
    const teamId = Option.getOrUndefined(opts.teamId)
    const userId = Option.getOrUndefined(opts.userId)
    // One level (the server says which when several are named), or a listing: every key's, or with --all every level's.
    const query = {
      ...(apiKeyId ? { apiKeyId } : {}),
      ...(teamId ? { teamId } : {}),
      ...(userId ? { userId } : {}),
      ...(opts.organisation ? { organisation: "true" as const } : {}),
      ...(opts.all && !apiKeyId && !teamId && !userId && !opts.organisation ? { level: "all" as const } : {})
    }
    const named = apiKeyId !== undefined || teamId !== undefined || userId !== undefined || opts.organisation
    const [budgets, limits, levels] = yield* Effect.all([
      client.accounting.budgets({ urlParams: query }),
      client.accounting.tokenLimits({ urlParams: query }),
      named || opts.all ? client.accounting.levelLimits({ urlParams: query }) : Effect.succeed({ limits: [] })
    ]).pipe(Effect.mapError(explain(url)))
    const others = levels.limits.filter((l) => l.rpm !== null || l.tpm !== null || l.models !== null || l.mcp !== null)
    if (opts.json) return yield* printJson({ budgets: budgets.budgets, tokenLimits: limits.limits, limits: levels.limits })
    if (budgets.budgets.length === 0 && limits.limits.length === 0 && others.length === 0)
      return yield* Console.log(
        "no budgets or limits are set (POST /api/usage/budget, POST /api/usage/token-limits, POST /api/usage/limits)"
      )
    if (budgets.budgets.length > 0) {
      yield* Console.log("Budgets (USD)")
      yield* Console.log(
        table(
          ["LEVEL", "WHO", "WINDOW", "SPENT", "LIMIT", "REMAINING", "RESETS", "STATE"],
          budgets.budgets.flatMap((b) =>
            (["daily", "weekly", "monthly"] as const).flatMap((name) => {
              const w = b.windows[name]
              return w
                ? [
                    [
                      b.level ?? "key",
                      b.subjectName ?? b.apiKeyId,
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
          ["ID", "LEVEL", "WHO", "SCOPE", "TARGET", "USED", "LIMIT", "WINDOW", "RESETS"],
          limits.limits.map((l) => [
            l.id,
            l.level ?? "key",
            l.subjectName ?? l.apiKeyId,
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
    if (others.length > 0) {
      yield* Console.log(budgets.budgets.length > 0 || limits.limits.length > 0 ? "\nOther limits" : "Other limits")
      yield* Console.log(
        table(
          ["LEVEL", "WHO", "RPM", "TPM", "MODELS", "MCP", "ABOVE"],
          others.map((l) => [
            l.level,
            l.name,
            orDash(l.rpm === null ? null : String(l.rpm)),
            orDash(l.tpm === null ? null : String(l.tpm)),
            orDash(l.models?.join(", ") ?? null),
            orDash(l.mcp?.allow.join(", ") ?? null),
            orDash(l.above.map((a) => a.name).join(" < ") || null)
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
