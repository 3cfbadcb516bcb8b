import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { AccountingConfig } from "../../../services/accounting/AccountingConfig.js"
import { Budgets } from "../../../services/accounting/Budgets.js"
import { Idempotency } from "../../../services/accounting/Idempotency.js"
import { Pricing } from "../../../services/accounting/Pricing.js"
import { ResponseCache } from "../../../services/accounting/ResponseCache.js"
import { TokenLimits } from "../../../services/accounting/TokenLimits.js"
import { ManagementApi } from "../Api.js"

/** Budgets, token limits, pricing and cache statistics (docs/accounting.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "accounting", (handlers) =>
  Effect.gen(function* () {
    const budgets = yield* Budgets
    const limits = yield* TokenLimits
    const pricing = yield* Pricing
    const cache = yield* ResponseCache
    const idempotency = yield* Idempotency
    const config = yield* AccountingConfig
    return handlers
      .handle("budgets", ({ urlParams }) =>
        Effect.zipRight(
          budgets.refresh,
          Effect.map(budgets.status(urlParams.apiKeyId || undefined), (list) => ({ budgets: list }))
        )
      )
      .handle("setBudget", ({ payload }) => budgets.set(payload))
      .handle("removeBudget", ({ path }) => Effect.as(budgets.remove(path.id), { removed: path.id }))
      .handle("tokenLimits", ({ urlParams }) =>
        Effect.zipRight(
          limits.refresh,
          Effect.map(limits.list(urlParams.apiKeyId || undefined), (list) => ({ limits: list }))
        )
      )
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
