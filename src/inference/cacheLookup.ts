/**
 * The response cache's lookup for one request: its key when it is cacheable (non-streamed,
 * deterministic), and a hit if there is one, exact or (with an embedding model) similar.
 */
import * as Effect from "effect/Effect"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { AccountingConfigShape } from "../services/accounting/AccountingConfig.js"
import { cacheable, cacheKey, cacheParams, promptText } from "../services/accounting/cacheKey.js"
import type { CacheHit, ResponseCacheShape } from "../services/accounting/ResponseCache.js"
import type { CanonicalRequest } from "../domain/canonical.js"
import type { FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import { embed } from "./embeddings.js"
import { requestHeader } from "./io.js"
import type { InferenceCall, InferenceShape } from "./call.js"

export interface Lookup {
  readonly key: string | undefined
  readonly hit: CacheHit | undefined
  readonly params?: string
  readonly embedding?: Float32Array
}

const NOT_CACHEABLE: Effect.Effect<Lookup> = Effect.succeed({ key: undefined, hit: undefined })

export const makeCacheLookup = (deps: {
  readonly flags: FeatureFlagsShape
  readonly cache: ResponseCacheShape
  readonly accounting: AccountingShape
  readonly accountingConfig: AccountingConfigShape
  /** The pipeline itself, for the prompt's embedding (similarity matching). */
  readonly inference: () => InferenceShape
}) => {
  const { flags, cache, accounting, accountingConfig } = deps

  /** Undefined when the cache is off. */
  const lookup = (call: InferenceCall): Effect.Effect<Lookup | undefined> => {
    const on = flags.peekEnabled("GATEWAY_SEMANTIC_CACHE_ENABLED")
    if (on === false) return Effect.succeed(undefined)
    if (on === undefined)
      return Effect.flatMap(flags.enabled("GATEWAY_SEMANTIC_CACHE_ENABLED"), (on) => (on ? lookupKnown(call) : Effect.succeed(undefined)))
    return lookupKnown(call)
  }

  /** The lookup with the cache on: most requests are not cacheable, and say so in one step. */
  const lookupKnown = (call: InferenceCall): Effect.Effect<Lookup> => {
    const { ctx, format: client } = call
    if (String(requestHeader(ctx, "x-gateway-no-cache") ?? "").toLowerCase() === "true") return NOT_CACHEABLE
    let canonical: CanonicalRequest
    try {
      canonical = (call.decode ?? client.decodeRequest)(call.body)
    } catch {
      return NOT_CACHEABLE
    }
    if (!cacheable(canonical)) return NOT_CACHEABLE
    return lookupCacheable(call, canonical)
  }

  /** The exact key's entry, then (with an embedding model set) a similar prompt's: made once (docs/performance.md). */
  const lookupCacheable = Effect.fnUntraced(function* (call: InferenceCall, canonical: CanonicalRequest) {
    const { ctx, format: client } = call
    // Body fields outside the canonical form shape the answer too; the conversation itself
    // is in the canonical part (and left out of `extra`, so similarity can compare prompts).
    const {
      stream: _s,
      stream_options: _so,
      user: _u,
      messages: _m,
      input: _i,
      contents: _c,
      prompt: _p,
      system: _sy,
      instructions: _in,
      ...rest
    } = call.body
    const input = {
      format: client.id,
      model: call.model,
      req: canonical,
      extra: { endpoint: call.endpoint, noThinking: call.noThinking === true, body: rest },
      similarityScope: ctx.apiKeyId ?? "anonymous"
    }
    const key = cacheKey(input)
    const exact = yield* cache.get(key)
    if (exact || !accountingConfig.cacheEmbeddingModel) return { key, hit: exact }
    // Similarity: the prompt's embedding, compared with cached answers of the same model and parameters.
    // A copy of the context: the embedding's own cost headers must not land on this answer.
    const vector = yield* embed(
      deps.inference(),
      accounting,
      { ...ctx, responseHeaders: {} },
      client,
      accountingConfig.cacheEmbeddingModel,
      [promptText(canonical)]
    ).pipe(
      Effect.map((r) => Float32Array.from(r.vectors[0] ?? [])),
      Effect.tapError((e) => Effect.logWarning(`cache embedding failed (${e.message}); exact match only`)),
      Effect.option
    )
    if (vector._tag === "None" || vector.value.length === 0) return { key, hit: undefined }
    const params = cacheParams(input)
    const similar = yield* cache.get(key, { format: client.id, model: call.model, params, embedding: vector.value })
    return { key, hit: similar, params, embedding: vector.value }
  })

  /**
   * What `lookup` would do with this request, without looking: `off` (nothing: a stream, or the
   * cache off), `miss` (on, the request not cacheable: only its `X-Gateway-Cache: MISS` header),
   * `look` (a cacheable request, looked up); undefined when the cache's flag is not known fresh.
   * The common path serves only requests the cache has nothing more to do with than the header.
   */
  const wanted = (call: InferenceCall): "off" | "miss" | "look" | undefined => {
    if (call.stream) return "off"
    const on = flags.peekEnabled("GATEWAY_SEMANTIC_CACHE_ENABLED")
    if (on !== true) return on === false ? "off" : undefined
    if (String(requestHeader(call.ctx, "x-gateway-no-cache") ?? "").toLowerCase() === "true") return "miss"
    try {
      return cacheable((call.decode ?? call.format.decodeRequest)(call.body)) ? "look" : "miss"
    } catch {
      return "miss"
    }
  }

  return { lookup, wanted }
}
