import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Forbidden, NotFound } from "../../../domain/errors.js"
import { strict } from "../../../domain/parse.js"
import {
  BudgetStatus,
  CreateTokenLimit,
  LevelLimitsView,
  PriceRow,
  SetBudgetPayload,
  SetLevelLimits,
  SetPrice,
  SubjectQuery,
  TokenLimitView
} from "../../../domain/accounting.js"
import { ManagementAuth, IdPath } from "../Principal.js"
import { CONFIGURATION, EVERY_ROLE, Roles, TEAM_ADMINS } from "../Roles.js"

export const CacheStats = Schema.Struct({
  semanticCache: Schema.Struct({
    memorySize: Schema.Number,
    memoryMaxSize: Schema.Number,
    dbSize: Schema.Number,
    hitRate: Schema.Number,
    hits: Schema.Number,
    misses: Schema.Number,
    similarHits: Schema.Number,
    ttlSeconds: Schema.Number,
    embeddingModel: Schema.NullOr(Schema.String)
  }),
  idempotency: Schema.Struct({ activeKeys: Schema.Number, windowMs: Schema.Number })
})

export class AccountingGroup extends HttpApiGroup.make("accounting")
  .add(
    HttpApiEndpoint.get("budgets", "/api/usage/budget")
      .annotate(Roles, EVERY_ROLE)
      .setUrlParams(SubjectQuery)
      .addSuccess(Schema.Struct({ budgets: Schema.Array(BudgetStatus) }))
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("setBudget", "/api/usage/budget")
      .annotate(Roles, TEAM_ADMINS)
      .setPayload(SetBudgetPayload)
      .addSuccess(BudgetStatus)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("removeBudget", "/api/usage/budget/:id")
      .annotate(Roles, TEAM_ADMINS)
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: Schema.String }))
      .addError(NotFound)
      .addError(Forbidden)
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("tokenLimits", "/api/usage/token-limits")
      .annotate(Roles, EVERY_ROLE)
      .setUrlParams(SubjectQuery)
      .addSuccess(Schema.Struct({ limits: Schema.Array(TokenLimitView) }))
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("createTokenLimit", "/api/usage/token-limits")
      .annotate(Roles, TEAM_ADMINS)
      .setPayload(CreateTokenLimit)
      .addSuccess(TokenLimitView, { status: 201 })
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("removeTokenLimit", "/api/usage/token-limits")
      .annotate(Roles, TEAM_ADMINS)
      .setPayload(Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1, { message: () => "id is required" })) }).annotations(strict))
      .addSuccess(Schema.Struct({ removed: TokenLimitView }))
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.get("levelLimits", "/api/usage/limits")
      .annotate(Roles, EVERY_ROLE)
      .setUrlParams(SubjectQuery)
      .addSuccess(Schema.Struct({ limits: Schema.Array(LevelLimitsView) }))
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("setLevelLimits", "/api/usage/limits")
      .annotate(Roles, TEAM_ADMINS)
      .setPayload(SetLevelLimits)
      .addSuccess(LevelLimitsView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("removeLevelLimits", "/api/usage/limits/:id")
      .annotate(Roles, TEAM_ADMINS)
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: LevelLimitsView }))
      .addError(NotFound)
      .addError(Forbidden)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("pricing", "/api/pricing").addSuccess(Schema.Struct({ prices: Schema.Array(PriceRow) })))
  .add(HttpApiEndpoint.put("setPrice", "/api/pricing").setPayload(SetPrice).addSuccess(PriceRow).addError(BadRequest))
  .add(
    HttpApiEndpoint.del("removePrice", "/api/pricing")
      .setPayload(Schema.Struct({ provider: Schema.String, model: Schema.String }).annotations(strict))
      .addSuccess(Schema.Struct({ removed: Schema.Boolean }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("cacheStats", "/api/cache/stats").addSuccess(CacheStats))
  .add(
    HttpApiEndpoint.del("clearCache", "/api/cache/stats").addSuccess(
      Schema.Struct({ cleared: Schema.Struct({ memory: Schema.Number, db: Schema.Number, idempotencyKeys: Schema.Number }) })
    )
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
