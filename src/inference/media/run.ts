/**
 * The media endpoints' request over the guarded attempt: budget, the plan narrowed to the modality, one usage row priced by tokens
 * and units, the cost headers (docs/internals.md, "Seam 1: one guarded attempt").
 */
import * as Effect from "effect/Effect"
import type { AccountingShape } from "../../services/accounting/Accounting.js"
import { formatCost, type MediaUnits } from "../../services/accounting/cost.js"
import type { Usage } from "../../domain/canonical.js"
import type { WireFormat } from "../../upstream/formats/format.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import type { Connection } from "../../upstream/providers/Connections.js"
import { type ModelKind, modelDoes } from "../../domain/catalog/catalog.js"
import type { RoutePlan } from "../../services/routing/plan.js"
import type { Candidate } from "../../services/routing/types.js"
import {
  allBlocked,
  type AttemptFailed,
  attemptFailed,
  type AttemptOutcome,
  failureOfError,
  headerValue,
  newTracking
} from "../../kernel/attempts.js"
import type { InferenceShape, SendOptions } from "../call.js"
import { clientError, type InferenceError } from "../../kernel/errors.js"
import { type AttemptRequest, firstOf, narrowPlan, type TryCandidate } from "../fallback.js"
import type { HttpRequestContext } from "../io.js"
import type { CustomCall } from "../../upstream/client/executors.js"
import type { UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"

/** What a media try answers: the attempt's outcome plus the units it is priced by. */
export interface MediaOutcome extends AttemptOutcome {
  readonly units?: MediaUnits
}

export interface MediaCall<R extends AttemptRequest, A extends MediaOutcome> {
  readonly ctx: HttpRequestContext
  /** Errors are rendered in this format (OpenAI's for every media route). */
  readonly client: WireFormat
  readonly model: string
  /** The usage row's endpoint: `images.generations`, `audio.speech`, `rerank`, ... */
  readonly endpoint: string
  /** What is asked, for the 400 when no target of the model offers it: `image generation`, `speech`, ... */
  readonly what: string
  /** The connections (and models) that can serve it. */
  readonly able: (c: Candidate) => boolean
  /** The 400 when no target of the model can (default: `model_not_supported`, naming `what`). */
  readonly unsupported?: (first: Candidate) => { readonly message: string; readonly code: string }
  readonly request: R
  readonly attempt: TryCandidate<R, A>
  /** The row records a stream (speech written as it arrives). */
  readonly stream?: boolean
  /**
   * The plan to narrow, when it is not the router's plan for `model` alone (web search: the plans
   * of several targets, one after another, as a fallback list).
   */
  readonly plan?: Effect.Effect<RoutePlan, InferenceError>
}

export interface MediaServed<A> {
  readonly outcome: A
  readonly candidate: Candidate
  readonly costUsd: number
}

/** A candidate whose model can do `kind` (the catalog's kind for a listed model, else what its provider offers). */
export const does =
  (kind: ModelKind) =>
  (c: Candidate): boolean =>
    modelDoes(c.connection.provider, c.model, kind)

/** The cost telemetry headers of a media answer (spec: on every non-streaming success). */
export const mediaHeaders = (ctx: HttpRequestContext, candidate: Candidate, usage: Partial<Usage> | undefined, costUsd: number): void => {
  const h = ctx.responseHeaders
  h["x-gateway-response-cost"] = formatCost(costUsd)
  h["x-gateway-tokens-in"] = String(usage?.inputTokens ?? 0)
  h["x-gateway-tokens-out"] = String(usage?.outputTokens ?? 0)
  h["x-gateway-model"] = candidate.model
  h["x-gateway-provider"] = candidate.connection.provider.id
  h["x-gateway-latency-ms"] = String(Date.now() - ctx.startedAt)
  h["x-gateway-cache-hit"] = "false"
}

/**
 * The cost headers of an answer a try streams itself (speech relayed as it arrives), set before
 * its first byte: priced as its usage row will be, its units at the candidate's prices (no
 * tokens are known then). runMedia leaves them as they went out.
 */
export const streamedMediaHeaders = (accounting: AccountingShape, ctx: HttpRequestContext, candidate: Candidate, units: MediaUnits): void =>
  mediaHeaders(ctx, candidate, undefined, accounting.mediaCost(candidate.connection.provider.id, candidate.model, undefined, units))

/**
 * Runs one media request: budget, plan narrowed to `able`, the guarded attempt, the usage row
 * and the cost headers. Answers the outcome of the candidate that served; the route writes the
 * answer (a try that streams its answer writes it itself, after `streamedMediaHeaders`).
 */
export const runMedia = <R extends AttemptRequest, A extends MediaOutcome>(
  inference: InferenceShape,
  accounting: AccountingShape,
  m: MediaCall<R, A>
): Effect.Effect<MediaServed<A>, InferenceError> => {
  const { ctx, client, model, endpoint } = m
  inference.track(ctx, endpoint)
  const track = newTracking(model)
  let units: MediaUnits | undefined
  const row = (status: number, usage: Partial<Usage> | undefined, error: string | null) =>
    accounting.finish({
      requestId: ctx.requestId,
      apiKeyId: ctx.apiKeyId,
      connectionId: track.tried?.connection.id ?? null,
      provider: track.tried?.connection.provider.id ?? null,
      model: track.tried?.model ?? model,
      endpoint,
      stream: m.stream ?? false,
      status,
      usage: { input: usage?.inputTokens ?? null, output: usage?.outputTokens ?? null, cached: null, reasoning: null },
      latencyMs: Date.now() - ctx.startedAt,
      ttftMs: null,
      error,
      fallbackAttempts: track.fallbacks,
      requestedModel: model,
      ...(units ? { units } : {})
    })
  return Effect.gen(function* () {
    const budget = accounting.budget(ctx.apiKeyId)
    if (!budget.ok) {
      return yield* clientError(
        client,
        {
          status: 429,
          kind: "rate_limit",
          code: "budget_exhausted",
          message: `the ${budget.window} budget of ${budget.subject} is spent ($${budget.spentUsd.toFixed(4)} of $${budget.limitUsd.toFixed(4)})`,
          level: budget.level
        },
        { "retry-after": String(Math.max(1, Math.ceil(budget.retryAfterMs / 1000))) }
      )
    }
    const plan = yield* m.plan ?? inference.plan(model, client)
    const able = narrowPlan(plan, m.able)
    if (!able) {
      const first = firstOf(plan)
      if (!first) return yield* allBlocked(client, plan)
      const refusal = m.unsupported?.(first) ?? {
        message: `${model} is served by ${first.connection.name} (${first.connection.provider.id}), which offers no ${m.what}`,
        code: "model_not_supported"
      }
      return yield* clientError(client, { status: 400, kind: "invalid_request", ...refusal, param: "model" })
    }
    const outcome = yield* inference.guarded(m.request, able, track, m.attempt)
    units = outcome.units
    const candidate = track.tried!
    // An answer that broke off after it began (a relayed stream) keeps its error on the row.
    const costUsd = yield* row(200, outcome.usage, outcome.error)
    // A streamed answer's head went out with its headers (streamedMediaHeaders) before this.
    if (!ctx.res.headersSent) mediaHeaders(ctx, candidate, outcome.usage, costUsd)
    return { outcome, candidate, costUsd }
  }).pipe(
    // A failed request still leaves its row (and its request.failed event).
    Effect.tapError((e) => row(e.status, undefined, e.message)),
    Effect.onInterrupt(() => row(499, undefined, "client closed the request"))
  )
}

/**
 * Sends one media call to a candidate, as a try: a transport failure, an error answer (read and
 * scrubbed the way the chat path reads it) are the candidate's failures; the 2xx answer comes
 * back for the try to read (`res.bytes` when `readWhole`).
 */
export const sendMedia = (
  inference: InferenceShape,
  request: AttemptRequest,
  c: Candidate,
  call: CustomCall,
  options: Omit<SendOptions, "custom" | "stream"> & { readonly stream?: boolean } = {}
): Effect.Effect<UpstreamResponse, AttemptFailed> =>
  Effect.gen(function* () {
    const { connection } = c
    const res = yield* inference
      .send(
        { connection, model: c.model },
        connection.format,
        {},
        { stream: options.stream ?? false, readWhole: !options.stream, ...options, custom: call },
        request.format
      )
      .pipe(
        Effect.mapError((e) =>
          attemptFailed(e, failureOfError(e), e.code === "provider_misconfigured" || e.code === "provider_url_blocked")
        )
      )
    if (res.status < 200 || res.status >= 300) {
      const { error, info } = yield* inference.readFailure(res, FORMATS[connection.format], request.format, connection)
      return yield* Effect.fail(attemptFailed(error, info))
    }
    return res
  })

/** A 2xx answer's body, whole (under the size limit); one that could not be read is the candidate's failure. */
export const mediaBytes = (
  inference: InferenceShape,
  request: AttemptRequest,
  connection: Connection,
  res: UpstreamResponse
): Effect.Effect<Buffer, AttemptFailed> =>
  res.bytes
    ? Effect.succeed(res.bytes)
    : Effect.map(
        Effect.mapError(inference.wholeText(res, request.format, connection), (f) => attemptFailed(f.error, f.info)),
        (t) => Buffer.from(t, "utf8")
      )

/** A 2xx answer that is not what the family answers (no JSON, no image...): the candidate's failure, so another may answer. */
export const badAnswer = (request: AttemptRequest, connection: Connection, what: string): AttemptFailed => {
  const message = `${connection.name}: ${what}`
  return attemptFailed(clientError(request.format, { status: 502, kind: "upstream", message, code: "upstream_error" }), {
    status: 502,
    kind: "http",
    message,
    code: null
  })
}

export { headerValue }
