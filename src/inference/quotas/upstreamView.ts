/**
 * The upstream's own view of a provider account: how each provider's account is read (the table in docs/files-batches.md, "Quota
 * checks and issue reports") and the probe that asks it.
 */
import * as Effect from "effect/Effect"
import { tryJson } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import type { InferenceError } from "../../kernel/errors.js"
import type { InferenceShape } from "../call.js"
import type { Connection } from "../../upstream/providers/Connections.js"
import { parseDuration } from "../../services/resilience/classify.js"
import type { CustomCall } from "../../upstream/client/executors.js"
import type { UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"

/** What the upstream said about the account. */
export interface UpstreamView {
  /** Where the figures came from: `openrouter.key`, `deepseek.balance`, `ratelimit-headers`, `anthropic-ratelimit-headers`, `key-check`,
   * `none`. */
  readonly source: string
  readonly ok: boolean
  readonly remaining: number | null
  /** What `remaining` counts: `usd` (OpenRouter credits), the balance's currency (DeepSeek), `requests`, `tokens`. */
  readonly unit: string | null
  readonly resetsAt: number | null
  readonly reason: string | null
  /** The upstream's HTTP status, when it answered. */
  readonly status: number | null
  readonly details: Record<string, unknown>
}

/** How long a probe may wait for the upstream's headers. */
const PROBE_HEADERS_MS = 10_000

const num = (v: unknown): number | null => {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN
  return Number.isFinite(n) ? n : null
}
const obj = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString())

const headerOf = (res: UpstreamResponse, name: string): string | undefined => {
  const v = res.headers[name]
  const s = Array.isArray(v) ? v[0] : v
  return typeof s === "string" && s.trim() !== "" ? s.trim() : undefined
}

/** The start of the next UTC day, ISO week (Monday) or month after `now`: when OpenRouter's `limit_reset` window rolls over. */
export const nextReset = (interval: string, now: number): number | null => {
  const d = new Date(now)
  const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())
  switch (interval) {
    case "daily":
      return midnight + 86_400_000
    case "weekly":
      return midnight + ((8 - (d.getUTCDay() || 7)) % 7 || 7) * 86_400_000
    case "monthly":
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)
    default:
      return null
  }
}

interface Window {
  readonly limit: number | null
  readonly remaining: number | null
  readonly resetsAt: number | null
}

/**
 * The rate-limit windows an answer reported. OpenAI-style: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`
 * (resets are durations: `6m0s`, `20ms`); Anthropic:
 * `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`
 * (resets are RFC 3339 times).
 */
export const rateLimitWindows = (res: UpstreamResponse, now: number): Record<string, Window> => {
  const windows: Record<string, Window> = {}
  for (const name of ["requests", "tokens"]) {
    const limit = num(headerOf(res, `x-ratelimit-limit-${name}`))
    const remaining = num(headerOf(res, `x-ratelimit-remaining-${name}`))
    const reset = headerOf(res, `x-ratelimit-reset-${name}`)
    const ms = reset === undefined ? undefined : parseDuration(reset)
    if (limit !== null || remaining !== null) windows[name] = { limit, remaining, resetsAt: ms === undefined ? null : now + ms }
  }
  for (const name of ["requests", "tokens", "input-tokens", "output-tokens"]) {
    const limit = num(headerOf(res, `anthropic-ratelimit-${name}-limit`))
    const remaining = num(headerOf(res, `anthropic-ratelimit-${name}-remaining`))
    const reset = headerOf(res, `anthropic-ratelimit-${name}-reset`)
    const at = reset === undefined ? NaN : Date.parse(reset)
    if (limit !== null || remaining !== null) windows[name] = { limit, remaining, resetsAt: Number.isFinite(at) ? at : null }
  }
  return windows
}

/** An upstream view from rate-limit windows: refused while a window has nothing left, until its reset. */
const fromWindows = (source: string, status: number, windows: Record<string, Window>): UpstreamView => {
  const entries = Object.entries(windows)
  const spent = entries.filter(([, w]) => w.remaining !== null && w.remaining <= 0)
  const primary = windows["requests"] ?? entries[0]?.[1]
  const resets = (spent.length > 0 ? spent : entries).map(([, w]) => w.resetsAt).filter((r): r is number => r !== null)
  return {
    source: entries.length > 0 ? source : "key-check",
    ok: spent.length === 0,
    remaining: primary?.remaining ?? null,
    unit: primary ? (windows["requests"] ? "requests" : entries[0]![0]) : null,
    resetsAt: resets.length === 0 ? null : spent.length > 0 ? Math.max(...resets) : Math.min(...resets),
    reason: spent.length > 0 ? `upstream rate limit reached (${spent.map(([n]) => n).join(", ")})` : null,
    status,
    details: { rateLimits: Object.fromEntries(entries.map(([n, w]) => [n, { ...w, resetsAt: iso(w.resetsAt) }])) }
  }
}

/** How a provider's account is read: the call to make and how to read a 2xx answer. */
interface Reader {
  readonly source: string
  readonly call: (connection: Connection, model: string) => CustomCall
  readonly read: (res: UpstreamResponse, json: unknown, now: number) => UpstreamView
  /** A second call when the first answered 404 (an older path). */
  readonly fallback?: CustomCall
}

const openRouterKey = (res: UpstreamResponse, json: unknown, now: number): UpstreamView => {
  const data = obj(obj(json)?.["data"]) ?? {}
  const limit = num(data["limit"])
  const remaining = num(data["limit_remaining"]) ?? (limit === null ? null : Math.max(0, limit - (num(data["usage"]) ?? 0)))
  const interval = typeof data["limit_reset"] === "string" ? data["limit_reset"] : null
  const ok = remaining === null || remaining > 0
  return {
    source: "openrouter.key",
    ok,
    remaining,
    unit: "usd",
    resetsAt: interval ? nextReset(interval, now) : null,
    reason: ok ? null : "the OpenRouter key's credit limit is used up",
    status: res.status,
    details: {
      limit,
      usage: num(data["usage"]),
      limitRemaining: remaining,
      limitReset: interval,
      isFreeTier: data["is_free_tier"] ?? null,
      rateLimit: obj(data["rate_limit"]) ?? null
    }
  }
}

const deepSeekBalance = (res: UpstreamResponse, json: unknown): UpstreamView => {
  const body = obj(json) ?? {}
  const infos = (Array.isArray(body["balance_infos"]) ? body["balance_infos"] : [])
    .map(obj)
    .filter((b): b is Record<string, unknown> => b !== undefined)
  const main = infos.find((b) => b["currency"] === "USD") ?? infos[0]
  const available = body["is_available"] === true
  return {
    source: "deepseek.balance",
    ok: available,
    remaining: main ? num(main["total_balance"]) : null,
    unit: main && typeof main["currency"] === "string" ? main["currency"] : null,
    resetsAt: null,
    reason: available ? null : "the DeepSeek account has no balance available for API calls",
    status: res.status,
    details: {
      isAvailable: available,
      balances: infos.map((b) => ({
        currency: b["currency"] ?? null,
        total: num(b["total_balance"]),
        granted: num(b["granted_balance"]),
        toppedUp: num(b["topped_up_balance"])
      }))
    }
  }
}

/** The model a probe names (Anthropic's count_tokens needs one): the query's, the connection's, the catalog's first chat model. */
export const probeModel = (connection: Connection, model: string | undefined): string =>
  model ??
  connection.defaultModel ??
  connection.models[0] ??
  connection.provider.models.find((m) => m.kind === "chat")?.id ??
  "claude-3-5-haiku-latest"

/** Which reader serves a connection; undefined when the provider has no endpoint the gateway can read. */
export const readerFor = (connection: Connection): Reader | undefined => {
  const provider = connection.provider
  if (provider.id === "openrouter")
    return {
      source: "openrouter.key",
      call: () => ({ path: "/key", method: "GET" }),
      read: openRouterKey,
      fallback: { path: "/auth/key", method: "GET" }
    }
  if (provider.id === "deepseek") {
    return {
      source: "deepseek.balance",
      // The balance lives at the API's origin, beside (not under) the OpenAI-compatible /v1.
      call: (c) => ({
        path: "",
        method: "GET",
        url: `${(c.effectiveBaseUrl ?? "").replace(/\/+$/, "").replace(/\/v1$/, "")}/user/balance`
      }),
      read: deepSeekBalance
    }
  }
  const offersChat = (provider.offers ?? ["chat"]).includes("chat")
  if (!offersChat) return undefined
  switch (connection.format) {
    case "anthropic":
      return {
        source: "anthropic-ratelimit-headers",
        call: (_c, model) => ({
          path: "/v1/messages/count_tokens",
          method: "POST",
          json: { model, messages: [{ role: "user", content: "ping" }] }
        }),
        read: (res, _json, now) => fromWindows("anthropic-ratelimit-headers", res.status, rateLimitWindows(res, now))
      }
    case "gemini":
      return {
        source: "key-check",
        call: () => ({ path: "/v1beta/models?pageSize=1", method: "GET" }),
        read: (res) => fromWindows("key-check", res.status, {})
      }
    case "ollama":
      return {
        source: "key-check",
        call: () => ({ path: "/api/tags", method: "GET" }),
        read: (res) => fromWindows("key-check", res.status, {})
      }
    default:
      return {
        source: "ratelimit-headers",
        call: () => ({ path: "/models", method: "GET" }),
        read: (res, _json, now) => fromWindows("ratelimit-headers", res.status, rateLimitWindows(res, now))
      }
  }
}

/** Asks the upstream: one call (and its fallback on a 404), read into a view; a refusal or an unreachable upstream is a view that says no.
 * */
export const askUpstream = (inference: InferenceShape, connection: Connection, model: string, now: number): Effect.Effect<UpstreamView> => {
  const reader = readerFor(connection)
  if (!reader) {
    return Effect.succeed({
      source: "none",
      ok: true,
      remaining: null,
      unit: null,
      resetsAt: null,
      reason: null,
      status: null,
      details: {
        note: `${connection.provider.id} has no balance, limit or model-list endpoint the gateway reads; only the gateway's own view applies`
      }
    })
  }
  // Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a probe of the connection's own
  // quota (balance, limits, model list), not a model call: there is no other candidate to ask, and
  // its answer must neither open nor close the connection's breaker.
  const send = (custom: CustomCall) =>
    inference.send(
      { connection, model },
      connection.format,
      {},
      { stream: false, readWhole: true, custom, headersTimeoutMs: PROBE_HEADERS_MS },
      openAiChat
    )
  const refused = (status: number | null, reason: string): UpstreamView => ({
    source: reader.source,
    ok: false,
    remaining: null,
    unit: null,
    resetsAt: null,
    reason,
    status,
    details: {}
  })
  return Effect.gen(function* () {
    let res = yield* send(reader.call(connection, model))
    if (res.status === 404 && reader.fallback) res = yield* send(reader.fallback)
    if (res.status < 200 || res.status >= 300) {
      // Read like any upstream error answer: scrubbed of the connection's key first.
      const { info } = yield* inference.readFailure(res, FORMATS[connection.format], openAiChat, connection)
      const what =
        res.status === 401 || res.status === 403
          ? "the upstream refused the key"
          : res.status === 429
            ? "the upstream is rate limiting this key"
            : "the upstream answered an error"
      const view = refused(res.status, `${what} (HTTP ${res.status}): ${info.message}`.slice(0, 500))
      // A 429 still carries its windows (and when they reset).
      if (res.status === 429) {
        const windows = fromWindows(reader.source, res.status, rateLimitWindows(res, now))
        return { ...view, resetsAt: windows.resetsAt, details: windows.details }
      }
      return view
    }
    const text = res.bytes?.toString("utf8") ?? ""
    return reader.read(res, tryJson(text), now)
  }).pipe(Effect.catchAll((e: InferenceError) => Effect.succeed(refused(null, e.message))))
}
