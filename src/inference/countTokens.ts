/**
 * count_tokens upstream (Anthropic, Gemini) through the guarded attempt; the routes count locally when no candidate answers. No usage
 * row: counting is free upstream and clients ask before every turn (docs/internals.md, "Seam 1: one guarded attempt").
 */
import * as Effect from "effect/Effect"
import type { FormatId } from "../domain/canonical.js"
import { tryJson } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { FORMATS } from "../upstream/formats/registry.js"
import type { Candidate } from "../services/routing/types.js"
import { type AttemptOutcome, attemptFailed, failureOfError, headerValue, newTracking } from "../kernel/attempts.js"
import type { InferenceShape } from "./call.js"
import { clientError, type InferenceError } from "../kernel/errors.js"
import type { AttemptRequest, TryCandidate } from "./fallback.js"
import type { HttpRequestContext } from "./io.js"

/** What a counting endpoint asks of each candidate. */
export interface CountRequest extends AttemptRequest {
  /** Who sends the count request (the try is made once, not per request). */
  readonly inference: InferenceShape
  /** Whether a candidate can count (speaks the upstream API that does). */
  readonly able: (c: Candidate) => boolean
  /** The upstream request for a candidate. */
  readonly prepare: (c: Candidate) => { readonly format: FormatId; readonly body: Record<string, unknown> }
  /** The count in the upstream's answer. */
  readonly read: (json: unknown) => number | undefined
}

interface Counted extends AttemptOutcome {
  readonly count: number
}

/** Answers that say this upstream does not count at all: passed over, not held against it. */
const NOT_COUNTING = new Set([404, 405, 501])

const tryCount: TryCandidate<CountRequest, Counted> = Effect.fnUntraced(function* (request: CountRequest, c: Candidate) {
  const inference = request.inference
  const { connection } = c
  const client = request.format
  const { format, body } = request.prepare(c)
  const res = yield* inference
    .send({ connection, model: c.model }, format, body, { stream: false, op: "count_tokens", readWhole: true }, client)
    .pipe(
      Effect.mapError((e) => attemptFailed(e, failureOfError(e), e.code === "provider_misconfigured" || e.code === "provider_url_blocked"))
    )
  if (res.status < 200 || res.status >= 300) {
    const { error, info } = yield* inference.readFailure(res, FORMATS[format], client, connection)
    return yield* Effect.fail(NOT_COUNTING.has(res.status) ? attemptFailed(error, undefined, true) : attemptFailed(error, info))
  }
  const text = yield* Effect.mapError(inference.wholeText(res, client, connection), (f) => attemptFailed(f.error, f.info))
  const count = request.read(tryJson(text))
  if (count === undefined) {
    return yield* Effect.fail(
      attemptFailed(
        clientError(client, { status: 502, kind: "upstream", message: `${connection.name}: the upstream answered without a count` }),
        undefined,
        true
      )
    )
  }
  return { status: 200, usage: undefined, ttftMs: null, error: null, headers: headerValue(res.headers), count }
})

/**
 * The upstream's count for `model`, or undefined when no candidate can count or none answered
 * (the route counts locally then). Fails only when the model id cannot be served at all (the
 * router's 400 or 404).
 */
export const countUpstream = (
  inference: InferenceShape,
  ctx: HttpRequestContext,
  client: WireFormat,
  model: string,
  how: Pick<CountRequest, "able" | "prepare" | "read">
): Effect.Effect<number | undefined, InferenceError> =>
  Effect.flatMap(inference.plan(model, client), (plan) => {
    // The candidates that would answer the request itself before any that cannot count: a count
    // is for the model that would serve, not for one further down the list.
    const end = plan.candidates.findIndex((c) => !how.able(c))
    const candidates = end === -1 ? plan.candidates : plan.candidates.slice(0, end)
    if (candidates.length === 0) return Effect.succeed(undefined)
    const { fusion: _fusion, ...rest } = plan
    return inference
      .guarded({ ctx, format: client, model, inference, ...how }, { ...rest, candidates, blocked: [] }, newTracking(model), tryCount)
      .pipe(
        Effect.map((counted): number | undefined => counted.count),
        Effect.orElseSucceed(() => undefined)
      )
  })
