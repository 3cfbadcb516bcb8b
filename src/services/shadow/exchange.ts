/**
 * One compared exchange, as shadow traffic and replay make it (docs/shadow.md, docs/replay.md): a
 * recorded request sent again to a candidate model through the gateway's own routes (routed,
 * translated, priced and counted like any request), its answer read back, compared with the
 * answer it is measured against, optionally judged, and stored as a pair (`Shadow.record`).
 */
import * as Effect from "effect/Effect"
import type { CanonicalResponse, FormatId } from "../../domain/canonical.js"
import type { OwnRoutesShape } from "../../kernel/internalCall.js"
import { checkAnswer, schemaEngines } from "../../kernel/schemaCheck.js"
import { StreamCollector } from "../../upstream/formats/collect.js"
import { type Frame, NdjsonParser, SseParser } from "../../upstream/formats/frames.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import { requestedSchema } from "../../upstream/formats/structured.js"
import { answerOf, canonicalJson, compare } from "./compare.js"
import type { ShadowPair } from "./Shadow.js"

/** The header a shadow or replay call carries: it is never shadowed itself. */
export const SHADOW_HEADER = "x-gateway-shadow"

/** A request as recorded: sent again with another model. */
export interface RecordedRequest {
  readonly requestId: string
  readonly scope: string
  readonly format: FormatId
  /** The route's path (Gemini's names the model). */
  readonly path: string
  /** The request's query string, without `?`. */
  readonly query: string
  readonly body: Readonly<Record<string, unknown>>
  readonly stream: boolean
}

/** The answer a candidate is measured against, with what it cost. */
export interface Baseline {
  readonly model: string | null
  /** The answer as written to the client: a whole body, or its stream's text. */
  readonly text: string
  readonly streamed: boolean
  readonly latencyMs: number | null
  readonly ttftMs: number | null
  readonly tokens: { readonly input: number; readonly output: number } | null
  readonly costUsd: number | null
}

/** What one call to an own route answered. */
export interface CallResult {
  readonly status: number
  readonly text: string
  readonly latencyMs: number
  readonly ttftMs: number | null
  readonly costUsd: number
  readonly model: string | null
  readonly tokens: { readonly input: number; readonly output: number } | null
  readonly contentType: string
}

/** An answer in a client format, whole or as the text of its stream, read back into the canonical form. */
export const readAnswer = (format: FormatId, text: string, streamed: boolean): CanonicalResponse => {
  const wire = FORMATS[format]
  if (!streamed) return wire.decodeResponse(JSON.parse(text))
  let frames: Array<Frame>
  const trimmed = text.trimStart()
  if (format === "gemini" && trimmed.startsWith("["))
    frames = (JSON.parse(trimmed) as Array<unknown>).map((d) => ({ data: JSON.stringify(d) }))
  else if (wire.framing === "ndjson") frames = new NdjsonParser().push(`${text}\n`)
  else frames = new SseParser().push(`${text}\n\n`)
  const decoder = wire.streamDecoder()
  const collector = new StreamCollector()
  for (const f of frames) collector.push(decoder.push(f))
  collector.push(decoder.end())
  return collector.result("shadow")
}

/** The path and body of the same request to another model (Gemini names the model in the path). */
export const retarget = (s: RecordedRequest, model: string): { readonly path: string; readonly body: Record<string, unknown> } => {
  const body: Record<string, unknown> = { ...s.body }
  if (s.format === "gemini") {
    const path = s.path.replace(/\/models\/[^/:]+:/, `/models/${encodeURIComponent(model)}:`)
    return { path: `${path}${path.includes(":streamGenerateContent") ? "?alt=sse" : ""}`, body }
  }
  body["model"] = model
  // A Responses request must not make the upstream keep the candidate's answer.
  if (s.format === "openai-responses") body["store"] = false
  return { path: `${s.path}${s.query === "" ? "" : `?${s.query}`}`, body }
}

export const excerptOf = (body: Readonly<Record<string, unknown>>): string => {
  const text = JSON.stringify(body["messages"] ?? body["input"] ?? body["contents"] ?? body["prompt"] ?? body)
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text
}

/**
 * One request to an own route (with the client's own `headers` when they shape the answer), read
 * to its end: never fails (an unreachable server is status 0).
 */
export const callOwn = (
  own: OwnRoutesShape,
  path: string,
  body: unknown,
  requestId: string,
  headers?: Readonly<Record<string, string>>
): Effect.Effect<CallResult> =>
  Effect.promise(async () => {
    const started = Date.now()
    try {
      const res = await own.fetch(path, {
        body,
        requestId,
        onBehalfOf: null,
        headers: { ...headers, [SHADOW_HEADER]: "1", "x-gateway-no-cache": "true" }
      })
      let ttftMs: number | null = null
      let text = ""
      const reader = res.body?.getReader()
      const decoder = new TextDecoder()
      if (reader)
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          ttftMs ??= Date.now() - started
          text += decoder.decode(value, { stream: true })
        }
      text += decoder.decode()
      return {
        status: res.status,
        text,
        latencyMs: Date.now() - started,
        ttftMs,
        costUsd: Number(res.headers.get("x-gateway-response-cost") ?? 0) || 0,
        model: res.headers.get("x-gateway-model"),
        tokens: {
          input: Number(res.headers.get("x-gateway-tokens-in") ?? 0),
          output: Number(res.headers.get("x-gateway-tokens-out") ?? 0)
        },
        contentType: res.headers.get("content-type") ?? ""
      }
    } catch (e) {
      return {
        status: 0,
        text: `the gateway could not be reached: ${(e as Error).message}`,
        latencyMs: Date.now() - started,
        ttftMs: null,
        costUsd: 0,
        model: null,
        tokens: null,
        contentType: ""
      }
    }
  })

/** Whether a call's answer is its stream (a streamed request may still be answered whole, as an error is). */
export const answeredStreamed = (requested: boolean, res: CallResult): boolean => requested && !res.contentType.includes("application/json")

/** A call's answer as the baseline of a comparison (replay without a recorded answer: the first model's). */
export const baselineOf = (s: RecordedRequest, res: CallResult): Baseline => ({
  model: res.model,
  text: res.text,
  streamed: answeredStreamed(s.stream, res),
  latencyMs: res.latencyMs,
  ttftMs: answeredStreamed(s.stream, res) ? res.ttftMs : null,
  tokens: res.tokens,
  costUsd: res.costUsd
})

const JUDGE_PROMPT = (request: string, a: string, b: string) =>
  `Two assistants answered the same request. Which answer serves the request better? Reply with exactly one word: A, B, or TIE.\n\nRequest:\n${request}\n\nAnswer A:\n${a}\n\nAnswer B:\n${b}`

/** A judge model's preference, from the candidate's side; null when it could not say. */
const judge = (own: OwnRoutesShape, model: string, request: string, baseline: string, candidate: string, requestId: string) =>
  Effect.gen(function* () {
    // The order is drawn, so a judge's taste for the first answer favours neither side.
    const candidateFirst = Math.random() < 0.5
    const [a, b] = candidateFirst ? [candidate, baseline] : [baseline, candidate]
    const res = yield* callOwn(
      own,
      "/v1/chat/completions",
      { model, stream: false, max_tokens: 8, messages: [{ role: "user", content: JUDGE_PROMPT(request, a, b) }] },
      requestId
    )
    if (res.status !== 200) return { verdict: null, costUsd: res.costUsd }
    const said = String(JSON.parse(res.text)?.choices?.[0]?.message?.content ?? "")
      .trim()
      .toUpperCase()
    const pick = /^TIE/.test(said) ? "tie" : /^A\b/.test(said) ? "A" : /^B\b/.test(said) ? "B" : undefined
    const verdict =
      pick === undefined
        ? null
        : pick === "tie"
          ? ("tie" as const)
          : (pick === "A") === candidateFirst
            ? ("win" as const)
            : ("loss" as const)
    return { verdict, costUsd: res.costUsd }
  }).pipe(Effect.catchAllCause(() => Effect.succeed({ verdict: null, costUsd: 0 })))

export interface ExchangeOptions {
  readonly own: OwnRoutesShape
  /** A judge model, asked when `mayJudge()` says so; null: none. */
  readonly judgeModel: string | null
  readonly mayJudge: () => boolean
  /** What a candidate or judge call cost, as it is known. */
  readonly spend: (usd: number) => void
}

/** The request ids of a candidate's call and of its judge's. */
export interface ExchangeIds {
  readonly call: string
  readonly judge: string
}

/**
 * Sends `s` to `model`, compares its answer with `baseline`, and answers the pair to store and
 * whether the candidate answered.
 */
export const exchange = (o: ExchangeOptions, s: RecordedRequest, model: string, ids: ExchangeIds, baseline: Baseline) =>
  Effect.gen(function* () {
    const { path, body } = retarget(s, model)
    const res = yield* callOwn(o.own, path, body, ids.call)
    o.spend(res.costUsd)
    return yield* pairOf(o, s, model, ids, baseline, res)
  })

/** The pair of `baseline` and a candidate's call result `res`. */
export const pairOf = (o: ExchangeOptions, s: RecordedRequest, model: string, ids: ExchangeIds, baseline: Baseline, res: CallResult) =>
  Effect.gen(function* () {
    const streamed = answeredStreamed(s.stream, res)
    let error: string | null = null
    let candidate: CanonicalResponse | undefined
    if (res.status !== 200) error = `status ${res.status}: ${res.text.slice(0, 500)}`
    else
      try {
        candidate = readAnswer(s.format, res.text, streamed)
      } catch (e) {
        error = `the answer could not be read: ${(e as Error).message}`
      }
    const baselineAnswer = answerOf(readAnswer(s.format, baseline.text, baseline.streamed))
    const candidateAnswer = candidate ? answerOf(candidate) : undefined
    const schema = requestedSchema(s.format, s.body as Record<string, unknown>)
    const engines = schema ? yield* Effect.promise(schemaEngines) : undefined
    const valid = (text: string) => (schema && engines ? (checkAnswer(engines, schema, text)?.valid ?? null) : null)
    const comparison = candidateAnswer
      ? compare(baselineAnswer, candidateAnswer)
      : { exact: false, normalized: false, tools: null, similarity: 0 }
    const request = excerptOf(s.body)
    const judged =
      candidateAnswer && o.judgeModel !== null && o.mayJudge()
        ? yield* judge(o.own, o.judgeModel, request, JSON.stringify(baselineAnswer), JSON.stringify(candidateAnswer), ids.judge)
        : undefined
    if (judged) o.spend(judged.costUsd)
    const pair: ShadowPair = {
      requestId: s.requestId,
      scope: s.scope,
      format: s.format,
      requestExcerpt: request,
      primaryModel: baseline.model,
      shadowModel: model,
      primaryAnswer: baselineAnswer.text || JSON.stringify(baselineAnswer.tools),
      shadowAnswer: candidateAnswer ? candidateAnswer.text || JSON.stringify(candidateAnswer.tools) : null,
      shadowError: error,
      primaryLatencyMs: baseline.latencyMs,
      shadowLatencyMs: res.latencyMs,
      primaryTtftMs: baseline.ttftMs,
      shadowTtftMs: streamed ? res.ttftMs : null,
      primaryTokens: baseline.tokens,
      shadowTokens: res.tokens,
      primaryCostUsd: baseline.costUsd,
      shadowCostUsd: res.costUsd,
      primaryFinish: baselineAnswer.finish,
      shadowFinish: candidateAnswer?.finish ?? null,
      primaryTools: canonicalJson(baselineAnswer.tools),
      shadowTools: canonicalJson(candidateAnswer?.tools ?? []),
      primarySchemaValid: valid(baselineAnswer.text),
      shadowSchemaValid: candidateAnswer ? valid(candidateAnswer.text) : null,
      exact: comparison.exact,
      normalized: comparison.normalized,
      toolsMatch: comparison.tools,
      similarity: comparison.similarity,
      judgeModel: judged ? o.judgeModel : null,
      judgeVerdict: judged?.verdict ?? null,
      judgeCostUsd: judged ? judged.costUsd : null
    }
    return { pair, ok: error === null, costUsd: res.costUsd + (judged?.costUsd ?? 0) }
  })
