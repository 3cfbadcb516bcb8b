import * as Schema from "effect/Schema"
import { ProxyFamilySchema } from "./proxies.js"
import { isIP } from "node:net"
import { oneOf, strict, strictStruct } from "./parse.js"
import { BridgeModels } from "./bridge.js"
import { ShadowOptions, ShadowTargets } from "./shadow.js"

/**
 * The global settings document (spec document 2, "Management endpoint families", Settings):
 * `GET`/`PUT`/`PATCH /api/settings` and one route per section. docs/operations.md, "Settings".
 */

/** A whole number in [min, max]; one message for both checks. */
const whole = (min: number, max: number, message: string) =>
  Schema.Number.pipe(Schema.int({ message: () => message }), Schema.between(min, max, { message: () => message }))

// ---------------------------------------------------------------- addresses

/** An IPv4 or IPv6 address, or a CIDR of either (`10.0.0.0/8`, `2001:db8::/32`). */
export const isAddressOrCidr = (s: string): boolean => {
  const slash = s.indexOf("/")
  if (slash === -1) return isIP(s) !== 0
  const ip = s.slice(0, slash)
  const bits = s.slice(slash + 1)
  const family = isIP(ip)
  if (family === 0 || !/^\d{1,3}$/.test(bits)) return false
  return Number(bits) <= (family === 4 ? 32 : 128)
}

const AddressOrCidr = Schema.Trim.pipe(
  Schema.filter((s) => isAddressOrCidr(s), { message: (issue) => `not an IP address or CIDR (got ${JSON.stringify(issue.actual)})` })
)

const AddressList = Schema.Array(AddressOrCidr).pipe(Schema.maxItems(1000, { message: () => "at most 1000 entries" }))

export const IpFilterSettings = strictStruct({
  /** Empty: every address is allowed (unless denied). */
  allow: Schema.optionalWith(AddressList, { default: () => [] }),
  /** Wins over `allow`. */
  deny: Schema.optionalWith(AddressList, { default: () => [] })
})
export type IpFilterSettings = typeof IpFilterSettings.Type

// ---------------------------------------------------------------- proxy

export const PROXY_SCHEMES = ["http:", "https:", "socks5:", "socks5h:"] as const

/** Why `s` is not a usable upstream proxy URL, or undefined when it is. */
export const proxyUrlProblem = (s: string): string | undefined => {
  let u: URL
  try {
    u = new URL(s)
  } catch {
    return "not a URL"
  }
  if (!(PROXY_SCHEMES as ReadonlyArray<string>).includes(u.protocol))
    return `scheme must be http, https, socks5 or socks5h (got ${u.protocol.slice(0, -1)})`
  if (!u.hostname) return "has no host"
  if ((u.pathname && u.pathname !== "/") || u.search || u.hash) return "must not have a path, query or fragment"
  return undefined
}

const ProxyUrl = Schema.Trim.pipe(
  Schema.maxLength(2000, { message: () => "at most 2000 characters" }),
  Schema.filter((s) => {
    const problem = proxyUrlProblem(s)
    return problem === undefined ? true : problem
  })
)

/** A host name, `.domain` suffix, IP, CIDR, or `*`, the usual NO_PROXY entries. */
const NoProxyEntry = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(253, { message: () => "at most 253 characters" }),
  Schema.pattern(/^(\*|\.?[A-Za-z0-9*_-]+(\.[A-Za-z0-9_-]+)*(:\d{1,5})?|[0-9a-fA-F:.]+(\/\d{1,3})?)$/, {
    message: () => "not a host name, domain suffix, IP address or CIDR"
  })
)

export const ProxySettings = strictStruct({
  /**
   * `http://`, `https://`, `socks5://` (or `socks5h://`) with optional `user:password@`; null: no
   * proxy. Listings show the password as `****`; sending `****` back keeps the stored one.
   */
  url: Schema.optionalWith(Schema.NullOr(ProxyUrl), { default: () => null }),
  /**
   * The egress family (docs/egress.md): `auto`, or `ipv4`/`ipv6` to pin the connection to the
   * proxy to that family with no fallback (spec document 2, "Egress family policy behavior").
   */
  family: Schema.optionalWith(ProxyFamilySchema, { default: () => "auto" as const }),
  /** Hosts that go direct. */
  noProxy: Schema.optionalWith(Schema.Array(NoProxyEntry).pipe(Schema.maxItems(500, { message: () => "at most 500 entries" })), {
    default: () => []
  })
})
export type ProxySettings = typeof ProxySettings.Type

export const ProxyTestRequest = Schema.Struct({
  /** What to fetch (GET) through the proxy. */
  url: Schema.Trim.pipe(
    Schema.filter((s) => {
      try {
        const u = new URL(s)
        return u.protocol === "http:" || u.protocol === "https:" ? true : "must be an http or https URL"
      } catch {
        return "not a URL"
      }
    })
  ),
  /** The proxy to go through; default the configured one. */
  proxy: Schema.optional(ProxyUrl),
  /** The family to pin the connection to the proxy to; default the configured proxy's (`auto` for a given URL). */
  family: Schema.optional(ProxyFamilySchema),
  timeoutMs: Schema.optional(whole(100, 60_000, "timeoutMs must be a whole number of ms between 100 and 60000"))
}).annotations(strict)
export type ProxyTestRequest = typeof ProxyTestRequest.Type

export const ProxyTestResult = Schema.Struct({
  ok: Schema.Boolean,
  /** The target's HTTP status, null when nothing came back. */
  status: Schema.NullOr(Schema.Number),
  latencyMs: Schema.Number,
  error: Schema.NullOr(Schema.String),
  /** The proxy used, password masked. */
  proxy: Schema.String,
  /** The address family of the gateway's connection to the proxy (its egress family); null when none was made. */
  family: Schema.NullOr(Schema.Literal("ipv4", "ipv6"))
})
export type ProxyTestResult = typeof ProxyTestResult.Type

// ---------------------------------------------------------------- thinking budget

export const EFFORTS = ["none", "minimal", "low", "medium", "high"] as const
export type Effort = (typeof EFFORTS)[number]

const Tokens = (what: string) => whole(0, 1_000_000, `${what} must be a whole number of tokens between 0 and 1000000`)

export const ThinkingBudgetSettings = strictStruct({
  /** `passthrough`: requests as sent; `cap`: budgets above `maxTokens` lowered; `force`: every request at `effort`/`budgetTokens`. */
  mode: Schema.optionalWith(oneOf(["passthrough", "cap", "force"] as const, "mode"), { default: () => "passthrough" as const }),
  /** `cap`: the largest reasoning budget a request keeps. */
  maxTokens: Schema.optionalWith(Tokens("maxTokens"), { default: () => 8192 }),
  /** `force`: the level for formats that take a level (OpenAI, Responses, Ollama). */
  effort: Schema.optionalWith(oneOf(EFFORTS, "effort"), { default: () => "medium" as const }),
  /** `force`: the budget for formats that take tokens (Anthropic, Gemini); 0 turns thinking off. */
  budgetTokens: Schema.optionalWith(Tokens("budgetTokens"), { default: () => 8192 })
})
export type ThinkingBudgetSettings = typeof ThinkingBudgetSettings.Type

// ---------------------------------------------------------------- system prompt

export const SystemPromptSettings = strictStruct({
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  text: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100_000, { message: () => "at most 100000 characters" })), {
    default: () => ""
  }),
  /** `prepend`: before the client's own system prompt; `append`: after it. */
  position: Schema.optionalWith(oneOf(["prepend", "append"] as const, "position"), { default: () => "prepend" as const }),
  /** Gateway API key ids whose requests do not get it (the per-key opt-out). */
  skipKeyIds: Schema.optionalWith(
    Schema.Array(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }), Schema.maxLength(200))).pipe(
      Schema.maxItems(1000)
    ),
    { default: () => [] }
  )
})
export type SystemPromptSettings = typeof SystemPromptSettings.Type

// ---------------------------------------------------------------- compression and context

/** A compression combo by id or name, or `engine:<id>` (one engine with its configured settings). */
const ProfileRef = Schema.NullOr(
  Schema.Trim.pipe(Schema.minLength(1, { message: () => "must not be empty (null for none)" }), Schema.maxLength(200))
)

export const CompressionAutoTrigger = strictStruct({
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Compress when the prompt's estimated tokens reach this (null: this test is off). */
  thresholdTokens: Schema.optionalWith(
    Schema.NullOr(whole(1, 10_000_000, "thresholdTokens must be a whole number of tokens from 1 to 10000000")),
    { default: () => 64_000 }
  ),
  /** Or when they reach this share of the target model's context window (null: off). */
  windowShare: Schema.optionalWith(
    Schema.NullOr(
      Schema.Number.pipe(Schema.finite(), Schema.between(0.05, 1, { message: () => "windowShare must be between 0.05 and 1" }))
    ),
    {
      default: () => 0.75
    }
  )
})

/** docs/compression.md, "Selection": what compresses a request, and the memory and skill injection budget. */
export const CompressionSettings = strictStruct({
  /** The global switch: off, nothing compresses (the request header cannot turn it on). */
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /** What `default` means (the header's `default`, the auto-trigger, compressByDefault): null is the built-in default combo. */
  defaultCombo: Schema.optionalWith(ProfileRef, { default: () => null }),
  /** The profile every request uses unless the header or a routing assignment says otherwise. */
  activeProfile: Schema.optionalWith(ProfileRef, { default: () => null }),
  autoTrigger: Schema.optionalWith(CompressionAutoTrigger, { default: () => Schema.decodeUnknownSync(CompressionAutoTrigger)({}) }),
  /** The panel default: compress every eligible request with the default combo when nothing else chose. */
  compressByDefault: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Memory entries and skills added to a request's system prompt, at most this many tokens (0: none). */
  injectionMaxTokens: Schema.optionalWith(Tokens("injectionMaxTokens"), { default: () => 2_000 })
})
export type CompressionSettings = typeof CompressionSettings.Type

// ---------------------------------------------------------------- backups

export const BackupSettings = strictStruct({
  /** Hours between scheduled backups (fractions allowed, 0 off); null: GATEWAY_BACKUP_INTERVAL_HOURS (default 24). */
  intervalHours: Schema.optionalWith(
    Schema.NullOr(
      Schema.Number.pipe(Schema.finite(), Schema.between(0, 24 * 365, { message: () => "intervalHours must be between 0 and 8760" }))
    ),
    { default: () => null }
  ),
  /** Scheduled backups kept (0 off); null: GATEWAY_BACKUP_KEEP (default 7). */
  keep: Schema.optionalWith(Schema.NullOr(whole(0, 10_000, "keep must be a whole number between 0 and 10000")), { default: () => null })
})
export type BackupSettings = typeof BackupSettings.Type

// ---------------------------------------------------------------- require login

export const RequireLogin = Schema.Struct({ requireLogin: Schema.Boolean }).annotations(strict)
export type RequireLogin = typeof RequireLogin.Type

// ---------------------------------------------------------------- the document

const section = <A, I>(schema: Schema.Schema<A, I>) => Schema.optionalWith(schema, { default: () => Schema.decodeUnknownSync(schema)({}) })

/** Read-only facts a GET adds; PUT and PATCH accept them back and ignore them. */
export const SettingsInfo = Schema.Struct({
  /** Fields whose change needs a restart (none today: every field applies at once). */
  restartRequired: Schema.Array(Schema.String),
  /** Sections stored for a later feature that does not read them yet. */
  storedOnly: Schema.Array(Schema.String),
  /** The scheduled backups in effect, and whether settings or the environment chose them. */
  backups: Schema.Struct({ intervalHours: Schema.Number, keep: Schema.Number, source: Schema.Literal("settings", "env") })
})
export type SettingsInfo = typeof SettingsInfo.Type

export const SettingsDocument = strictStruct({
  proxy: section(ProxySettings),
  ipFilter: section(IpFilterSettings),
  thinkingBudget: section(ThinkingBudgetSettings),
  systemPrompt: section(SystemPromptSettings),
  compression: section(CompressionSettings),
  /** Whether the management plane needs a login; off lets only direct loopback callers in without one. */
  requireLogin: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  backups: section(BackupSettings),
  /** Shadow traffic for every request (docs/shadow.md); a combo's own `config.shadow` comes first. */
  shadow: Schema.optionalWith(ShadowTargets, { default: () => [] }),
  shadowOptions: section(ShadowOptions),
  /** The default bridge model per input modality (docs/bridge.md); a combo's own `bridge` comes first. */
  bridge: section(BridgeModels),
  info: Schema.optional(SettingsInfo)
})
export type SettingsDocument = Omit<typeof SettingsDocument.Type, "info">

/** Every section with its defaults. */
export const DEFAULT_SETTINGS: SettingsDocument = (({ info: _, ...doc }) => doc)(Schema.decodeUnknownSync(SettingsDocument)({}))

/** PATCH: any subset of the sections, each partial; objects merge, arrays and scalars replace. */
export const SettingsPatch = Schema.Struct({
  proxy: Schema.optional(Schema.partial(ProxySettings.pipe(Schema.typeSchema)).annotations(strict)),
  ipFilter: Schema.optional(Schema.partial(IpFilterSettings.pipe(Schema.typeSchema)).annotations(strict)),
  thinkingBudget: Schema.optional(Schema.partial(ThinkingBudgetSettings.pipe(Schema.typeSchema)).annotations(strict)),
  systemPrompt: Schema.optional(Schema.partial(SystemPromptSettings.pipe(Schema.typeSchema)).annotations(strict)),
  compression: Schema.optional(
    Schema.Struct({
      enabled: Schema.optional(Schema.Boolean),
      defaultCombo: Schema.optional(ProfileRef),
      activeProfile: Schema.optional(ProfileRef),
      compressByDefault: Schema.optional(Schema.Boolean),
      injectionMaxTokens: Schema.optional(Tokens("injectionMaxTokens")),
      autoTrigger: Schema.optional(Schema.partial(CompressionAutoTrigger.pipe(Schema.typeSchema)).annotations(strict))
    }).annotations(strict)
  ),
  requireLogin: Schema.optional(Schema.Boolean),
  backups: Schema.optional(Schema.partial(BackupSettings.pipe(Schema.typeSchema)).annotations(strict)),
  shadow: Schema.optional(ShadowTargets),
  shadowOptions: Schema.optional(Schema.partial(ShadowOptions.pipe(Schema.typeSchema)).annotations(strict)),
  bridge: Schema.optional(Schema.partial(BridgeModels.pipe(Schema.typeSchema)).annotations(strict)),
  info: Schema.optional(SettingsInfo)
}).annotations(strict)
export type SettingsPatch = typeof SettingsPatch.Type

/** What `GET /api/settings` answers: the document (proxy password masked) and its read-only `info`. */
export const SettingsView = Schema.Struct({
  proxy: Schema.typeSchema(ProxySettings),
  ipFilter: Schema.typeSchema(IpFilterSettings),
  thinkingBudget: Schema.typeSchema(ThinkingBudgetSettings),
  systemPrompt: Schema.typeSchema(SystemPromptSettings),
  compression: Schema.typeSchema(CompressionSettings),
  requireLogin: Schema.Boolean,
  backups: Schema.typeSchema(BackupSettings),
  shadow: ShadowTargets,
  shadowOptions: Schema.typeSchema(ShadowOptions),
  bridge: Schema.typeSchema(BridgeModels),
  info: SettingsInfo
})
export type SettingsView = typeof SettingsView.Type

// ---------------------------------------------------------------- purge

export const PurgeRequest = Schema.Struct({
  /** Only rows older than this many days; absent: all rows (still keeping open budget windows, see docs). */
  olderThanDays: Schema.optional(
    Schema.Number.pipe(
      Schema.finite(),
      Schema.between(0, 36_500, { message: () => "olderThanDays must be a number of days between 0 and 36500" })
    )
  )
}).annotations(strict)
export type PurgeRequest = typeof PurgeRequest.Type

export const PurgeResult = Schema.Struct({
  /** Usage rows (request history) deleted. */
  removed: Schema.Number,
  /** Rows from this time on were kept: the oldest open budget or token-limit window. */
  keptSince: Schema.String
})
export type PurgeResult = typeof PurgeResult.Type
