import type { Dispatcher } from "undici"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { ProbeResult } from "../../domain/connections.js"
import { joinUrl, providerAuthHeaders } from "../client/auth.js"
import { readUpstreamBody, type UpstreamHttpShape } from "../client/UpstreamHttp.js"
import type { FormatId } from "../../domain/canonical.js"
import { scrubSecrets } from "../../kernel/redact.js"
import type { ProviderSpec } from "../../domain/catalog/catalog.js"

export interface ProbedModel {
  readonly id: string
  readonly name: string | null
}

export const PROBE_TIMEOUT = Duration.seconds(10)

const modelListPath = (format: FormatId): string => {
  switch (format) {
    case "anthropic":
      return "/v1/models"
    case "gemini":
      return "/v1beta/models"
    case "ollama":
      return "/api/tags"
    default:
      return "/models"
  }
}

const parseModels = (format: FormatId, body: unknown): ReadonlyArray<ProbedModel> => {
  const b = body as Record<string, unknown> | null
  const rows = (format === "gemini" || format === "ollama" ? b?.["models"] : b?.["data"]) as
    | ReadonlyArray<Record<string, unknown>>
    | undefined
  if (!Array.isArray(rows)) return []
  return rows.flatMap((m) => {
    const raw = (format === "ollama" ? (m["name"] ?? m["model"]) : format === "gemini" ? m["name"] : m["id"]) as unknown
    if (typeof raw !== "string") return []
    const id = format === "gemini" ? raw.replace(/^models\//, "") : raw
    const name = (m["display_name"] ?? m["displayName"] ?? m["name"]) as unknown
    return [{ id, name: typeof name === "string" && name !== raw ? name : null }]
  })
}

/** What an error answer said, scrubbed of the key that was sent (an upstream may echo it) and anything key-shaped. */
const errorText = (status: number, raw: string, apiKey: string | undefined): string => {
  const text = scrubSecrets(raw, apiKey ? [apiKey] : [])
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string } | string; message?: string }
    const message = typeof parsed.error === "string" ? parsed.error : (parsed.error?.message ?? parsed.message)
    if (message) return `HTTP ${status}: ${message}`
  } catch {
    // not JSON
  }
  return `HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ""}`
}

/**
 * Checks a provider endpoint and credentials by listing its models (the cheapest
 * authenticated call every family offers). Never fails: the result says what went wrong.
 */
export const probeProvider = (
  http: UpstreamHttpShape,
  provider: ProviderSpec,
  format: FormatId,
  baseUrl: string,
  apiKey: string | undefined,
  options: {
    /** Replaces the auth headers `providerAuthHeaders` would send (an OAuth grant's). */
    readonly authHeaders?: Readonly<Record<string, string>>
    /** Replaces PROBE_TIMEOUT (the local health check waits less). */
    readonly timeout?: Duration.Duration
    /** A proxy's dispatcher (src/upstream/egress/); unset: direct. */
    readonly dispatcher?: Dispatcher
  } = {}
): Effect.Effect<ProbeResult & { readonly models: ReadonlyArray<ProbedModel> }> => {
  const timeout = options.timeout ?? PROBE_TIMEOUT
  const started = Date.now()
  const elapsed = () => Date.now() - started
  // Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a probe tests one given
  // connection (its test, the health check, model discovery); its result is what it reports, and it
  // must not move the breaker the requests use (the health check reports to resilience itself).
  return http
    .request({
      url: joinUrl(baseUrl, modelListPath(format)),
      method: "GET",
      headers: {
        accept: "application/json",
        "user-agent": http.userAgent,
        ...(options.authHeaders ?? providerAuthHeaders(provider, format, apiKey))
      },
      headersTimeout: timeout,
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {})
    })
    .pipe(
      Effect.flatMap((res) =>
        readUpstreamBody(res.body, 16 * 1024 * 1024).pipe(
          Effect.map((buf) => buf.toString("utf8")),
          Effect.timeout(timeout),
          Effect.orElseSucceed(() => ""),
          Effect.map((text) => {
            if (res.status < 200 || res.status >= 300) {
              return {
                ok: false,
                status: res.status,
                latencyMs: elapsed(),
                modelCount: null,
                error: errorText(res.status, text, apiKey),
                models: []
              }
            }
            let models: ReadonlyArray<ProbedModel> = []
            try {
              models = parseModels(format, JSON.parse(text))
            } catch {
              return {
                ok: false,
                status: res.status,
                latencyMs: elapsed(),
                modelCount: null,
                error: "upstream answered with something other than JSON",
                models
              }
            }
            return { ok: true, status: res.status, latencyMs: elapsed(), modelCount: models.length, error: null, models }
          })
        )
      ),
      Effect.catchAll((e) =>
        Effect.succeed({ ok: false, status: null, latencyMs: elapsed(), modelCount: null, error: e.message, models: [] })
      )
    )
}
