import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

export interface AccountingConfigShape {
  /** Usage rows older than this many days are deleted (`USAGE_RETENTION_DAYS`, default 90). */
  readonly usageRetentionDays: number
  /** At most this many usage rows are kept, the oldest go first (`USAGE_MAX_ROWS`, default 1,000,000). */
  readonly usageMaxRows: number
  /** Response cache entries live this long (`GATEWAY_CACHE_TTL_SECONDS`, default 3600). */
  readonly cacheTtlMs: number
  /** Entries kept in memory (`GATEWAY_CACHE_MAX_ENTRIES`, default 1000); the database tier keeps the rest until they expire. */
  readonly cacheMaxEntries: number
  /** An embedding model id (`<provider>/<model>`) for similarity matching (`GATEWAY_CACHE_EMBEDDING_MODEL`); none: exact match only. */
  readonly cacheEmbeddingModel: string | undefined
  /** Cosine similarity at or above which a cached answer is reused (`GATEWAY_CACHE_SIMILARITY`, default 0.95). */
  readonly cacheSimilarity: number
  /** The model budget-exhausted requests fall back to (`GATEWAY_EMERGENCY_FALLBACK_MODEL`); none: the first free model connected. */
  readonly emergencyFallbackModel: string | undefined
}

export const DEFAULT_ACCOUNTING: AccountingConfigShape = {
  usageRetentionDays: 90,
  usageMaxRows: 1_000_000,
  cacheTtlMs: 3_600_000,
  cacheMaxEntries: 1000,
  cacheEmbeddingModel: undefined,
  cacheSimilarity: 0.95,
  emergencyFallbackModel: undefined
}

/** Accounting and cache settings, read from the environment at start (docs/accounting.md). */
export class AccountingConfig extends Context.Tag("gateway/AccountingConfig")<AccountingConfig, AccountingConfigShape>() {
  static readonly layer = Layer.effect(
    AccountingConfig,
    Effect.gen(function* () {
      const int = (name: string, fallback: number, min: number) =>
        Config.integer(name).pipe(
          Config.validate({ message: `${name} must be an integer of at least ${min}`, validation: (n) => n >= min }),
          Config.withDefault(fallback)
        )
      const text = (name: string) =>
        Config.string(name).pipe(Config.option, Config.map(Option.filter((s) => s.trim() !== "")), Config.map(Option.getOrUndefined))
      return yield* Config.all({
        usageRetentionDays: int("USAGE_RETENTION_DAYS", DEFAULT_ACCOUNTING.usageRetentionDays, 1),
        usageMaxRows: int("USAGE_MAX_ROWS", DEFAULT_ACCOUNTING.usageMaxRows, 1000),
        cacheTtlMs: Config.map(int("GATEWAY_CACHE_TTL_SECONDS", DEFAULT_ACCOUNTING.cacheTtlMs / 1000, 1), (s) => s * 1000),
        cacheMaxEntries: int("GATEWAY_CACHE_MAX_ENTRIES", DEFAULT_ACCOUNTING.cacheMaxEntries, 1),
        cacheEmbeddingModel: text("GATEWAY_CACHE_EMBEDDING_MODEL"),
        cacheSimilarity: Config.number("GATEWAY_CACHE_SIMILARITY").pipe(
          Config.validate({ message: "GATEWAY_CACHE_SIMILARITY must be between 0 and 1", validation: (n) => n > 0 && n <= 1 }),
          Config.withDefault(DEFAULT_ACCOUNTING.cacheSimilarity)
        ),
        emergencyFallbackModel: text("GATEWAY_EMERGENCY_FALLBACK_MODEL")
      })
    })
  )

  static readonly layerTest = (overrides: Partial<AccountingConfigShape> = {}) =>
    Layer.succeed(AccountingConfig, { ...DEFAULT_ACCOUNTING, ...overrides })
}
