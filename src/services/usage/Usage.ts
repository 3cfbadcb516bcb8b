import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"

export interface TokenUsage {
  readonly input: number | null
  readonly output: number | null
  readonly cached: number | null
  readonly reasoning: number | null
  /** Tokens written to the provider's prompt cache (Anthropic cache_creation), when reported. */
  readonly cacheWrite?: number | null
}

export const NO_USAGE: TokenUsage = { input: null, output: null, cached: null, reasoning: null }

export interface UsageRecord {
  readonly requestId: string
  readonly apiKeyId: string | null
  readonly connectionId: string | null
  readonly provider: string | null
  readonly model: string | null
  readonly endpoint: string
  readonly stream: boolean
  readonly status: number
  readonly usage: TokenUsage
  readonly latencyMs: number
  readonly ttftMs: number | null
  readonly error: string | null
  /** USD; null when not computed (unpriced requests record 0). */
  readonly costUsd?: number | null
  /** Failed attempts before the one that answered. */
  readonly fallbackAttempts?: number
  /** Answered from the response cache (no upstream call). */
  readonly cacheHit?: boolean
  /** The model id as the client asked for it (a combo, an auto id...). */
  readonly requestedModel?: string | null
}

export interface UsageShape {
  /** Queues one usage row (batched write); never blocks the request. */
  readonly record: (r: UsageRecord) => Effect.Effect<void>
  /** `record` without an effect: false (nothing queued) when usage logging's flag is not known fresh. */
  readonly recordNow: (r: UsageRecord) => boolean
}

/** Reads token counts from an OpenAI chat `usage` object. */
export const openAiUsage = (u: unknown): TokenUsage => {
  const usage = u as
    | {
        prompt_tokens?: number
        completion_tokens?: number
        prompt_tokens_details?: { cached_tokens?: number }
        completion_tokens_details?: { reasoning_tokens?: number }
      }
    | null
    | undefined
  if (!usage || typeof usage !== "object") return NO_USAGE
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null)
  return {
    input: n(usage.prompt_tokens),
    output: n(usage.completion_tokens),
    cached: n(usage.prompt_tokens_details?.cached_tokens),
    reasoning: n(usage.completion_tokens_details?.reasoning_tokens)
  }
}

/** Per-request usage rows, written through the batched writer. */
export class Usage extends Context.Tag("gateway/Usage")<Usage, UsageShape>() {
  static readonly layer = Layer.effect(
    Usage,
    Effect.gen(function* () {
      const writer = yield* BatchWriter
      const flags = yield* FeatureFlags
      const write = (r: UsageRecord, on: boolean) => {
        if (!on) return
        writer.append("usage", {
          ts: Date.now(),
          request_id: r.requestId,
          api_key_id: r.apiKeyId,
          connection_id: r.connectionId,
          provider: r.provider,
          model: r.model,
          endpoint: r.endpoint,
          stream: r.stream ? 1 : 0,
          status: r.status,
          tokens_in: r.usage.input,
          tokens_out: r.usage.output,
          tokens_cached: r.usage.cached,
          tokens_reasoning: r.usage.reasoning,
          latency_ms: r.latencyMs,
          ttft_ms: r.ttftMs,
          error: r.error,
          cost_usd: r.costUsd ?? null,
          fallback_attempts: r.fallbackAttempts ?? 0,
          cache_hit: r.cacheHit ? 1 : 0,
          requested_model: r.requestedModel ?? null,
          tokens_cache_write: r.usage.cacheWrite ?? null
        })
      }
      return {
        record: (r) => {
          // Every request writes a row: a fresh flag answers without a chain of effects.
          const on = flags.peekEnabled("GATEWAY_USAGE_LOGGING_ENABLED")
          return on === undefined
            ? Effect.map(flags.enabled("GATEWAY_USAGE_LOGGING_ENABLED"), (known) => write(r, known))
            : Effect.sync(() => write(r, on))
        },
        recordNow: (r) => {
          const on = flags.peekEnabled("GATEWAY_USAGE_LOGGING_ENABLED")
          if (on === undefined) return false
          write(r, on)
          return true
        }
      }
    })
  )
}
