import * as Effect from "effect/Effect"
import type { FormatId } from "../domain/canonical.js"
import { arr, num, obj, tryJson } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { clientError, type InferenceError } from "../kernel/errors.js"
import type { HttpRequestContext } from "./io.js"
import type { InferenceShape } from "./call.js"
import { FORMATS } from "../upstream/formats/registry.js"
import { countTextTokens } from "../upstream/formats/tokens.js"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { Candidate } from "../services/routing/types.js"
import { type AttemptOutcome, attemptFailed, failureOfError, headerValue } from "../kernel/attempts.js"
import type { AttemptRequest, TryCandidate } from "./fallback.js"
import { runMedia } from "./media/run.js"
import { errorInAnswer } from "./sending.js"

export interface EmbeddingResult {
  readonly costUsd?: number
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  readonly inputTokens: number
  readonly model: string
}

const requestBody = (
  format: FormatId,
  model: string,
  inputs: ReadonlyArray<string>,
  dimensions: number | undefined
): Record<string, unknown> => {
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

/** What one embeddings request asks of each candidate. */
interface EmbedRequest extends AttemptRequest {
  /** Who sends the upstream request (the try is made once, not per request). */
  readonly inference: InferenceShape
  readonly inputs: ReadonlyArray<string>
  readonly dimensions: number | undefined
}

/** One candidate's vectors. */
interface Embedded extends AttemptOutcome {
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  readonly inputTokens: number
}

/** Anthropic has no embeddings: its connections are left out of the plan. */
const embeds = (c: Candidate): boolean => c.connection.format !== "anthropic"

/** One try of an embeddings request against one candidate (the guarded attempt's `attempt`). */
const tryEmbed: TryCandidate<EmbedRequest, Embedded> = Effect.fnUntraced(function* (request: EmbedRequest, c: Candidate) {
  const inference = request.inference
  const { connection } = c
  const client = request.format
  const format = connection.format
  // Read whole in the same wait, under the size limit and body idle timeout of every whole answer.
  const res = yield* inference
    .send(
      { connection, model: c.model },
      format,
      requestBody(format, c.model, request.inputs, request.dimensions),
      { stream: false, op: "embed", readWhole: true },
      client
    )
    .pipe(
      Effect.mapError((e) => attemptFailed(e, failureOfError(e), e.code === "provider_misconfigured" || e.code === "provider_url_blocked"))
    )
  if (res.status < 200 || res.status >= 300) {
    const { error, info } = yield* inference.readFailure(res, FORMATS[format], client, connection)
    return yield* Effect.fail(attemptFailed(error, info))
  }
  const text = yield* Effect.mapError(inference.wholeText(res, client, connection), (f) => attemptFailed(f.error, f.info))
  const json = tryJson(text)
  const bad = errorInAnswer(format, json, text, client, connection)
  if (bad) return yield* Effect.fail(attemptFailed(bad.error, bad.info))
  const { vectors, tokens: reported } = vectorsOf(format, json)
  if (vectors.length !== request.inputs.length) {
    // Not the answer its format promised (docs/resilience.md, kind `malformed`): another target may answer.
    const message = `${connection.name}: upstream returned ${vectors.length} embeddings for ${request.inputs.length} inputs`
    return yield* Effect.fail(
      attemptFailed(clientError(client, { status: 502, kind: "upstream", message, code: "upstream_malformed" }), {
        status: 502,
        kind: "malformed",
        message,
        code: "upstream_malformed"
      })
    )
  }
  // Gemini reports no token count: the gateway counts the inputs itself (o200k estimate).
  const inputTokens = reported ?? (yield* Effect.promise(() => countTextTokens(request.inputs)))
  return {
    status: 200,
    usage: { inputTokens, outputTokens: 0 },
    ttftMs: null,
    error: null,
    headers: headerValue(res.headers),
    vectors,
    inputTokens
  }
})

/**
 * Embeddings through any upstream family that has them, texts in and vectors out: one request of the media runner
 * (docs/internals.md, "Seam 1: one guarded attempt").
 */
export const embed = (
  inference: InferenceShape,
  /** Budgets, token limits, pricing and the usage row of the request. */
  accounting: AccountingShape,
  ctx: HttpRequestContext,
  client: WireFormat,
  model: string,
  inputs: ReadonlyArray<string>,
  dimensions?: number
): Effect.Effect<EmbeddingResult, InferenceError> =>
  Effect.map(
    runMedia(inference, accounting, {
      ctx,
      client,
      model,
      endpoint: "embeddings",
      what: "embeddings",
      able: embeds,
      unsupported: (first) => ({
        message: `${first.connection.name} (${first.connection.provider.id}) offers no embeddings`,
        code: "embeddings_not_supported"
      }),
      request: { ctx, format: client, model, passthrough: false, inputs, dimensions, inference },
      attempt: tryEmbed
    }),
    ({ outcome, costUsd }) => ({ vectors: outcome.vectors, inputTokens: outcome.inputTokens, model, costUsd })
  )

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
