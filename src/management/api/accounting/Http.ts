import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { AccountingConfig } from "../../../services/accounting/AccountingConfig.js"
import { type SubjectQuery, subjectRef } from "../../../domain/accounting.js"
import { BadRequest, type NotFound } from "../../../domain/errors.js"
import type { Level } from "../../../domain/teams.js"
import { Budgets } from "../../../services/accounting/Budgets.js"
import { Levels } from "../../../services/accounting/Levels.js"
import { Idempotency } from "../../../services/accounting/Idempotency.js"
import { Pricing } from "../../../services/accounting/Pricing.js"
import { ResponseCache } from "../../../services/accounting/ResponseCache.js"
import { TokenLimits } from "../../../services/accounting/TokenLimits.js"
import { ManagementApi } from "../Api.js"

/**
 * A read's subject: the one level a query names (its id once known: a team by id or name, a user by
 * id or email), or the level to list (`level`, default `key`: every key's, as before levels).
 */
const subjectOfQuery = (
  levels: Levels["Type"],
  q: SubjectQuery
): Effect.Effect<string | { readonly level: Level | "all" }, BadRequest | NotFound> => {
  const ref = subjectRef({
    apiKeyId: q.apiKeyId || undefined,
    teamId: q.teamId || undefined,
    userId: q.userId || undefined,
    organisation: q.organisation === "true" ? true : undefined
  })
  if (typeof ref !== "string") {
    if (q.level !== undefined) return Effect.fail(new BadRequest({ message: "level lists a level: name no subject with it" }))
    return Effect.zipRight(levels.reload, levels.resolve(ref))
  }
  if (ref.startsWith("name one level only")) return Effect.fail(new BadRequest({ message: ref }))
  return Effect.succeed({ level: q.level ?? ("key" as const) })
}

/** Budgets, token limits, the other limits per level, pricing and cache statistics (docs/accounting.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "accounting", (handlers) =>
  Effect.gen(function* () {
    const budgets = yield* Budgets
    const limits = yield* TokenLimits
    const pricing = yield* Pricing
    const cache = yield* ResponseCache
    const idempotency = yield* Idempotency
    const config = yield* AccountingConfig
    const levels = yield* Levels
    return handlers
      .handle("budgets", ({ urlParams }) =>
        Effect.zipRight(
          budgets.refresh,
          Effect.flatMap(subjectOfQuery(levels, urlParams), (subject) => Effect.map(budgets.status(subject), (list) => ({ budgets: list })))
        )
      )
      .handle("setBudget", ({ payload }) => budgets.set(payload))
      .handle("removeBudget", ({ path }) => Effect.as(budgets.remove(path.id), { removed: path.id }))
      .handle("tokenLimits", ({ urlParams }) =>
        Effect.zipRight(
          limits.refresh,
          Effect.flatMap(subjectOfQuery(levels, urlParams), (subject) => Effect.map(limits.list(subject), (list) => ({ limits: list })))
        )
      )
      .handle("levelLimits", ({ urlParams }) =>
        Effect.flatMap(subjectOfQuery(levels, urlParams), (subject) =>
          Effect.map(levels.list(typeof subject === "string" ? { subjectId: subject } : subject), (list) => ({ limits: list }))
        )
      )
      .handle("setLevelLimits", ({ payload }) => levels.set(payload))
      .handle("removeLevelLimits", ({ path }) => Effect.map(levels.remove(path.id), (removed) => ({ removed })))
      .handle("createTokenLimit", ({ payload }) => limits.create(payload))
      .handle("removeTokenLimit", ({ payload }) => Effect.map(limits.remove(payload.id), (removed) => ({ removed })))
      .handle("pricing", () => Effect.map(pricing.list, (prices) => ({ prices })))
      .handle("setPrice", ({ payload }) => pricing.setOverride(payload))
      .handle("removePrice", ({ payload }) =>
        Effect.map(pricing.removeOverride(payload.provider, payload.model), (removed) => ({ removed }))
      )
      .handle("cacheStats", () =>
        Effect.gen(function* () {
          const stats = yield* cache.stats
          const idem = yield* idempotency.stats
          return {
            semanticCache: {
              memorySize: stats.memorySize,
              memoryMaxSize: stats.memoryMaxSize,
              dbSize: stats.dbSize,
              hitRate: stats.hitRate,
              hits: stats.hits,
              misses: stats.misses,
              similarHits: stats.similarHits,
              ttlSeconds: Math.round(config.cacheTtlMs / 1000),
              embeddingModel: config.cacheEmbeddingModel ?? null
            },
            idempotency: { activeKeys: idem.activeKeys, windowMs: idem.windowMs }
          }
        })
      )
      .handle("clearCache", () =>
        Effect.gen(function* () {
          const cleared = yield* cache.clear
          const idempotencyKeys = yield* idempotency.clear
          yield* Effect.logInfo(
            `caches cleared: ${cleared.memory} in memory, ${cleared.db} in the database, ${idempotencyKeys} idempotency keys`
          )
          return { cleared: { memory: cleared.memory, db: cleared.db, idempotencyKeys } }
        })
      )
  })
)
