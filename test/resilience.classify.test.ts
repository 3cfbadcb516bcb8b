import { describe, expect, it } from "@effect/vitest"
import { banned, classify, contextTooLong, creditsExhausted, parseDuration, parseRetryAfter } from "../src/services/resilience/classify.js"
import type { Classification, FailureInfo } from "../src/services/resilience/types.js"

const NOW = Date.parse("2025-01-01T00:00:00Z")

const http = (status: number, message = "error", extra: Partial<FailureInfo> = {}): FailureInfo => ({
  status,
  kind: "http",
  message,
  ...extra
})

type Expected = Partial<Classification>

const CLIENT: Expected = { scope: "client", retryable: false, tripsBreaker: false, cooldown: false, quotaExhausted: false }
const MODEL: Expected = { scope: "model", retryable: true, tripsBreaker: false, cooldown: false, quotaExhausted: false }
/** Transient provider failures trip the breaker and cool the connection down (spec: any transient error). */
const TRIP: Expected = { scope: "provider", retryable: true, tripsBreaker: true, cooldown: true, quotaExhausted: false }
const PROVIDER_NO_TRIP: Expected = { scope: "provider", retryable: true, tripsBreaker: false, cooldown: true, quotaExhausted: false }
const TERMINAL: Expected = { scope: "connection", retryable: true, tripsBreaker: false, cooldown: false }
const RATE: Expected = { scope: "connection", retryable: true, tripsBreaker: false, cooldown: true }

const rows: ReadonlyArray<readonly [string, FailureInfo, Expected]> = [
  // client errors
  ["400 is a client error", http(400, "messages: field required"), { ...CLIENT, reason: "bad_request" }],
  ["413 is a client error", http(413, "request entity too large"), { ...CLIENT, reason: "payload_too_large" }],
  ["415 is a client error", http(415, "unsupported media type"), { ...CLIENT, reason: "unsupported_media_type" }],
  ["422 is a client error", http(422, "unprocessable"), { ...CLIENT, reason: "unprocessable_entity" }],
  ["another 4xx (409) is a client error", http(409, "conflict"), { ...CLIENT, reason: "client_error" }],
  [
    "a 400 mentioning a rate limit stays a client error",
    http(400, "rate limit in request body is invalid"),
    { ...CLIENT, reason: "bad_request" }
  ],
  // context too long
  [
    "400 context_length_exceeded code is model-scoped",
    http(400, "too long", { code: "context_length_exceeded" }),
    { ...MODEL, reason: "context_too_long" }
  ],
  [
    "400 'maximum context length' is model-scoped",
    http(400, "This model's maximum context length is 8192 tokens"),
    { ...MODEL, reason: "context_too_long" }
  ],
  [
    "400 'prompt is too long' is model-scoped",
    http(400, "prompt is too long: 210000 tokens > 200000 maximum"),
    { ...MODEL, reason: "context_too_long" }
  ],
  ["413 'too many tokens' is model-scoped", http(413, "Too many tokens"), { ...MODEL, reason: "context_too_long" }],
  [
    "400 'input is too long' in the body is model-scoped",
    http(400, "bad request", { body: '{"message":"Input is too long for requested model."}' }),
    { ...MODEL, reason: "context_too_long" }
  ],
  [
    "400 Gemini 'exceeds the maximum number of tokens' is model-scoped",
    http(400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."),
    { ...MODEL, reason: "context_too_long" }
  ],
  // model not served or not supported by this upstream: the next target
  [
    "400 model_not_found code is model-scoped",
    http(400, "no such model", { code: "model_not_found" }),
    { ...MODEL, reason: "model_unsupported" }
  ],
  [
    "400 'The model ... does not exist' is model-scoped",
    http(400, "The model `gpt-9` does not exist or you do not have access to it."),
    { ...MODEL, reason: "model_unsupported" }
  ],
  [
    "400 'model is not supported' is model-scoped",
    http(400, "The requested model is not supported."),
    { ...MODEL, reason: "model_unsupported" }
  ],
  ["400 Mistral 'Invalid model' is model-scoped", http(400, "Invalid model: mistral-huge"), { ...MODEL, reason: "model_unsupported" }],
  [
    "400 Groq model_decommissioned is model-scoped",
    http(400, "The model has been decommissioned", { code: "model_decommissioned" }),
    { ...MODEL, reason: "model_unsupported" }
  ],
  [
    "400 Ollama 'does not support tools' is model-scoped",
    http(400, "registry.ollama.ai/library/gemma:2b does not support tools"),
    { ...MODEL, reason: "model_unsupported" }
  ],
  // unsupported parameter or value: the next target
  [
    "400 unsupported_parameter code is model-scoped",
    http(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", {
      code: "unsupported_parameter"
    }),
    { ...MODEL, reason: "unsupported_parameter" }
  ],
  [
    "400 unsupported_value code is model-scoped",
    http(400, "Unsupported value: 'temperature' does not support 0.2 with this model.", { code: "unsupported_value" }),
    { ...MODEL, reason: "unsupported_parameter" }
  ],
  [
    "400 'unknown parameter' is model-scoped",
    http(400, "Unknown parameter: 'reasoning_effort'."),
    { ...MODEL, reason: "unsupported_parameter" }
  ],
  [
    "422 'Extra inputs are not permitted' is model-scoped",
    http(422, "bad request", { body: '{"detail":[{"type":"extra_forbidden","msg":"Extra inputs are not permitted"}]}' }),
    { ...MODEL, reason: "unsupported_parameter" }
  ],
  // other 400s stay the client's
  [
    "400 invalid message role is the client's fault",
    http(400, "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."),
    { ...CLIENT, reason: "bad_request" }
  ],
  [
    "400 missing required field is the client's fault",
    http(400, "Missing required parameter: 'messages'."),
    { ...CLIENT, reason: "bad_request" }
  ],
  // 401
  [
    "401 is an expired credential (terminal)",
    http(401, "invalid x-api-key"),
    { ...TERMINAL, terminal: "expired", quotaExhausted: false, reason: "auth" }
  ],
  // credits
  [
    "402 is credits exhausted (terminal)",
    http(402, "payment required"),
    { ...TERMINAL, terminal: "credits_exhausted", quotaExhausted: true, reason: "credits_exhausted" }
  ],
  [
    "429 insufficient_quota is credits exhausted, not a cooldown",
    http(429, "You exceeded your current quota, please check your plan and billing details.", { code: "insufficient_quota" }),
    { ...TERMINAL, terminal: "credits_exhausted", quotaExhausted: true, reason: "credits_exhausted" }
  ],
  [
    "400 'credit balance is too low' is credits exhausted",
    http(400, "Your credit balance is too low to access the Anthropic API."),
    { ...TERMINAL, terminal: "credits_exhausted", quotaExhausted: true, reason: "credits_exhausted" }
  ],
  [
    "403 'out of credits' is credits exhausted",
    http(403, "You are out of credits"),
    { ...TERMINAL, terminal: "credits_exhausted", quotaExhausted: true, reason: "credits_exhausted" }
  ],
  // 403
  [
    "403 with ban wording is banned (terminal)",
    http(403, "Your account has been suspended"),
    { ...TERMINAL, terminal: "banned", quotaExhausted: false, reason: "banned" }
  ],
  [
    "403 'account has been disabled' is banned",
    http(403, "forbidden", { body: '{"error":"This account has been disabled"}' }),
    { ...TERMINAL, terminal: "banned", reason: "banned" }
  ],
  [
    "403 about a policy violation is not a ban (a request's content, not the account)",
    http(403, "blocked by content safety (policy violation)"),
    { ...MODEL, reason: "forbidden" }
  ],
  [
    "404 echoing a model name with account words is never terminal",
    http(404, "The model `billing-exceeded-your-current-quota` does not exist"),
    { ...MODEL, reason: "not_found" }
  ],
  [
    "400 echoing a client field named billing is not credits exhausted (an unknown argument: the next target)",
    http(400, "Unrecognized request argument supplied: billing_tag"),
    { ...MODEL, reason: "unsupported_parameter" }
  ],
  [
    "400 with a client's invalid billing value is the client's fault",
    http(400, "Invalid value for 'billing_tag': expected a string"),
    { ...CLIENT, reason: "bad_request" }
  ],
  [
    "Anthropic's 400 'credit balance is too low' is credits exhausted",
    http(400, "Your credit balance is too low to access the Anthropic API."),
    { ...TERMINAL, terminal: "credits_exhausted", quotaExhausted: true, reason: "credits_exhausted" }
  ],
  [
    "401 with ban wording (deactivated) is banned",
    http(401, "This key is associated with a deactivated account"),
    { ...TERMINAL, terminal: "banned", reason: "banned" }
  ],
  [
    "403 without ban wording is model-scoped (no access)",
    http(403, "You do not have access to this model"),
    { ...MODEL, reason: "forbidden" }
  ],
  // 404
  ["404 is model-scoped", http(404, "model not found"), { ...MODEL, reason: "not_found" }],
  // 408
  ["408 trips the breaker", http(408, "request timeout"), { ...TRIP, reason: "timeout" }],
  // 429
  [
    "429 is a connection rate limit that cools down",
    http(429, "Rate limit reached for requests"),
    { ...RATE, quotaExhausted: false, reason: "rate_limited" }
  ],
  [
    "429 'quota exceeded' without a short wait is quota exhausted",
    http(429, "Quota exceeded for this project"),
    { ...RATE, quotaExhausted: true, reason: "quota_exhausted" }
  ],
  [
    "429 'daily limit' is quota exhausted",
    http(429, "You have reached your daily limit"),
    { ...RATE, quotaExhausted: true, reason: "quota_exhausted" }
  ],
  [
    "429 'usage limit' is quota exhausted",
    http(429, "Claude usage limit reached"),
    { ...RATE, quotaExhausted: true, reason: "quota_exhausted" }
  ],
  [
    "429 'resets at midnight' is quota exhausted",
    http(429, "limit hit, resets at midnight UTC"),
    { ...RATE, quotaExhausted: true, reason: "quota_exhausted" }
  ],
  [
    "429 RESOURCE_EXHAUSTED with a QuotaFailure is quota exhausted",
    http(429, "Resource has been exhausted", {
      body: '{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"}]}}'
    }),
    { ...RATE, quotaExhausted: true, reason: "quota_exhausted" }
  ],
  [
    "429 per-minute quota with a short retryDelay is a rate limit",
    http(429, "Quota exceeded for metric: generate_content_free_tier_requests", {
      body: '{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}'
    }),
    { ...RATE, quotaExhausted: false, reason: "rate_limited", retryAfterMs: 34_000 }
  ],
  [
    "429 with Retry-After above 60 s is quota exhausted",
    http(429, "slow down", { headers: { "retry-after": "3600" } }),
    { ...RATE, quotaExhausted: true, reason: "quota_exhausted", retryAfterMs: 3_600_000 }
  ],
  [
    "429 with Retry-After of 60 s is a rate limit",
    http(429, "slow down", { headers: { "retry-after": "60" } }),
    { ...RATE, quotaExhausted: false, reason: "rate_limited", retryAfterMs: 60_000 }
  ],
  // 5xx
  ["500 trips the breaker", http(500), { ...TRIP, reason: "server_error" }],
  ["502 trips the breaker", http(502), { ...TRIP, reason: "server_error" }],
  ["503 trips the breaker (overloaded)", http(503), { ...TRIP, reason: "overloaded" }],
  ["504 trips the breaker", http(504), { ...TRIP, reason: "server_error" }],
  ["529 is an overloaded provider that does not trip", http(529), { ...PROVIDER_NO_TRIP, reason: "overloaded" }],
  ["another 5xx (501) does not trip", http(501), { ...PROVIDER_NO_TRIP, reason: "server_error" }],
  ["a 500 mentioning billing stays a server error", http(500, "billing service unavailable"), { ...TRIP, reason: "server_error" }],
  // transport
  ["a timeout before headers trips the breaker", { status: 504, kind: "timeout", message: "no response" }, { ...TRIP, reason: "timeout" }],
  ["a stalled stream trips the breaker", { status: 504, kind: "stalled", message: "stalled" }, { ...TRIP, reason: "stalled" }],
  [
    "an unreachable upstream trips the breaker",
    { status: 502, kind: "unreachable", message: "ECONNREFUSED" },
    { ...TRIP, reason: "unreachable" }
  ],
  ["a cut stream trips the breaker", { status: 502, kind: "cut", message: "socket hang up" }, { ...TRIP, reason: "stream_cut" }]
]

describe("classify", () => {
  for (const [name, failure, expected] of rows) {
    it(name, () => {
      const c = classify(failure, NOW)
      expect(c).toMatchObject(expected)
      if (expected.terminal === undefined) expect(c.terminal).toBeUndefined()
      if (!("retryAfterMs" in expected)) expect(c.retryAfterMs).toBeUndefined()
    })
  }

  it("sets retryAfterMs on any status when the upstream gave a wait", () => {
    expect(classify(http(503, "busy", { headers: { "retry-after": "5" } }), NOW).retryAfterMs).toBe(5000)
    expect(classify(http(429, "Please try again in 1.5s"), NOW).retryAfterMs).toBe(1500)
  })

  it("exposes the text predicates", () => {
    expect(banned("Your account has been BANNED")).toBe(true)
    expect(banned("request blocked: policy violation")).toBe(false)
    expect(banned("model not available")).toBe(false)
    expect(creditsExhausted("insufficient_quota")).toBe(true)
    expect(creditsExhausted("rate limited")).toBe(false)
    expect(contextTooLong("context_length_exceeded")).toBe(true)
  })
})

describe("parseRetryAfter", () => {
  const cases: ReadonlyArray<readonly [string, Record<string, string> | undefined, string | undefined, number | undefined]> = [
    ["retry-after seconds", { "retry-after": "30" }, undefined, 30_000],
    ["retry-after fractional seconds, rounded up to ms", { "retry-after": "1.2345" }, undefined, 1235],
    ["retry-after HTTP date", { "retry-after": "Wed, 01 Jan 2025 00:01:30 GMT" }, undefined, 90_000],
    ["retry-after HTTP date in the past is 0, never negative", { "retry-after": "Tue, 31 Dec 2024 23:59:00 GMT" }, undefined, 0],
    ["retry-after-ms", { "retry-after-ms": "1500.2" }, undefined, 1501],
    ["retry-after-ms wins over retry-after", { "retry-after-ms": "250", "retry-after": "30" }, undefined, 250],
    ["retry-after wins over OpenAI reset headers", { "retry-after": "2", "x-ratelimit-reset-requests": "1m" }, undefined, 2000],
    ["OpenAI duration 1s", { "x-ratelimit-reset-requests": "1s" }, undefined, 1000],
    ["OpenAI duration 6m0s", { "x-ratelimit-reset-tokens": "6m0s" }, undefined, 360_000],
    ["OpenAI duration 20ms", { "x-ratelimit-reset-requests": "20ms" }, undefined, 20],
    ["OpenAI duration 1h2m3.5s", { "x-ratelimit-reset-requests": "1h2m3.5s" }, undefined, 3_723_500],
    ["OpenAI reset headers: the larger", { "x-ratelimit-reset-requests": "2s", "x-ratelimit-reset-tokens": "6m0s" }, undefined, 360_000],
    ["x-ratelimit-reset epoch seconds", { "x-ratelimit-reset": String(NOW / 1000 + 45) }, undefined, 45_000],
    ["x-ratelimit-reset delta seconds", { "x-ratelimit-reset": "12" }, undefined, 12_000],
    [
      "Anthropic RFC 3339 resets: the latest",
      {
        "anthropic-ratelimit-requests-reset": "2025-01-01T00:00:10Z",
        "anthropic-ratelimit-tokens-reset": "2025-01-01T00:00:20Z",
        "anthropic-ratelimit-input-tokens-reset": "2025-01-01T00:00:40Z",
        "anthropic-ratelimit-output-tokens-reset": "2025-01-01T00:00:05Z"
      },
      undefined,
      40_000
    ],
    ["headers win over the body", { "retry-after": "3" }, "Please try again in 20s", 3000],
    ["Gemini retryDelay", undefined, '{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay": "30s"}]}', 30_000],
    ["Gemini fractional retryDelay", undefined, '{"retryDelay":"1.5s"}', 1500],
    ["body 'try again in 20s'", undefined, "Rate limit reached. Please try again in 20s.", 20_000],
    ["body 'in 1m30s'", undefined, "Please try again in 1m30s", 90_000],
    ["body 'in 500ms'", undefined, "try again in 500ms", 500],
    ["body 'retry after 12 seconds'", undefined, "Too many requests, retry after 12 seconds", 12_000],
    ["body 'Please retry in 34.2s'", undefined, "Quota exceeded. Please retry in 34.2s.", 34_200],
    ["body 'resets at <ISO>'", undefined, "Usage limit reached; resets at 2025-01-01T02:00:00Z", 7_200_000],
    ["body 'reset at <ISO>' with offset", undefined, "limit will reset at 2025-01-01T01:00:00+01:00", 0],
    ["nothing given", { "content-type": "application/json" }, "rate limited", undefined],
    ["no headers, no body", undefined, undefined, undefined]
  ]
  for (const [name, headers, body, expected] of cases) {
    it(name, () => {
      expect(parseRetryAfter(headers, body, NOW)).toBe(expected)
    })
  }

  it("parses duration strings", () => {
    expect(parseDuration("1h2m3.5s")).toBe(3_723_500)
    expect(parseDuration("20ms")).toBe(20)
    expect(parseDuration("7")).toBe(7000)
    expect(parseDuration("soon")).toBeUndefined()
  })
})
