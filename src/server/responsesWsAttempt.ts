/**
 * One try of a WebSocket's `response.create` on one candidate, as the guarded attempt
 * (fallback.ts) makes it: a streamed `POST /responses` to the candidate, its events relayed to the
 * socket by the HTTP pipeline's relay and watchdog.
 */
import * as Effect from "effect/Effect"
import { wholeUsage } from "../domain/canonical.js"
import { AttemptFailed, type AttemptOutcome, attemptFailed, failureOfError, headerValue } from "../kernel/attempts.js"
import { decodeFailure, type InferenceError } from "../kernel/errors.js"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import { probeTimeoutMs } from "../services/routing/auto/selfHealing.js"
import type { Candidate } from "../services/routing/types.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import { arr, obj, tryJson } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { openAiResponses } from "../upstream/formats/openai-responses.js"
import { FORMATS } from "../upstream/formats/registry.js"
import { sealResponse } from "../upstream/formats/signatures.js"
import { responseEvents } from "../inference/answers.js"
import type { InferenceCall, InferenceShape } from "../inference/call.js"
import type { AttemptRequest } from "../inference/fallback.js"
import { noThinkingBody, normalizePassthrough } from "../inference/passthrough.js"
import { makeRelay, streamEnded } from "../inference/relays.js"
import type { Expanded, Origin } from "../inference/ResponseStore.js"
import { asMessages, fromSse, type SocketSink, socketEvents } from "./responsesWsSink.js"
import { customToolNames } from "../inference/routes/openai.js"
import { encodeFor, errorInAnswer } from "../inference/sending.js"
import { relayFrames, type StreamWatchdogShape } from "../inference/stream.js"
import type { StreamTimeoutsShape } from "../inference/StreamTimeouts.js"

/** One `response.create` frame, as the guarded attempt tries it on each candidate. */
export interface SocketRequest extends AttemptRequest {
  readonly sink: SocketSink
  /** Reasoning off (the model id's no-thinking alias). */
  readonly noThinking: boolean
  /** The frame without `type` and `generate`. */
  readonly body: Record<string, unknown>
  /** The body with the socket's conversation put in front, for the candidate that will answer. */
  readonly expanded: (c: Candidate) => Effect.Effect<Expanded, InferenceError>
  readonly remember: (id: string, input: ReadonlyArray<unknown>, output: ReadonlyArray<unknown>, origin?: Origin) => void
}

const speaksResponses = (c: Candidate): boolean => c.connection.formats.includes("openai-responses")

/** What a try needs: the upstream calls, the prices, the stream's watchdog and timeouts. */
export interface ResponseAttemptDeps {
  readonly inference: InferenceShape
  readonly accounting: AccountingShape
  readonly watchdog: StreamWatchdogShape
  readonly timeouts: StreamTimeoutsShape
}

/** A response's try on one candidate (`tryResponse`), made once per layer. */
export const makeResponseAttempt = ({ inference, accounting, watchdog, timeouts }: ResponseAttemptDeps) => {
  /**
   * A translated candidate that answered a stream request whole (some upstreams do): its answer
   * replayed as the Responses events it would have streamed, as over HTTP.
   */
  const replayWholeTo = Effect.fnUntraced(function* (
    request: SocketRequest,
    call: InferenceCall,
    res: UpstreamResponse,
    upstream: WireFormat,
    c: Candidate
  ) {
    const { connection } = c
    const text = yield* Effect.mapError(inference.wholeText(res, openAiResponses, connection), (f) => attemptFailed(f.error, f.info))
    const json = tryJson(text)
    const bad = errorInAnswer(upstream.id, json, text, openAiResponses, connection, "answer")
    if (bad) return yield* Effect.fail(attemptFailed(bad.error, bad.info))
    const decoded = sealResponse(upstream.decodeResponse(json), connection.id)
    const encoder = openAiResponses.streamEncoder({
      model: call.model,
      requestId: call.ctx.requestId,
      ...(call.encodeOptions ? { options: call.encodeOptions } : {})
    })
    request.sink.end(
      fromSse(
        responseEvents(decoded)
          .map((e) => encoder.push(e))
          .join("") + encoder.end()
      ),
      null
    )
    if (encoder.result) call.onCompleted?.(encoder.result())
    const reported = upstream.usageOfResponse(json)
    const usage = reported ? wholeUsage(reported) : undefined
    return {
      status: 200,
      usage,
      ttftMs: null,
      error: null,
      headers: headerValue(res.headers),
      costUsd: accounting.cost(connection.provider.id, c.model, usage)
    } satisfies AttemptOutcome
  })

  /**
   * One try of a `response.create` against one candidate: a streamed `POST /responses`,
   * relayed by the HTTP pipeline's relay and watchdog (its sink the socket); a failure before
   * any message went out leaves the frame free to go to the next candidate.
   */
  const tryResponse: (
    request: SocketRequest,
    c: Candidate,
    options: { readonly probe: boolean }
  ) => Effect.Effect<AttemptOutcome, AttemptFailed> = Effect.fnUntraced(function* (
    request: SocketRequest,
    c: Candidate,
    options: { readonly probe: boolean }
  ) {
    const { connection } = c
    const client = openAiResponses
    // A Responses upstream gets the frame's body (normalised); any other family the request
    // translated through the canonical form, as POST /v1/responses sends it.
    const native = speaksResponses(c)
    const upstream = native ? client : FORMATS[connection.format]
    const expanded = yield* Effect.mapError(request.expanded(c), (e) => attemptFailed(e, undefined))
    let upstreamBody: Record<string, unknown>
    if (native) {
      const body = { ...expanded.body, stream: true }
      upstreamBody = normalizePassthrough(
        "openai-responses",
        request.noThinking ? noThinkingBody("openai-responses", body) : body,
        connection
      )
    } else {
      const canonical = yield* Effect.try({
        try: () => client.decodeRequest(expanded.body),
        catch: (e) => attemptFailed(decodeFailure(client, e), undefined)
      })
      upstreamBody = encodeFor(connection, {
        ...canonical,
        model: c.model,
        stream: true,
        ...(request.noThinking ? { reasoning: { enabled: false } } : {})
      }).body
    }
    // Probes through a half-open breaker wait less for headers, as over HTTP.
    const headersTimeoutMs = options.probe ? probeTimeoutMs(connection.timeouts?.headersMs ?? timeouts.streamHeadersMs) : undefined
    const res = yield* inference
      .send(
        { connection, model: c.model },
        upstream.id,
        upstreamBody,
        { stream: true, ...(headersTimeoutMs ? { headersTimeoutMs } : {}) },
        client
      )
      .pipe(
        Effect.mapError((e) =>
          attemptFailed(
            e,
            failureOfError(e),
            e.code === "provider_misconfigured" || e.code === "provider_url_blocked" || e.code === "oauth_refresh_failed"
          )
        )
      )
    if (res.status < 200 || res.status >= 300) {
      const { error, info } = yield* inference.readFailure(res, upstream, client, connection)
      return yield* Effect.fail(attemptFailed(error, info))
    }
    const call: InferenceCall = {
      ctx: request.ctx,
      format: client,
      body: expanded.body,
      model: request.model,
      stream: true,
      endpoint: "responses.ws",
      // Pass-through events go one per message; translated ones are encoded as SSE and split below.
      ...(native ? { eventFraming: socketEvents } : {}),
      encodeOptions: { customTools: customToolNames(arr(expanded.body["tools"]), obj), request: request.body },
      onCompleted: (r) => request.remember(r.id, expanded.input, r.output, r.origin)
    }
    const origin: Origin = { connectionId: connection.id, stored: request.body["store"] !== false }
    if (!native && String(res.headers["content-type"] ?? "").includes("application/json"))
      return yield* replayWholeTo(request, call, res, upstream, c)
    const relayed = makeRelay(call, upstream, client, native, origin, connection)
    const relay = native ? relayed.relay : asMessages(relayed.relay)
    // The connection's own silence limit, as over HTTP.
    const result = yield* relayFrames(
      res,
      upstream.framing,
      relay,
      request.sink,
      watchdog,
      request.ctx.startedAt,
      connection.timeouts?.idleMs
    )
    const ended = streamEnded(result, relayed, res, client)
    return ended instanceof AttemptFailed ? yield* Effect.fail(ended) : ended
  })

  return tryResponse
}
