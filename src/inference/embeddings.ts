import * as Effect from "effect/Effect"
import type { FormatId } from "../formats/canonical.js"
import { arr, num, obj, tryJson } from "../formats/common.js"
import type { WireFormat } from "../formats/format.js"
import { readUpstreamBody } from "../upstream/UpstreamHttp.js"
import { clientError, type InferenceError } from "./errors.js"
import type { RequestContext } from "./io.js"
import type { InferenceShape } from "./pipeline.js"
import { FORMATS } from "../formats/registry.js"
import { countTextTokens } from "../formats/tokens.js"
import type { UsageRecord } from "../usage/Usage.js"
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
  /** Writes the request's usage row (priced and settled by the accounting layer); answers its cost. */
  record: (r: UsageRecord) => Effect.Effect<number>,
  ctx: RequestContext,
  client: WireFormat,
  model: string,
  inputs: ReadonlyArray<string>,
  dimensions?: number
): Effect.Effect<EmbeddingResult, InferenceError> =>
  Effect.gen(function* () {
    const target = yield* inference.resolve(model, client)
    const format = target.connection.format
    if (format === "anthropic") {
      return yield* clientError(client, { status: 400, kind: "invalid_request", message: `${target.connection.name} (${target.connection.provider.id}) offers no embeddings`, code: "embeddings_not_supported" })
    }
    const res = yield* inference.send(target, format, requestBody(format, target.model, inputs, dimensions), { stream: false, op: "embed" }, client)
    if (res.status < 200 || res.status >= 300) return yield* Effect.flatMap(inference.failure(res, FORMATS[format], client), Effect.fail)
    const text = (yield* readUpstreamBody(res.body).pipe(Effect.orElseSucceed(() => Buffer.alloc(0)))).toString("utf8")
    const { vectors, tokens: reported } = vectorsOf(format, tryJson(text))
    if (vectors.length !== inputs.length) {
      return yield* clientError(client, { status: 502, kind: "upstream", message: `upstream returned ${vectors.length} embeddings for ${inputs.length} inputs` })
    }
    // Gemini reports no token count: the gateway counts the inputs itself (o200k estimate).
    const tokens = reported ?? (yield* Effect.promise(() => countTextTokens(inputs)))
    const costUsd = yield* record({
      requestId: ctx.requestId,
      apiKeyId: ctx.apiKeyId,
      connectionId: target.connection.id,
      provider: target.connection.provider.id,
      model: target.model,
      endpoint: "embeddings",
      stream: false,
      status: 200,
      usage: { input: tokens, output: 0, cached: null, reasoning: null },
      latencyMs: Date.now() - ctx.startedAt,
      ttftMs: null,
      error: null,
      requestedModel: model
    })
    ctx.responseHeaders["x-gateway-response-cost"] = formatCost(costUsd)
    ctx.responseHeaders["x-gateway-tokens-in"] = String(tokens)
    ctx.responseHeaders["x-gateway-tokens-out"] = "0"
    ctx.responseHeaders["x-gateway-model"] = target.model
    ctx.responseHeaders["x-gateway-provider"] = target.connection.provider.id
    ctx.responseHeaders["x-gateway-latency-ms"] = String(Date.now() - ctx.startedAt)
    ctx.responseHeaders["x-gateway-cache-hit"] = "false"
    return { vectors, inputTokens: tokens, model, costUsd }
  })

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
