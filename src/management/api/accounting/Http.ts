import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { AccountingConfig } from "../../../services/accounting/AccountingConfig.js"
import { type SubjectInput, type SubjectQuery, subjectRef } from "../../../domain/accounting.js"
import { BadRequest, Forbidden, type NotFound } from "../../../domain/errors.js"
import { type Level, levelOf } from "../../../domain/teams.js"
import { ApiKeys } from "../../../services/auth/ApiKeys.js"
import { Directory } from "../../../services/teams/Directory.js"
import { canReadLimitsOf, isAdmin, readsEverything, refusalToLimit } from "../access.js"
import { keyOwnerOf } from "../Auth.js"
import { Principal } from "../Principal.js"
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
    const keys = yield* ApiKeys
    const directory = yield* Directory
    /** The owner of the key a subject id names (undefined: not a key, or no such key). */
    const keyOwner = (subjectId: string) =>
      levelOf(subjectId) === "key" ? Effect.map(keys.byId(subjectId), (k) => (k ? keyOwnerOf(k) : undefined)) : Effect.succeed(undefined)
    /** A change of limits on this subject, if the caller may make it (docs/teams.md, "Roles and access"). */
    const mayLimit = (subject: Parameters<Levels["Type"]["resolve"]>[0]) =>
      Effect.gen(function* () {
        const { user } = yield* Principal
        if (isAdmin(user)) return
        const id = yield* levels.resolve(subject)
        const refused = refusalToLimit(user, id, yield* keyOwner(id), directory.user)
        if (refused !== undefined) return yield* new Forbidden({ message: `the role ${user.role} may not change these limits: ${refused}` })
      })
    /** A body's subject checked; a body naming none or several is left to the handler's own 400. */
    const mayLimitBody = (body: SubjectInput) => {
      const ref = subjectRef(body)
      return typeof ref === "string" ? Effect.void : mayLimit(ref)
    }
    /** The rows whose subject the caller may read. */
    const readable = <A>(rows: ReadonlyArray<A>, subjectOf: (a: A) => string) =>
      Effect.gen(function* () {
        const { user } = yield* Principal
        if (readsEverything(user)) return rows
        const kept: Array<A> = []
        for (const row of rows) if (canReadLimitsOf(user, subjectOf(row), yield* keyOwner(subjectOf(row)), directory.user)) kept.push(row)
        return kept
      })
    return handlers
      .handle("budgets", ({ urlParams }) =>
        Effect.zipRight(
          budgets.refresh,
          Effect.flatMap(subjectOfQuery(levels, urlParams), (subject) =>
            Effect.map(
              Effect.flatMap(budgets.status(subject), (list) => readable(list, (b) => b.apiKeyId)),
              (list) => ({ budgets: list })
            )
          )
        )
      )
      .handle("setBudget", ({ payload }) => Effect.zipRight(mayLimitBody(payload), budgets.set(payload)))
      .handle("removeBudget", ({ path }) => Effect.zipRight(mayLimit(path.id), Effect.as(budgets.remove(path.id), { removed: path.id })))
      .handle("tokenLimits", ({ urlParams }) =>
        Effect.zipRight(
          limits.refresh,
          Effect.flatMap(subjectOfQuery(levels, urlParams), (subject) =>
            Effect.map(
              Effect.flatMap(limits.list(subject), (list) => readable(list, (l) => l.apiKeyId)),
              (list) => ({ limits: list })
            )
          )
        )
      )
      .handle("levelLimits", ({ urlParams }) =>
        Effect.flatMap(subjectOfQuery(levels, urlParams), (subject) =>
          Effect.map(
            Effect.flatMap(levels.list(typeof subject === "string" ? { subjectId: subject } : subject), (list) =>
              readable(list, (l) => l.subjectId)
            ),
            (list) => ({ limits: list })
          )
        )
      )
      .handle("setLevelLimits", ({ payload }) => Effect.zipRight(mayLimitBody(payload), levels.set(payload)))
      .handle("removeLevelLimits", ({ path }) =>
        Effect.zipRight(
          mayLimit(path.id),
          Effect.map(levels.remove(path.id), (removed) => ({ removed }))
        )
      )
      .handle("createTokenLimit", ({ payload }) => Effect.zipRight(mayLimitBody(payload), limits.create(payload)))
      .handle("removeTokenLimit", ({ payload }) =>
        Effect.gen(function* () {
          // The limit's subject decides, as for the other changes (an unknown id is the handler's 404).
          const limit = (yield* limits.list({ level: "all" })).find((l) => l.id === payload.id)
          if (limit !== undefined) yield* mayLimit(limit.apiKeyId)
          return { removed: yield* limits.remove(payload.id) }
        })
      )
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
