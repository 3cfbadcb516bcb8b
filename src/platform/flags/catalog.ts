/**
 * Every feature flag the gateway knows: the 34 of the specification plus 4 of the gateway's
 * own (marked below). The key is also the environment variable name.
 */
export type FlagCategory = "security" | "network" | "policies" | "runtime" | "cli" | "health"

export interface FlagDefinition {
  readonly key: string
  readonly label: string
  readonly description: string
  readonly category: FlagCategory
  readonly type: "boolean" | "enum"
  readonly enumValues: ReadonlyArray<string> | null
  readonly defaultValue: string
  readonly requiresRestart: boolean
  readonly warningLevel: "none" | "info" | "caution" | "danger"
}

const bool = <K extends string>(
  category: FlagCategory,
  key: K,
  defaultValue: boolean,
  label: string,
  description: string,
  extra: { requiresRestart?: boolean; warningLevel?: FlagDefinition["warningLevel"] } = {}
): FlagDefinition & { readonly key: K; readonly type: "boolean" } => ({
  key,
  label,
  description,
  category,
  type: "boolean",
  enumValues: null,
  defaultValue: String(defaultValue),
  requiresRestart: extra.requiresRestart ?? false,
  warningLevel: extra.warningLevel ?? "none"
})

const oneOf = <K extends string>(
  category: FlagCategory,
  key: K,
  values: ReadonlyArray<string>,
  defaultValue: string,
  label: string,
  description: string,
  extra: { warningLevel?: FlagDefinition["warningLevel"] } = {}
): FlagDefinition & { readonly key: K; readonly type: "enum" } => ({
  key,
  label,
  description,
  category,
  type: "enum",
  enumValues: values,
  defaultValue,
  requiresRestart: false,
  warningLevel: extra.warningLevel ?? "none"
})

export const FLAG_DEFINITIONS = [
  // security
  bool(
    "security",
    "REQUIRE_API_KEY",
    false,
    "Require API key",
    "Require a valid gateway API key on all inference requests. When off, any key value (or none) is accepted.",
    {
      warningLevel: "caution"
    }
  ),
  bool(
    "security",
    "INPUT_SANITIZER_ENABLED",
    true,
    "Input sanitizer",
    "Sanitize inbound request content (control characters, malformed unicode)."
  ),
  oneOf(
    "security",
    "INJECTION_GUARD_MODE",
    ["off", "warn", "block", "redact"],
    "off",
    "Prompt-injection guard",
    "What to do when a request looks like a prompt-injection attempt."
  ),
  bool("security", "PII_REDACTION_ENABLED", false, "PII redaction", "Redact personal data from requests before they leave the gateway."),
  bool("security", "PII_RESPONSE_SANITIZATION", false, "PII response sanitization", "Sanitize personal data in provider responses."),
  oneOf(
    "security",
    "PII_RESPONSE_SANITIZATION_MODE",
    ["redact", "warn", "block", "off"],
    "redact",
    "PII response sanitization mode",
    "How provider responses containing personal data are handled."
  ),
  bool(
    "security",
    "OUTBOUND_SSRF_GUARD_ENABLED",
    true,
    "Outbound SSRF guard",
    "Block outbound provider calls to private address ranges and cloud metadata endpoints.",
    {
      warningLevel: "caution"
    }
  ),
  // network
  bool("network", "ENABLE_TLS_FINGERPRINT", false, "TLS fingerprint stealth", "TLS fingerprint stealth mode for upstream connections.", {
    requiresRestart: true
  }),
  bool("network", "FREE_PROXY_ENABLED", true, "Free-proxy marketplace", "Allow request proxying through the free-proxy marketplace."),
  bool(
    "network",
    "PROXY_AUTO_SELECT_ENABLED",
    false,
    "Proxy auto-select",
    "Auto-select the first working registry proxy when a connection has none."
  ),
  bool(
    "network",
    "GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK",
    false,
    "Control-plane direct fallback",
    "Let OAuth and validation flows go direct when proxy pre-checks fail (may change the egress IP).",
    { warningLevel: "caution" }
  ),
  bool(
    "network",
    "MITM_DISABLE_TLS_VERIFY",
    false,
    "Disable MITM TLS verification",
    "Disables certificate verification of the MITM proxy. Dangerous.",
    {
      requiresRestart: true,
      warningLevel: "danger"
    }
  ),
  bool(
    "network",
    "GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS",
    false,
    "Allow private provider URLs",
    "Allow provider base URLs in private ranges beyond the local network (CGNAT, link-local, unique-local IPv6). Cloud-metadata addresses stay blocked.",
    { warningLevel: "caution" }
  ),
  bool(
    "network",
    "GATEWAY_ALLOW_LOCAL_PROVIDER_URLS",
    true,
    "Allow local provider URLs",
    "Allow loopback and LAN (RFC 1918) provider addresses, e.g. a local Ollama. Cloud-metadata addresses stay blocked."
  ),
  bool(
    "network",
    "ENABLE_CC_COMPATIBLE_PROVIDER",
    false,
    "CC-compatible provider",
    "Compatible-provider mode for one coding-client family.",
    { requiresRestart: true }
  ),
  // policies
  oneOf("policies", "TOOL_POLICY_MODE", ["disabled", "warn", "block"], "disabled", "Tool policy", "Enforcement of the tool-call policy."),
  bool("policies", "RATE_LIMIT_AUTO_ENABLE", false, "Auto-enable rate limiting", "Automatically enable rate limiting."),
  bool(
    "policies",
    "ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE",
    false,
    "Multiple connections per compatible node",
    "Allow several connections per OpenAI-compatible node.",
    {
      requiresRestart: true
    }
  ),
  // runtime
  bool("runtime", "GATEWAY_MCP_ENFORCE_SCOPES", true, "Enforce MCP scopes", "Enforce MCP tool scopes."),
  bool("runtime", "GATEWAY_MCP_COMPRESS_DESCRIPTIONS", false, "Compress MCP descriptions", "Compress MCP tool descriptions."),
  bool(
    "runtime",
    "GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS",
    false,
    "Runtime background tasks",
    "Run optional background tasks at run time."
  ),
  bool(
    "runtime",
    "GATEWAY_DISABLE_BACKGROUND_SERVICES",
    false,
    "Disable background services",
    "Disables quota refresh, sync and similar background services.",
    {
      requiresRestart: true
    }
  ),
  bool(
    "runtime",
    "GATEWAY_RTK_TRUST_PROJECT_FILTERS",
    false,
    "Trust project RTK filters",
    "Trust project-level RTK filters without validation.",
    { warningLevel: "caution" }
  ),
  bool(
    "runtime",
    "GATEWAY_ENABLE_LIVE_WS",
    true,
    "Live dashboard WebSocket",
    "Start the dashboard live WebSocket server (default port 20129).",
    { requiresRestart: true }
  ),
  bool(
    "runtime",
    "GATEWAY_UPSTREAM_WS_ENABLED",
    true,
    "Responses over WebSocket",
    "Allow the responses-over-WebSocket transport; when off, HTTP responses are used."
  ),
  bool(
    "runtime",
    "GATEWAY_EMERGENCY_FALLBACK",
    true,
    "Emergency fallback",
    "Budget-exhausted requests go to a free fallback provider and model instead of failing."
  ),
  bool("runtime", "MODEL_CATALOG_INCLUDE_NAMES", true, "Model display names", "Include display names in the model list."),
  bool("runtime", "LEADERBOARD_ELO_SYNC_ENABLED", true, "Leaderboard ELO sync", "Periodic leaderboard ELO sync for auto routing."),
  // cli
  bool("cli", "CLI_COMPAT_ALL", false, "CLI compatibility for all tools", "Enable compatibility shims for every CLI tool.", {
    requiresRestart: true
  }),
  bool(
    "cli",
    "MODEL_ALIAS_COMPAT_ENABLED",
    false,
    "Model alias compatibility",
    "Route the model ids coding agents send by default (Claude Code, Codex CLI, Gemini CLI) to a connected model of their family (docs/operations.md)."
  ),
  bool(
    "cli",
    "PRICING_SYNC_ENABLED",
    false,
    "Pricing sync",
    "Sync model pricing from a remote source; also needs the same-named environment variable."
  ),
  // health
  bool("health", "GATEWAY_DISABLE_LOCAL_HEALTHCHECK", false, "Disable local health check", "Skip health checks of local providers."),
  bool("health", "GATEWAY_DISABLE_TOKEN_HEALTHCHECK", false, "Disable token health check", "Skip periodic token validity checks."),
  bool(
    "health",
    "SKILLS_SANDBOX_NETWORK_ENABLED",
    false,
    "Skills sandbox network",
    "Network access inside the skills sandbox: a skill's script run by skills_run may fetch the hosts its manifest's allowed-hosts names. Off: no network.",
    { warningLevel: "caution" }
  ),
  // The gateway's own four (see docs/feature-flags.md).
  bool(
    "runtime",
    "GATEWAY_USAGE_LOGGING_ENABLED",
    true,
    "Usage logging",
    "Record a usage row (tokens, latency, status) for every inference request."
  ),
  bool(
    "security",
    "GATEWAY_TRUST_PROXY_HEADERS",
    false,
    "Trust proxy headers",
    "Trust X-Forwarded-For and X-Forwarded-Proto from a reverse proxy (client address, secure cookies). Turn on only behind a proxy you control.",
    { warningLevel: "caution" }
  ),
  bool(
    "runtime",
    "GATEWAY_SEMANTIC_CACHE_ENABLED",
    true,
    "Response cache",
    "Serve repeated deterministic requests from the response cache."
  ),
  bool(
    "runtime",
    "GATEWAY_IDEMPOTENCY_ENABLED",
    true,
    "Idempotency",
    "De-duplicate requests carrying Idempotency-Key or X-Request-Id within 5 seconds."
  ),
  bool(
    "runtime",
    "GATEWAY_COMMON_PATH",
    true,
    "Common path",
    "Serve the common request (a known plan, no hook, a healthy target) as plain code without a fiber; off sends every request through the full pipeline."
  )
] as const satisfies ReadonlyArray<FlagDefinition>

export type FlagKey = (typeof FLAG_DEFINITIONS)[number]["key"]
export type BooleanFlagKey = Extract<(typeof FLAG_DEFINITIONS)[number], { type: "boolean" }>["key"]

export const FLAGS_BY_KEY: ReadonlyMap<string, FlagDefinition> = new Map(FLAG_DEFINITIONS.map((d) => [d.key, d]))

/** A boolean flag is on when its value is `true`, `1` or `yes` (any case). */
export const isTruthy = (value: string): boolean => {
  const v = value.trim().toLowerCase()
  return v === "true" || v === "1" || v === "yes"
}

const BOOLEAN_INPUTS = new Set(["true", "false", "1", "0", "yes", "no"])

/** Checks a value for a flag; returns the value to store or a reason it is refused. */
export const validateFlagValue = (
  def: FlagDefinition,
  value: string
): { readonly ok: true; readonly value: string } | { readonly ok: false; readonly reason: string } => {
  const v = value.trim()
  if (def.type === "enum") {
    return def.enumValues?.includes(v)
      ? { ok: true, value: v }
      : { ok: false, reason: `invalid value '${value}' for ${def.key}: expected one of ${def.enumValues?.join(", ")}` }
  }
  return BOOLEAN_INPUTS.has(v.toLowerCase())
    ? { ok: true, value: v.toLowerCase() }
    : { ok: false, reason: `invalid value '${value}' for boolean flag ${def.key}: expected true, false, 1, 0, yes or no` }
}

/** Whether a flag's value counts as "active" in the summary. */
export const isActiveValue = (def: FlagDefinition, value: string): boolean =>
  def.type === "boolean" ? isTruthy(value) : !["off", "disabled"].includes(value)
