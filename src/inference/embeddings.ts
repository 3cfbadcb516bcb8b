import * as Effect from "effect/Effect"
import type { FormatId } from "../formats/canonical.js"
import { arr, num, obj, tryJson } from "../formats/common.js"
import type { WireFormat } from "../formats/format.js"
import { clientError, type InferenceError } from "./errors.js"
import type { RequestContext } from "./io.js"
import type { InferenceShape } from "./pipeline.js"
import { FORMATS } from "../formats/registry.js"
import { countTextTokens } from "../formats/tokens.js"
import type { AccountingShape } from "../accounting/Accounting.js"
import type { ResolvedTarget } from "../providers/Connections.js"
import { formatCost } from "../accounting/cost.js"

export interface EmbeddingResult {
  readonly costUsd?: number
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  readonly inputTokens: number
  readonly model: string
}

const requestBody = (format: FormatId, model: string, inputs: ReadonlyArray<string>, dimensions: number | undefined): Record<string, unknown> => {
  switch (format) {
    case "gemini":
      return {
        requests: inputs.map((text) => ({
          model: `models/${model}`,
          content: { parts: [{ text }] },
          ...(dimensions ? { outputDimensionality: dimensions } : {})
        }))
      }
    case "ollama":
      return { input: inputs, ...(dimensions ? { dimensions } : {}) }
    default:
      return { input: inputs, encoding_format: "float", ...(dimensions ? { dimensions } : {}) }
  }
}

const vectorsOf = (format: FormatId, body: unknown): { vectors: Array<Array<number>>; tokens: number | null } => {
  const b = obj(body) ?? {}
  if (format === "gemini") return { vectors: arr(b["embeddings"]).map((e) => arr(obj(e)?.["values"]) as Array<number>), tokens: null }
  if (format === "ollama") return { vectors: arr(b["embeddings"]) as Array<Array<number>>, tokens: num(b["prompt_eval_count"]) ?? null }
  const vectors = arr(b["data"])
    .map((d) => obj(d) ?? {})
    .sort((x, y) => (num(x["index"]) ?? 0) - (num(y["index"]) ?? 0))
    .map((d) => {
      const e = d["embedding"]
      if (typeof e === "string") {
        const buf = Buffer.from(e, "base64")
        return Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4))
      }
      return arr(e) as Array<number>
    })
  return { vectors, tokens: num(obj(b["usage"])?.["prompt_tokens"]) ?? null }
}

/**
 * Embeddings through any upstream family that has them (OpenAI-compatible `/embeddings`,
 * Gemini `:batchEmbedContents`, Ollama `/api/embed`), in canonical terms: texts in, vectors out.
 */
export const embed = (
  inference: InferenceShape,
  /** Budgets, token limits, pricing and the usage row of the request. */
  accounting: AccountingShape,
  ctx: RequestContext,
  client: WireFormat,
  model: string,
  inputs: ReadonlyArray<string>,
  dimensions?: number
): Effect.Effect<EmbeddingResult, InferenceError> => {
  inference.track(ctx, "embeddings")
  // Which connection was asked, for the usage row of a failure.
  let target: ResolvedTarget | undefined
  const row = (status: number, tokens: number | null, error: string | null) =>
    accounting.finish({
      requestId: ctx.requestId,
      apiKeyId: ctx.apiKeyId,
      connectionId: target?.connection.id ?? null,
      provider: target?.connection.provider.id ?? null,
      model: target?.model ?? model,
      endpoint: "embeddings",
      stream: false,
      status,
      usage: { input: tokens, output: tokens === null ? null : 0, cached: null, reasoning: null },
      latencyMs: Date.now() - ctx.startedAt,
      ttftMs: null,
      error,
      requestedModel: model
    })
  return Effect.gen(function* () {
    const budget = accounting.budget(ctx.apiKeyId)
    if (!budget.ok) {
      return yield* clientError(
        client,
        { status: 429, kind: "rate_limit", code: "budget_exhausted", message: `the ${budget.window} budget of this API key is spent ($${budget.spentUsd.toFixed(4)} of $${budget.limitUsd.toFixed(4)})` },
        { "retry-after": String(Math.max(1, Math.ceil(budget.retryAfterMs / 1000))) }
      )
    }
    const resolved = yield* inference.resolve(model, client)
    target = resolved
    const format = resolved.connection.format
    if (format === "anthropic") {
      return yield* clientError(client, { status: 400, kind: "invalid_request", message: `${resolved.connection.name} (${resolved.connection.provider.id}) offers no embeddings`, code: "embeddings_not_supported" })
    }
    const limit = accounting.tokenLimit(ctx.apiKeyId, { provider: resolved.connection.provider.id, model: resolved.model, requestedModel: model, connection: resolved.connection.name })
    if (!limit.ok) {
      return yield* clientError(
        client,
        { status: 429, kind: "rate_limit", code: "token_limit_exceeded", message: `token limit reached for this API key: ${limit.limit.maxTokens} tokens per ${limit.limit.window}` },
        { "retry-after": String(Math.max(1, Math.ceil(limit.retryAfterMs / 1000))) }
      )
    }
    // Read whole in the same wait, under the size limit and body idle timeout of every whole answer.
    const res = yield* inference.send(resolved, format, requestBody(format, resolved.model, inputs, dimensions), { stream: false, op: "embed", readWhole: true }, client)
    if (res.status < 200 || res.status >= 300) return yield* Effect.flatMap(inference.failure(res, FORMATS[format], client, resolved.connection), Effect.fail)
    const text = yield* Effect.mapError(inference.wholeText(res, client, resolved.connection), (f) => f.error)
    const { vectors, tokens: reported } = vectorsOf(format, tryJson(text))
    if (vectors.length !== inputs.length) {
      return yield* clientError(client, { status: 502, kind: "upstream", message: `upstream returned ${vectors.length} embeddings for ${inputs.length} inputs` })
    }
    // Gemini reports no token count: the gateway counts the inputs itself (o200k estimate).
    const tokens = reported ?? (yield* Effect.promise(() => countTextTokens(inputs)))
    const costUsd = yield* row(200, tokens, null)
    ctx.responseHeaders["x-gateway-response-cost"] = formatCost(costUsd)
    ctx.responseHeaders["x-gateway-tokens-in"] = String(tokens)
    ctx.responseHeaders["x-gateway-tokens-out"] = "0"
    ctx.responseHeaders["x-gateway-model"] = resolved.model
    ctx.responseHeaders["x-gateway-provider"] = resolved.connection.provider.id
    ctx.responseHeaders["x-gateway-latency-ms"] = String(Date.now() - ctx.startedAt)
    ctx.responseHeaders["x-gateway-cache-hit"] = "false"
    return { vectors, inputTokens: tokens, model, costUsd }
  }).pipe(
    // A failed request still leaves its row (and its request.failed event).
    Effect.tapError((e) => row(e.status, null, e.message)),
    Effect.onInterrupt(() => row(499, null, "client closed the request"))
  )
}

/** OpenAI's embeddings answer; base64 (little-endian float32) when the client asked for it. */
export const openAiEmbeddings = (r: EmbeddingResult, base64: boolean) => ({
  object: "list",
  data: r.vectors.map((v, index) => ({
    object: "embedding",
    index,
    embedding: base64 ? Buffer.from(new Float32Array(v).buffer).toString("base64") : v
  })),
  model: r.model,
  usage: { prompt_tokens: r.inputTokens, total_tokens: r.inputTokens }
})
