/**
 * The one place that decides what an upstream failure means: its scope (provider, connection,
 * model, client), whether another target may be tried, whether it trips the provider breaker,
 * cools the connection down or puts it in a terminal state, and how long the upstream asked to
 * wait. Pure functions, no Effect: the dispatcher passes the current time.
 */
import type { Classification, FailureInfo } from "./types.js"

// ---------------------------------------------------------------- text predicates

const CONTEXT_TOO_LONG =
  /context[_ ]length[_ ]exceeded|maximum context length|prompt is too long|too many tokens|input is too long|context window|exceeds? the (?:model'?s? )?context|exceeds? the maximum (?:number of )?tokens|string_above_max_length|reduce the length of the (?:messages|prompt)/i

/**
 * The upstream does not serve this model (unknown, removed, not enabled for the account) or
 * does not support it for this request: OpenAI `model_not_found`, vLLM/OpenAI "The model `x`
 * does not exist", Gemini "models/x is not found ... or is not supported", Groq
 * `model_decommissioned`, Mistral "Invalid model", "model ... is not supported"; also a capability
 * this model lacks ("does not support tools", "image input is not supported").
 */
const MODEL_UNSUPPORTED =
  /\bmodel_not_found\b|\bmodel_not_supported\b|\bmodel_decommissioned\b|\binvalid_model\b|\binvalid model\b|\bunknown model\b|\bmodels?\b[^\n]{0,120}?\b(?:does not exist|do not exist|not found|(?:is |are )?not supported|unsupported|decommissioned|(?:is )?not available|deprecated)|\b(?:does not exist|(?:is )?not supported|unsupported)\b[^\n]{0,60}?\b(?:by|for|with|on) (?:this|the) model\b|\bdoes not support (?:tools?|tool calls|function calling|images?|image input|vision|audio|streaming|system (?:messages?|prompts?)|thinking|reasoning)\b|\b(?:tools?|tool calling|function calling|images?|image input|vision|audio input) (?:is |are )?not supported\b/i

/**
 * This upstream (or this model on it) does not take a parameter or a value the request used:
 * OpenAI `unsupported_parameter` / `unsupported_value` ("Unsupported parameter: 'max_tokens' is
 * not supported with this model"), "Unrecognized request argument", "unknown parameter",
 * "unknown field", pydantic's "Extra inputs are not permitted" (vLLM, LiteLLM).
 */
const UNSUPPORTED_PARAMETER =
  /\bunsupported_(?:parameter|value)\b|unsupported (?:parameter|value|field|argument)|unrecogni[sz]ed (?:request )?(?:argument|parameter|field)|unknown (?:parameter|field|argument)|extra inputs are not permitted|(?:parameter|argument|field)\b[^\n]{0,80}?\b(?:is )?not supported/i

/**
 * Account wording only: phrases an upstream writes about the account, never words a client's
 * own input could put into an error message that echoes it (a model name, a parameter).
 */
const CREDITS_EXHAUSTED =
  /"(?:code|type)"\s*:\s*"insufficient_quota"|\binsufficient_quota\b|credit balance is too low|exceeded your current quota|billing[_ ]hard[_ ]limit[_ ]reached|you (?:have run|are) out of credits|insufficient (?:credits|account balance)/i

const BANNED =
  /\baccount[_ ]deactivated\b|associated with a deactivated account|(?:account|organization|api key) (?:has been|was|is) (?:banned|suspended|deactivated|disabled|terminated)|your account is not active/i

/** Wording that names a long reset (a day's quota): exhausted whatever wait is given. */
const LONG_QUOTA = /daily limit|daily quota|per[ _-]?day|resets? at midnight|until midnight|monthly (?:limit|quota)/i

/** Wording that a quota or usage limit is used up (exhausted unless a short wait is given). */
const QUOTA =
  /quota[ _-]?exceeded|exceeded (?:the |your )?(?:\w+ )?quota|quota (?:has been |is )?(?:used up|exhausted|reached)|usage limit/i

/** A wait longer than this says the quota is gone until a reset, not a short rate limit. */
export const SHORT_WAIT_MS = 60_000

/** The context or prompt is larger than this model accepts (another target may take it). */
export const contextTooLong = (text: string): boolean => CONTEXT_TOO_LONG.test(text)

/** The upstream does not serve or support this model (another target may). */
export const modelUnsupported = (text: string): boolean => MODEL_UNSUPPORTED.test(text)

/** The upstream does not take a parameter or value of the request (another target may). */
export const unsupportedParameter = (text: string): boolean => UNSUPPORTED_PARAMETER.test(text)

/** Credits or billing are exhausted: a terminal `credits_exhausted` state for the connection. */
export const creditsExhausted = (text: string): boolean => CREDITS_EXHAUSTED.test(text)

/** The account is banned, suspended or deactivated: a terminal `banned` state. */
export const banned = (text: string): boolean => BANNED.test(text)

/** Gemini's RESOURCE_EXHAUSTED with a QuotaFailure detail (or quota wording). */
const geminiQuotaFailure = (text: string): boolean => /resource[_ ]exhausted/i.test(text) && /quotafailure|quota/i.test(text)

/**
 * A 429 whose body says a quota is used up until a reset that is not short. Day-scale wording
 * always counts; generic quota wording counts unless the upstream gave a wait of at most 60 s
 * (a per-minute quota); any wait longer than 60 s counts.
 */
export const quotaExhausted = (text: string, retryAfterMs: number | undefined): boolean => {
  if (retryAfterMs !== undefined && retryAfterMs > SHORT_WAIT_MS) return true
  if (LONG_QUOTA.test(text)) return true
  const shortWait = retryAfterMs !== undefined && retryAfterMs <= SHORT_WAIT_MS
  return !shortWait && (QUOTA.test(text) || geminiQuotaFailure(text))
}

// ---------------------------------------------------------------- durations and waits

/** ms, rounded up, without float noise (34.2 s is 34200 ms, not 34201). */
const ceilMs = (ms: number): number => Math.max(0, Math.ceil(Math.round(ms * 1000) / 1000))

const UNIT_MS: Record<string, number> = {
  ms: 1,
  millisecond: 1,
  milliseconds: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hrs: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000
}

const DURATION_PART = "(\\d+(?:\\.\\d+)?)\\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)(?![a-z])"
const DURATION = `(?:${DURATION_PART}\\s*)+`

/**
 * Parses a duration: "1s", "6m0s", "20ms", "1h2m3.5s", "12 seconds", "1 minute 30 seconds";
 * a plain number is seconds. Undefined when the text is not a duration.
 */
export const parseDuration = (text: string): number | undefined => {
  const t = text.trim().toLowerCase()
  if (/^\d+(?:\.\d+)?$/.test(t)) return ceilMs(Number(t) * 1000)
  if (!new RegExp(`^${DURATION}$`).test(t)) return undefined
  let total = 0
  for (const m of t.matchAll(new RegExp(DURATION_PART, "g"))) total += Number(m[1]) * (UNIT_MS[m[2]!] ?? 0)
  return ceilMs(total)
}

const parseDate = (text: string): number | undefined => {
  const t = Date.parse(text.trim())
  return Number.isFinite(t) ? t : undefined
}

const untilMs = (at: number, now: number): number => ceilMs(Math.max(0, at - now))

const header = (headers: Readonly<Record<string, string>> | undefined, name: string): string | undefined => {
  const v = headers?.[name]
  return v === undefined || v.trim() === "" ? undefined : v.trim()
}

const maxDefined = (values: ReadonlyArray<number | undefined>): number | undefined => {
  const xs = values.filter((v): v is number => v !== undefined)
  return xs.length === 0 ? undefined : Math.max(...xs)
}

const ISO_DATE = "\\d{4}-\\d{2}-\\d{2}[T ]\\d{2}:\\d{2}(?::\\d{2}(?:\\.\\d+)?)?(?:Z|[+-]\\d{2}:?\\d{2})?"

/** Wait given by the body text (Gemini retryDelay, "try again in 20s", "resets at <ISO>"). */
const retryAfterFromBody = (body: string, now: number): number | undefined => {
  const gemini = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/i.exec(body)
  if (gemini) return ceilMs(Number(gemini[1]) * 1000)
  const phrase = new RegExp(`(?:try again|retry)\\s+(?:in|after)\\s+(${DURATION})`, "i").exec(body)
  if (phrase) {
    const ms = parseDuration(phrase[1]!)
    if (ms !== undefined) return ms
  }
  const reset = new RegExp(`resets?\\s+at\\s+(${ISO_DATE})`, "i").exec(body)
  if (reset) {
    const at = parseDate(reset[1]!)
    if (at !== undefined) return untilMs(at, now)
  }
  return undefined
}

/**
 * How long the upstream asked to wait, in whole ms (never negative), from the first source
 * that gives one: `retry-after-ms`; `retry-after` (seconds or an HTTP date);
 * `x-ratelimit-reset-requests`/`-tokens` (durations, the larger); `x-ratelimit-reset` (epoch
 * seconds above 1e9, else seconds); `anthropic-ratelimit-*-reset` (RFC 3339, the latest); then
 * the body (Gemini `retryDelay`, "try again in 20s", "retry after 12 seconds", "resets at <ISO>").
 */
export const parseRetryAfter = (
  headers: Readonly<Record<string, string>> | undefined,
  body: string | undefined,
  now: number
): number | undefined => {
  const ms = header(headers, "retry-after-ms")
  if (ms !== undefined && /^\d+(?:\.\d+)?$/.test(ms)) return ceilMs(Number(ms))

  const ra = header(headers, "retry-after")
  if (ra !== undefined) {
    if (/^\d+(?:\.\d+)?$/.test(ra)) return ceilMs(Number(ra) * 1000)
    const at = parseDate(ra)
    if (at !== undefined) return untilMs(at, now)
  }

  const openAi = maxDefined(
    ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"].map((name) => {
      const v = header(headers, name)
      return v === undefined ? undefined : parseDuration(v)
    })
  )
  if (openAi !== undefined) return openAi

  const reset = header(headers, "x-ratelimit-reset")
  if (reset !== undefined && /^\d+(?:\.\d+)?$/.test(reset)) {
    const n = Number(reset)
    if (n > 1e12) return untilMs(n, now) // epoch ms
    if (n > 1e9) return untilMs(n * 1000, now) // epoch seconds
    return ceilMs(n * 1000)
  }

  const anthropic = maxDefined(
    [
      "anthropic-ratelimit-requests-reset",
      "anthropic-ratelimit-tokens-reset",
      "anthropic-ratelimit-input-tokens-reset",
      "anthropic-ratelimit-output-tokens-reset"
    ].map((name) => {
      const v = header(headers, name)
      return v === undefined ? undefined : parseDate(v)
    })
  )
  if (anthropic !== undefined) return untilMs(anthropic, now)

  return body ? retryAfterFromBody(body, now) : undefined
}

// ---------------------------------------------------------------- the table

type Verdict = Omit<Classification, "retryAfterMs" | "quotaExhausted"> & { readonly quotaExhausted?: boolean }

const client = (reason: string): Verdict => ({ scope: "client", retryable: false, tripsBreaker: false, cooldown: false, reason })
const model = (reason: string): Verdict => ({ scope: "model", retryable: true, tripsBreaker: false, cooldown: false, reason })
/** A provider failure; a transient one (5xx, timeout, transport) also cools the connection down. */
const provider = (reason: string, tripsBreaker: boolean, cooldown = true): Verdict => ({
  scope: "provider",
  retryable: true,
  tripsBreaker,
  cooldown,
  reason
})
const terminal = (state: "banned" | "expired" | "credits_exhausted", reason: string): Verdict => ({
  scope: "connection",
  retryable: true,
  tripsBreaker: false,
  cooldown: false,
  terminal: state,
  quotaExhausted: state === "credits_exhausted",
  reason
})

const CLIENT_REASONS: Record<number, string> = {
  400: "bad_request",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "unprocessable_entity"
}

const TRANSPORT_REASONS = {
  timeout: "timeout",
  stalled: "stalled",
  unreachable: "unreachable",
  cut: "stream_cut",
  tls: "tls",
  malformed: "malformed"
} as const

const verdict = (f: FailureInfo, text: string, retryAfterMs: number | undefined): Verdict => {
  if (f.kind !== "http") return provider(TRANSPORT_REASONS[f.kind], true)
  const s = f.status
  // Credits: 402, or account wording on the statuses upstreams use for it (Anthropic 400,
  // OpenAI 429, some 403). Never from a 404: its message repeats the model name the client sent.
  if (s === 402 || ((s === 400 || s === 403 || s === 429) && creditsExhausted(text)))
    return terminal("credits_exhausted", "credits_exhausted")
  if ((s === 401 || s === 403) && banned(text)) return terminal("banned", "banned")
  switch (s) {
    case 401:
      return terminal("expired", "auth")
    case 403:
      return model("forbidden")
    case 404:
      return model("not_found")
    case 408:
      return provider("timeout", true)
    case 429: {
      const exhausted = quotaExhausted(text, retryAfterMs)
      return {
        scope: "connection",
        retryable: true,
        tripsBreaker: false,
        cooldown: true,
        quotaExhausted: exhausted,
        reason: exhausted ? "quota_exhausted" : "rate_limited"
      }
    }
    case 500:
    case 502:
    case 504:
      return provider("server_error", true)
    case 503:
      return provider("overloaded", true)
    case 529:
      return provider("overloaded", false)
  }
  // A 400 that says this target cannot take the request (another one may): the next target.
  // Any other 400 is the request's own fault and goes back to the client as it is.
  if ((s === 400 || s === 413) && contextTooLong(text)) return model("context_too_long")
  if ((s === 400 || s === 422) && unsupportedParameter(text)) return model("unsupported_parameter")
  if ((s === 400 || s === 422) && modelUnsupported(text)) return model("model_unsupported")
  if (s >= 400 && s < 500) return client(CLIENT_REASONS[s] ?? "client_error")
  if (s >= 500) return provider("server_error", false)
  // An error in a 2xx/3xx body: the upstream misbehaved; try elsewhere, nothing trips, no cooldown.
  return provider("upstream_error", false, false)
}

/**
 * Classifies one failed attempt. A 400 is never a rate limit and never a provider failure;
 * only 408, 500, 502, 503, 504 (and transport failures, which map to 502/504) trip a breaker;
 * every transient failure (429, 408, 5xx, transport) cools the connection down;
 * credits-exhausted wording (any 4xx) wins over everything else on the connection.
 */
export const classify = (f: FailureInfo, now: number): Classification => {
  const text = [f.code ?? "", f.message, f.body ?? ""].join("\n")
  const body = [f.body ?? "", f.message].filter((s) => s !== "").join("\n")
  const retryAfterMs = parseRetryAfter(f.headers, body, now)
  const v = verdict(f, text, retryAfterMs)
  return {
    ...v,
    quotaExhausted: v.quotaExhausted ?? false,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs })
  }
}
