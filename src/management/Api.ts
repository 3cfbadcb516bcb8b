import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { HealthPing, LoginRequest, LoginResult, SessionInfo } from "../domain/auth.js"
import {
  ConnectionModels,
  ConnectionTestResult,
  ConnectionView,
  CreateConnection,
  ProbeResult,
  UpdateConnection,
  ValidateProvider
} from "../domain/connections.js"
import { BadRequest, Conflict, Forbidden, NotFound, NotImplemented, PayloadTooLarge, TooManyRequests, Unauthorized } from "../domain/errors.js"
import { BackupList, BackupView, ExportAllQuery, RestoreBackup, RestoreResult } from "../domain/backups.js"
import { ClearFeatureFlagsResult, FeatureFlagList, SetFeatureFlag, SetFeatureFlagResult } from "../domain/flags.js"
import { ApiKeyView, CreateApiKey, CreatedApiKey } from "../domain/keys.js"
import { strict } from "../domain/parse.js"
import {
  AliasQuery,
  CatalogQuery,
  CreateProviderModel,
  ModelAliasList,
  ModelAliasView,
  ModelCatalog,
  PatchProviderModel,
  ProviderModelKey,
  ProviderModelQuery,
  ProviderModelView,
  SetModelAlias
} from "../domain/models.js"
import { AutoCombos, ComboView, CreateCombo, UpdateCombo } from "../domain/combos.js"
import { BudgetStatus, PriceRow, TokenLimitView } from "../domain/accounting.js"
import {
  ConnectionUsage,
  HistoryQuery,
  LogsQuery,
  MonitoringHealth,
  RequestLogs,
  TelemetryQuery,
  TelemetrySummary,
  UsageHistory,
  UsageLogs
} from "../domain/usage.js"
import {
  ClearModelCooldowns,
  LockoutViewSchema,
  PatchResilience,
  RateLimitConfig,
  RateLimitStatus,
  ResetResilienceBody,
  ResetResult,
  ResilienceSettings,
  ResilienceStatus
} from "../domain/resilience.js"

/** Who is calling a management route: an admin cookie session or an admin-scope API key. */
export interface PrincipalShape {
  readonly kind: "session" | "api-key"
  /** Key id, or "admin" for a session; used as the audit actor. */
  readonly id: string
}
export class Principal extends Context.Tag("gateway/Principal")<Principal, PrincipalShape>() {}

/**
 * Management authentication: `Authorization: Bearer <admin key>`, or the `gw_session` cookie
 * from `POST /api/auth/login`. Cookie requests that change state (POST, PUT, PATCH, DELETE)
 * must carry the session's CSRF token in `X-CSRF-Token` and may not come from another origin.
 */
export class ManagementAuth extends HttpApiMiddleware.Tag<ManagementAuth>()("gateway/ManagementAuth", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: Principal
}) {}

const IdPath = Schema.Struct({ id: Schema.String })

export class HealthGroup extends HttpApiGroup.make("health").add(
  HttpApiEndpoint.get("ping", "/api/health/ping").addSuccess(HealthPing)
) {}

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("login", "/api/auth/login")
      .setPayload(LoginRequest)
      .addSuccess(LoginResult)
      .addError(Unauthorized)
      .addError(TooManyRequests)
  )
  .add(HttpApiEndpoint.post("logout", "/api/auth/logout").addSuccess(Schema.Struct({ ok: Schema.Boolean })))
  .add(HttpApiEndpoint.get("session", "/api/auth/session").addSuccess(SessionInfo)) {}

export class KeysGroup extends HttpApiGroup.make("keys")
  .add(HttpApiEndpoint.get("list", "/api/keys").addSuccess(Schema.Struct({ keys: Schema.Array(ApiKeyView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/keys")
      .setPayload(CreateApiKey)
      .addSuccess(CreatedApiKey, { status: 201 })
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/keys/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ApiKeyView }))
      .addError(NotFound)
      .addError(Conflict)
  )
  .middleware(ManagementAuth) {}

export class ProvidersGroup extends HttpApiGroup.make("providers")
  .add(
    HttpApiEndpoint.get("list", "/api/providers").addSuccess(Schema.Struct({ connections: Schema.Array(ConnectionView) }))
  )
  .add(
    HttpApiEndpoint.post("create", "/api/providers")
      .setPayload(CreateConnection)
      .addSuccess(ConnectionView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.post("validate", "/api/providers/validate")
      .setPayload(ValidateProvider)
      .addSuccess(ProbeResult)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/api/providers/:id").setPath(IdPath).addSuccess(ConnectionView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("update", "/api/providers/:id")
      .setPath(IdPath)
      .setPayload(UpdateConnection)
      .addSuccess(ConnectionView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/providers/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ConnectionView }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("test", "/api/providers/:id/test")
      .setPath(IdPath)
      .addSuccess(ConnectionTestResult)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("models", "/api/providers/:id/models")
      .setPath(IdPath)
      .addSuccess(ConnectionModels)
      .addError(NotFound)
  )
  .middleware(ManagementAuth) {}

export class FeatureFlagsGroup extends HttpApiGroup.make("featureFlags")
  .add(HttpApiEndpoint.get("list", "/api/settings/feature-flags").addSuccess(FeatureFlagList))
  .add(
    HttpApiEndpoint.put("set", "/api/settings/feature-flags")
      .setPayload(SetFeatureFlag)
      .addSuccess(SetFeatureFlagResult)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.del("clear", "/api/settings/feature-flags").addSuccess(ClearFeatureFlagsResult))
  .middleware(ManagementAuth) {}

export class CombosGroup extends HttpApiGroup.make("combos")
  .add(HttpApiEndpoint.get("list", "/api/combos").addSuccess(Schema.Struct({ combos: Schema.Array(ComboView) })))
  .add(HttpApiEndpoint.post("create", "/api/combos").setPayload(CreateCombo).addSuccess(ComboView, { status: 201 }).addError(BadRequest).addError(Conflict))
  .add(HttpApiEndpoint.get("auto", "/api/combos/auto").addSuccess(AutoCombos))
  .add(HttpApiEndpoint.get("get", "/api/combos/:id").setPath(IdPath).addSuccess(ComboView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("update", "/api/combos/:id").setPath(IdPath).setPayload(UpdateCombo).addSuccess(ComboView).addError(BadRequest).addError(NotFound).addError(Conflict)
  )
  .add(
    HttpApiEndpoint.patch("patch", "/api/combos/:id").setPath(IdPath).setPayload(UpdateCombo).addSuccess(ComboView).addError(BadRequest).addError(NotFound).addError(Conflict)
  )
  .add(HttpApiEndpoint.del("remove", "/api/combos/:id").setPath(IdPath).addSuccess(Schema.Struct({ removed: ComboView })).addError(NotFound))
  .middleware(ManagementAuth) {}

export class ResilienceGroup extends HttpApiGroup.make("resilience")
  .add(HttpApiEndpoint.get("status", "/api/resilience").addSuccess(ResilienceStatus))
  .add(HttpApiEndpoint.patch("update", "/api/resilience").setPayload(PatchResilience).addSuccess(Schema.Struct({ settings: ResilienceSettings })).addError(BadRequest))
  .add(HttpApiEndpoint.post("reset", "/api/resilience/reset").setPayload(ResetResilienceBody).addSuccess(ResetResult).addError(BadRequest))
  .add(HttpApiEndpoint.get("modelCooldowns", "/api/resilience/model-cooldowns").addSuccess(Schema.Struct({ modelCooldowns: Schema.Array(LockoutViewSchema) })))
  .add(
    HttpApiEndpoint.del("clearModelCooldowns", "/api/resilience/model-cooldowns")
      .setPayload(ClearModelCooldowns)
      .addSuccess(Schema.Struct({ cleared: Schema.Number }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("rateLimits", "/api/rate-limits").addSuccess(Schema.Struct({ accounts: Schema.Array(RateLimitStatus) })))
  .add(HttpApiEndpoint.get("rateLimit", "/api/rate-limit").addSuccess(RateLimitConfig))
  .middleware(ManagementAuth) {}

export class UsageGroup extends HttpApiGroup.make("usage")
  .add(HttpApiEndpoint.get("history", "/api/usage/history").setUrlParams(HistoryQuery).addSuccess(UsageHistory).addError(BadRequest))
  .add(HttpApiEndpoint.get("logs", "/api/usage/logs").setUrlParams(LogsQuery).addSuccess(UsageLogs).addError(BadRequest))
  .add(HttpApiEndpoint.get("requestLogs", "/api/usage/request-logs").setUrlParams(LogsQuery).addSuccess(RequestLogs).addError(BadRequest))
  .add(HttpApiEndpoint.get("connection", "/api/usage/:id").setPath(IdPath).addSuccess(ConnectionUsage).addError(NotFound))
  .add(HttpApiEndpoint.get("telemetry", "/api/telemetry/summary").setUrlParams(TelemetryQuery).addSuccess(TelemetrySummary).addError(BadRequest))
  .add(HttpApiEndpoint.get("health", "/api/monitoring/health").addSuccess(MonitoringHealth))
  .middleware(ManagementAuth) {}

const ApiKeyQuery = Schema.Struct({ apiKeyId: Schema.optional(Schema.String) })

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
  .add(HttpApiEndpoint.get("budgets", "/api/usage/budget").setUrlParams(ApiKeyQuery).addSuccess(Schema.Struct({ budgets: Schema.Array(BudgetStatus) })))
  .add(HttpApiEndpoint.post("setBudget", "/api/usage/budget").setPayload(Schema.Unknown).addSuccess(BudgetStatus).addError(BadRequest).addError(NotFound))
  .add(HttpApiEndpoint.del("removeBudget", "/api/usage/budget/:id").setPath(IdPath).addSuccess(Schema.Struct({ removed: Schema.String })).addError(NotFound))
  .add(HttpApiEndpoint.get("tokenLimits", "/api/usage/token-limits").setUrlParams(ApiKeyQuery).addSuccess(Schema.Struct({ limits: Schema.Array(TokenLimitView) })))
  .add(HttpApiEndpoint.post("createTokenLimit", "/api/usage/token-limits").setPayload(Schema.Unknown).addSuccess(TokenLimitView, { status: 201 }).addError(BadRequest).addError(NotFound))
  .add(
    HttpApiEndpoint.del("removeTokenLimit", "/api/usage/token-limits")
      .setPayload(Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1, { message: () => "id is required" })) }).annotations(strict))
      .addSuccess(Schema.Struct({ removed: TokenLimitView }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("pricing", "/api/pricing").addSuccess(Schema.Struct({ prices: Schema.Array(PriceRow) })))
  .add(HttpApiEndpoint.put("setPrice", "/api/pricing").setPayload(Schema.Unknown).addSuccess(PriceRow).addError(BadRequest))
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
  .middleware(ManagementAuth) {}

/** A SQLite database file as a response body. */
const SqliteFile = HttpApiSchema.withEncoding(Schema.Uint8ArrayFromSelf, { kind: "Uint8Array", contentType: "application/vnd.sqlite3" })

/** Backups of the database: list, create, restore, download, upload (docs/operations.md). */
export class BackupsGroup extends HttpApiGroup.make("backups")
  .add(HttpApiEndpoint.get("list", "/api/db-backups").addSuccess(BackupList))
  .add(HttpApiEndpoint.put("create", "/api/db-backups").addSuccess(BackupView, { status: 201 }))
  .add(HttpApiEndpoint.post("restore", "/api/db-backups").setPayload(RestoreBackup).addSuccess(RestoreResult).addError(BadRequest).addError(NotFound))
  .add(HttpApiEndpoint.get("export", "/api/db-backups/export").addSuccess(SqliteFile))
  /** The body is the database file itself (raw, any content type but JSON), read by the handler as a stream. */
  .add(HttpApiEndpoint.post("import", "/api/db-backups/import").addSuccess(RestoreResult).addError(BadRequest).addError(PayloadTooLarge))
  .add(HttpApiEndpoint.get("exportAll", "/api/db-backups/exportAll").setUrlParams(ExportAllQuery).addSuccess(SqliteFile).addError(NotImplemented))
  .middleware(ManagementAuth) {}

// ---------------------------------------------------------------- catalog, aliases and custom models (docs/operations.md)

export class ModelsGroup extends HttpApiGroup.make("models")
  .add(HttpApiEndpoint.get("catalog", "/api/models/catalog").setUrlParams(CatalogQuery).addSuccess(ModelCatalog).addError(BadRequest))
  .add(HttpApiEndpoint.get("aliases", "/api/models/alias").addSuccess(ModelAliasList))
  .add(HttpApiEndpoint.post("setAlias", "/api/models/alias").setPayload(SetModelAlias).addSuccess(ModelAliasView).addError(BadRequest))
  .add(HttpApiEndpoint.del("removeAlias", "/api/models/alias").setUrlParams(AliasQuery).addSuccess(Schema.Struct({ removed: ModelAliasView })).addError(BadRequest).addError(NotFound))
  .add(HttpApiEndpoint.get("customModels", "/api/provider-models").setUrlParams(ProviderModelQuery).addSuccess(Schema.Struct({ models: Schema.Array(ProviderModelView) })).addError(BadRequest))
  .add(HttpApiEndpoint.post("addModel", "/api/provider-models").setPayload(CreateProviderModel).addSuccess(ProviderModelView, { status: 201 }).addError(BadRequest).addError(Conflict))
  .add(HttpApiEndpoint.patch("updateModel", "/api/provider-models").setPayload(PatchProviderModel).addSuccess(ProviderModelView).addError(BadRequest).addError(NotFound))
  .add(HttpApiEndpoint.del("removeModel", "/api/provider-models").setUrlParams(ProviderModelKey).addSuccess(Schema.Struct({ removed: ProviderModelView })).addError(BadRequest).addError(NotFound))
  .middleware(ManagementAuth) {}

/**
 * The management API contract. The server implements it (management/handlers), the CLI
 * derives its client from it, and both validate with the same schemas (src/domain).
 */
export class ManagementApi extends HttpApi.make("gateway")
  .add(HealthGroup)
  .add(AuthGroup)
  .add(KeysGroup)
  .add(ProvidersGroup)
  .add(FeatureFlagsGroup)
  .add(CombosGroup)
  .add(ResilienceGroup)
  .add(UsageGroup)
  .add(AccountingGroup)
  .add(BackupsGroup)
  .add(ModelsGroup) {}
