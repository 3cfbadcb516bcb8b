import * as Schema from "effect/Schema"
import { strict } from "./parse.js"
import { QueueView } from "./quotaQueue.js"

/**
 * Resilience settings (GET/PATCH /api/resilience), persisted in the kv table. Every field has
 * a default, so a stored document only holds what an operator changed. Spec document 1:
 * "Circuit breaker settings", "Model lockout settings", and the quota-share / wait settings.
 */

const PositiveInt = (name: string) => Schema.Int.pipe(Schema.positive({ message: () => `${name} must be a positive integer` }))
const Millis = (name: string) =>
  Schema.Int.pipe(
    Schema.between(0, 24 * 60 * 60 * 1000, { message: () => `${name} must be an integer number of milliseconds between 0 and 86400000` })
  )

export const BreakerProfile = Schema.Struct({
  /** Consecutive provider-level failures that move CLOSED to DEGRADED. */
  degradationThreshold: PositiveInt("degradationThreshold"),
  /** Consecutive provider-level failures that open the breaker. */
  failureThreshold: PositiveInt("failureThreshold"),
  /** How long an OPEN breaker waits before letting a probe through (HALF_OPEN). */
  resetTimeoutMs: Millis("resetTimeoutMs")
}).annotations(strict)
export type BreakerProfile = typeof BreakerProfile.Type

const QueueMaxParked = Schema.Int.pipe(
  Schema.between(0, 100_000, { message: () => "quotaQueue.maxParked must be an integer between 0 and 100000" })
)

export const ResilienceSettings = Schema.Struct({
  providerBreaker: Schema.Struct({
    oauth: BreakerProfile,
    apikey: BreakerProfile,
    /** Local providers: failureThreshold 2, reset 15 s, degradation derived; not editable. */
    local: BreakerProfile
  }),
  connectionCooldown: Schema.Struct({
    oauthBaseMs: Millis("oauthBaseMs"),
    apiKeyBaseMs: Millis("apiKeyBaseMs"),
    /** Cap of one cooldown, however high the backoff level. */
    maxCooldownMs: Millis("maxCooldownMs")
  }),
  modelLockout: Schema.Struct({
    enabled: Schema.Boolean,
    errorCodes: Schema.Array(
      Schema.Int.pipe(Schema.between(400, 599, { message: () => "errorCodes must be HTTP statuses between 400 and 599" }))
    ),
    baseCooldownMs: Millis("baseCooldownMs"),
    maxCooldownMs: Millis("maxCooldownMs"),
    maxBackoffSteps: Schema.Int.pipe(Schema.between(0, 30, { message: () => "maxBackoffSteps must be an integer between 0 and 30" })),
    useExponentialBackoff: Schema.Boolean
  }),
  /** Per-connection `max_concurrent` semaphore of quota-share dispatch. */
  quotaShareConcurrencyLimit: Schema.Struct({
    enabled: Schema.Boolean,
    /** Requests that may wait for a slot per connection; beyond it a request proceeds without one (fail-open). */
    maxQueue: Schema.Int.pipe(Schema.between(0, 100_000, { message: () => "maxQueue must be an integer between 0 and 100000" })),
    /** Longest wait for a slot; then the request proceeds without one (fail-open). */
    waitTimeoutMs: Millis("waitTimeoutMs")
  }),
  /** Quota-share combos: wait out a short transient cooldown instead of answering 429. */
  comboCooldownWait: Schema.Struct({
    enabled: Schema.Boolean,
    maxWaitMs: Millis("maxWaitMs"),
    maxAttempts: Schema.Int.pipe(Schema.between(0, 10, { message: () => "maxAttempts must be an integer between 0 and 10" })),
    budgetMs: Millis("budgetMs")
  }),
  /**
   * Requests parked until a quota resets (docs/resilience.md, "Waiting out a quota"): at most `maxParked` in all; beyond
   * it a request is refused at once. Absent from settings stored before it existed: the default.
   */
  quotaQueue: Schema.optionalWith(
    Schema.Struct({
      maxParked: QueueMaxParked
    }),
    { default: () => ({ maxParked: 100 }) }
  )
})
export type ResilienceSettings = typeof ResilienceSettings.Type

export const DEFAULT_RESILIENCE: ResilienceSettings = {
  providerBreaker: {
    oauth: { degradationThreshold: 5, failureThreshold: 8, resetTimeoutMs: 60_000 },
    apikey: { degradationThreshold: 7, failureThreshold: 12, resetTimeoutMs: 30_000 },
    local: { degradationThreshold: 1, failureThreshold: 2, resetTimeoutMs: 15_000 }
  },
  connectionCooldown: { oauthBaseMs: 5_000, apiKeyBaseMs: 3_000, maxCooldownMs: 5 * 60_000 },
  modelLockout: {
    enabled: false,
    errorCodes: [403, 404, 429, 502, 503, 504],
    baseCooldownMs: 120_000,
    maxCooldownMs: 1_800_000,
    maxBackoffSteps: 10,
    useExponentialBackoff: true
  },
  quotaShareConcurrencyLimit: { enabled: true, maxQueue: 100, waitTimeoutMs: 30_000 },
  comboCooldownWait: { enabled: true, maxWaitMs: 5_000, maxAttempts: 2, budgetMs: 8_000 },
  quotaQueue: { maxParked: 100 }
}

const partialProfile = Schema.partial(BreakerProfile).annotations(strict)

/** PATCH /api/resilience: any subset; `providerBreaker.local` is refused (not editable). */
export const PatchResilience = Schema.Struct({
  providerBreaker: Schema.optional(
    Schema.Struct({ oauth: Schema.optional(partialProfile), apikey: Schema.optional(partialProfile) }).annotations({
      parseOptions: { onExcessProperty: "error" as const },
      message: () => "providerBreaker takes oauth and apikey only (local profiles are not editable)"
    })
  ),
  connectionCooldown: Schema.optional(Schema.partial(ResilienceSettings.fields.connectionCooldown).annotations(strict)),
  modelLockout: Schema.optional(Schema.partial(ResilienceSettings.fields.modelLockout).annotations(strict)),
  quotaShareConcurrencyLimit: Schema.optional(Schema.partial(ResilienceSettings.fields.quotaShareConcurrencyLimit).annotations(strict)),
  comboCooldownWait: Schema.optional(Schema.partial(ResilienceSettings.fields.comboCooldownWait).annotations(strict)),
  quotaQueue: Schema.optional(Schema.Struct({ maxParked: Schema.optional(QueueMaxParked) }).annotations(strict))
}).annotations(strict)
export type PatchResilience = typeof PatchResilience.Type

/**
 * Rules a schema cannot express on one field. Returns the problems (empty when valid);
 * `maxCooldownMs >= baseCooldownMs` for lockouts, degradation below opening for breakers.
 */
export const resilienceProblems = (s: ResilienceSettings): Array<string> => {
  const out: Array<string> = []
  if (s.modelLockout.maxCooldownMs < s.modelLockout.baseCooldownMs) {
    out.push(
      `modelLockout.maxCooldownMs (${s.modelLockout.maxCooldownMs}) must be at least baseCooldownMs (${s.modelLockout.baseCooldownMs})`
    )
  }
  for (const cls of ["oauth", "apikey"] as const) {
    const p = s.providerBreaker[cls]
    if (p.degradationThreshold > p.failureThreshold) {
      out.push(
        `providerBreaker.${cls}.degradationThreshold (${p.degradationThreshold}) must not exceed failureThreshold (${p.failureThreshold})`
      )
    }
  }
  return out
}

/** Applies a validated patch to settings (deep merge of the five groups). */
export const applyResiliencePatch = (s: ResilienceSettings, p: PatchResilience): ResilienceSettings => ({
  providerBreaker: {
    oauth: { ...s.providerBreaker.oauth, ...p.providerBreaker?.oauth },
    apikey: { ...s.providerBreaker.apikey, ...p.providerBreaker?.apikey },
    local: s.providerBreaker.local
  },
  connectionCooldown: { ...s.connectionCooldown, ...p.connectionCooldown },
  modelLockout: { ...s.modelLockout, ...p.modelLockout },
  quotaShareConcurrencyLimit: { ...s.quotaShareConcurrencyLimit, ...p.quotaShareConcurrencyLimit },
  comboCooldownWait: { ...s.comboCooldownWait, ...p.comboCooldownWait },
  quotaQueue: { ...s.quotaQueue, ...p.quotaQueue }
})

// ---------------------------------------------------------------- views

/** One breaker: a provider at one upstream origin (`key` is `<provider>@<origin>`, what reset takes). */
export const BreakerViewSchema = Schema.Struct({
  key: Schema.String,
  provider: Schema.String,
  /** `scheme://host:port` the breaker covers; null when the provider has no base URL. */
  origin: Schema.NullOr(Schema.String),
  providerClass: Schema.String,
  state: Schema.Literal("CLOSED", "DEGRADED", "OPEN", "HALF_OPEN"),
  consecutiveFailures: Schema.Number,
  degradationThreshold: Schema.Number,
  failureThreshold: Schema.Number,
  resetTimeoutMs: Schema.Number,
  retryAt: Schema.NullOr(Schema.String),
  lastFailureAt: Schema.NullOr(Schema.String),
  lastStatus: Schema.NullOr(Schema.Number),
  /** HALF_OPEN: a probe is out (sent by this gateway process or another), so requests wait for its verdict. */
  probing: Schema.Boolean
})

export const ConnectionStateView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  provider: Schema.String,
  /** `available`, `cooldown`, `banned`, `expired` or `credits_exhausted`. */
  state: Schema.String,
  rateLimitedUntil: Schema.NullOr(Schema.String),
  testStatus: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
  lastErrorType: Schema.NullOr(Schema.String),
  errorCode: Schema.NullOr(Schema.String),
  backoffLevel: Schema.Number,
  inFlight: Schema.Number,
  max_concurrent: Schema.NullOr(Schema.Number)
})

export const LockoutViewSchema = Schema.Struct({
  provider: Schema.String,
  connection: Schema.String,
  model: Schema.String,
  reason: Schema.String,
  status: Schema.Number,
  failures: Schema.Number,
  expiresAt: Schema.String,
  remainingMs: Schema.Number
})

export const AutoExclusionView = Schema.Struct({
  key: Schema.String,
  until: Schema.String,
  level: Schema.Number
})

export const ResilienceStatus = Schema.Struct({
  settings: ResilienceSettings,
  breakers: Schema.Array(BreakerViewSchema),
  connections: Schema.Array(ConnectionStateView),
  modelCooldowns: Schema.Array(LockoutViewSchema),
  autoExclusions: Schema.Array(AutoExclusionView),
  /** Requests parked until a quota resets (docs/resilience.md, "Waiting out a quota"). */
  queue: QueueView
})

export const ResetResilience = Schema.Struct({
  /**
   * Only this provider's breakers, one per upstream origin (default: all); a breaker key
   * (`<provider>@<origin>`, as GET /api/resilience lists it) resets that one breaker.
   */
  provider: Schema.optional(Schema.Trim.pipe(Schema.minLength(1, { message: () => "provider must not be empty" }))),
  /** With `provider`: only its breaker for this upstream origin (`scheme://host:port`; a base URL is accepted). */
  origin: Schema.optional(Schema.Trim.pipe(Schema.minLength(1, { message: () => "origin must not be empty" }))),
  /** Also clear connection cooldowns and terminal states (default false: breakers only, as the spec says). */
  connections: Schema.optional(Schema.Boolean)
}).annotations(strict)

/** The reset request's body: none at all (read as `null`) is `{}`, every breaker. */
export const ResetResilienceBody = Schema.transform(Schema.Unknown, ResetResilience, {
  strict: false,
  decode: (body) => body ?? {},
  encode: (reset) => reset
})

export const ResetResult = Schema.Struct({
  breakersReset: Schema.Number,
  connectionsReset: Schema.Number
})

export const ClearModelCooldowns = Schema.Union(
  Schema.Struct({ all: Schema.Literal(true) }).annotations(strict),
  Schema.Struct({
    provider: Schema.Trim.pipe(Schema.minLength(1, { message: () => "provider must not be empty" })),
    model: Schema.Trim.pipe(Schema.minLength(1, { message: () => "model must not be empty" })),
    connection: Schema.optional(Schema.Trim.pipe(Schema.minLength(1, { message: () => "connection must not be empty" })))
  }).annotations(strict)
).annotations({ message: () => 'send {"all": true} or {"provider", "model"} (optionally "connection")' })

export const RateLimitStatus = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  provider: Schema.String,
  state: Schema.String,
  rateLimitedUntil: Schema.NullOr(Schema.String),
  backoffLevel: Schema.Number,
  inFlight: Schema.Number,
  max_concurrent: Schema.NullOr(Schema.Number),
  /** Headroom reported by the upstream's rate-limit headers (or a quota error), when known. */
  quota: Schema.NullOr(
    Schema.Struct({
      remaining: Schema.Number,
      limit: Schema.NullOr(Schema.Number),
      remainingCount: Schema.NullOr(Schema.Number),
      resetAt: Schema.NullOr(Schema.String),
      exhausted: Schema.Boolean,
      reportedAt: Schema.String
    })
  )
})

const InboundLimitUse = Schema.Struct({
  limit: Schema.Number,
  used: Schema.Number,
  remaining: Schema.Number,
  /** `key`: set on the key; `auto`: RATE_LIMIT_AUTO_ENABLE's default. */
  source: Schema.Literal("key", "auto")
})

/** A gateway key's inbound limits (per minute) and this window's use. */
export const InboundKeyLimitStatus = Schema.Struct({
  apiKeyId: Schema.String,
  name: Schema.String,
  requests: Schema.NullOr(InboundLimitUse),
  tokens: Schema.NullOr(InboundLimitUse),
  resetSeconds: Schema.Number
})

export const RateLimitConfig = Schema.Struct({
  connectionCooldown: ResilienceSettings.fields.connectionCooldown,
  quotaShareConcurrencyLimit: ResilienceSettings.fields.quotaShareConcurrencyLimit,
  comboCooldownWait: ResilienceSettings.fields.comboCooldownWait,
  /** The automatic per-key limit while RATE_LIMIT_AUTO_ENABLE is on (keys' own limits win), else null. */
  perKeyRequestLimit: Schema.NullOr(Schema.Struct({ rpm: Schema.Number, tpm: Schema.Number })),
  /** Inbound per-key rate limits: the switch, the defaults and the window; `keys` counts keys with a limit now. */
  inbound: Schema.Struct({
    autoEnabled: Schema.Boolean,
    defaultRpm: Schema.Number,
    defaultTpm: Schema.Number,
    windowSeconds: Schema.Number,
    keys: Schema.Number
  })
})
