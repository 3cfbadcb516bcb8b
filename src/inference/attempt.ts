/**
 * One attempt of a chat-like request against one candidate, as an Effect (`attempt`) or on the HTTP client's callbacks (`attemptNow`,
 * docs/ARCHITECTURE.md, "The common path"). Both call the same steps, so they cannot answer differently.
 */
import * as Effect from "effect/Effect"
import { isUtf8 } from "node:buffer"
import { type CanonicalRequest, type CanonicalResponse, type Usage, wholeUsage } from "../domain/canonical.js"
import { obj, tryJson } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { FORMATS } from "../upstream/formats/registry.js"
import { sealAnswer, sealResponse } from "../upstream/formats/signatures.js"
import type { Connection } from "../upstream/providers/Connections.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import { probeTimeoutMs } from "../services/routing/auto/selfHealing.js"
import type { Candidate } from "../services/routing/types.js"
import {
  AttemptFailed,
  type AttemptOutcome,
  attemptFailed,
  clientFacing,
  failureOfError,
  failureOfStream,
  headerValue
} from "../kernel/attempts.js"
import { clientError, decodeFailure, type InferenceError } from "../kernel/errors.js"
import { schemaEngines } from "../kernel/schemaCheck.js"
import { encodeWhole, JSON_ARRAY_CONTENT_TYPE, putCostHeaders, replayWhole, sendWhole } from "./answers.js"
import type { InferenceCall, SendOptions } from "./call.js"
import { clientGone } from "./io.js"
import { noThinkingBody, normalizePassthrough } from "./passthrough.js"
import { collectStream, type CollectedStream, DISCARD, makeRelay, outcomeHeaders, streamEnded } from "./relays.js"
import type { Origin } from "./ResponseStore.js"
import { encodeFor, errorInAnswer, type makeSending } from "./sending.js"
import {
  type RelayEnd,
  relayFrames,
  relayFramesNow,
  relayStream,
  relayStreamNow,
  type StreamOutcome,
  type StreamWatchdogShape
} from "./stream.js"
import { type Conformed, plusUsage, schemaOf, type makeStructured } from "./structuredAnswers.js"
import type { StreamTimeoutsShape } from "./StreamTimeouts.js"

/** How an attempt without an effect ended (`attemptNow`). */
export type AttemptResult =
  | { readonly _tag: "served"; readonly outcome: AttemptOutcome }
  | { readonly _tag: "failed"; readonly failed: AttemptFailed }
  /** The client went away: the upstream call was aborted. */
  | { readonly _tag: "gone" }
  /** A step threw: a bug, answered as the pipeline answers a defect. */
  | { readonly _tag: "defect"; readonly defect: unknown }

type Sending = ReturnType<typeof makeSending>

/** How `sendNow` ended: the answer, the send's failure, or the client gone. */
type Sent = Parameters<Parameters<Sending["sendNow"]>[5]>[0]

export interface AttemptDeps {
  readonly sending: Sending
  readonly conform: ReturnType<typeof makeStructured>["conform"]
  readonly accounting: AccountingShape
  readonly timeouts: StreamTimeoutsShape
  readonly watchdog: StreamWatchdogShape
  /** Whether a non-streamed call is asked of `candidate` whole (src/inference/nonStreamed.ts). */
  readonly askWhole: (call: InferenceCall, candidate: Candidate) => boolean
}

/**
 * An attempt's plan: what goes to the upstream and how its answer is read. It is also the send's
 * options (`stream`: asked as a stream), so an attempt makes one object for both.
 */
interface Prepared extends SendOptions {
  readonly connection: Connection
  readonly passthrough: boolean
  readonly upstream: WireFormat
  /** A non-streamed call asked as a stream, its answer collected. */
  readonly collect: boolean
  readonly body: Record<string, unknown>
}

export const makeAttempt = ({ sending, conform, accounting, timeouts, watchdog, askWhole }: AttemptDeps) => {
  const { sendAs, readFailure, wholeText, canSendNow, sendNow, readFailureNow, wholeTextNow } = sending

  /**
   * The attempt's plan. A non-streamed request is asked of the upstream as a stream and its answer
   * collected, under the stream watchdogs instead of a limit on the whole generation (docs/formats.md,
   * "Non-streamed answers from streams"), unless it is asked whole (short for this upstream, or the
   * connection cannot stream), or the request asks for what a collected stream cannot give back.
   * Throws an AttemptFailed when the body cannot be translated.
   */
  const prepare = (call: InferenceCall, candidate: Candidate, probe: boolean): Prepared => {
    const { ctx, format: client } = call
    const connection: Connection = candidate.connection
    const passthrough = (call.passthrough ?? true) && connection.formats.includes(client.id)
    const upstream = passthrough ? client : FORMATS[connection.format]
    const collect = !call.stream && !askWhole(call, candidate) && (!passthrough || client.collectable(call.body))
    const asStream = call.stream || collect

    // Client headers passed on: none but between Anthropic clients and upstreams (no object otherwise).
    const beta = client.id === "anthropic" && upstream.id === "anthropic" ? ctx.req.headers["anthropic-beta"] : undefined
    const forward = beta ? { "anthropic-beta": Array.isArray(beta) ? beta.join(",") : beta } : undefined

    let body: Record<string, unknown>
    if (passthrough) {
      const own = call.noThinking ? noThinkingBody(upstream.id, call.body) : call.body
      body = normalizePassthrough(upstream.id, collect ? upstream.asStream(own) : own, connection)
    } else {
      let canonical: CanonicalRequest
      try {
        canonical = (call.decode ?? client.decodeRequest)(call.body)
      } catch (e) {
        throw attemptFailed(decodeFailure(client, e), undefined)
      }
      const req: CanonicalRequest = {
        ...canonical,
        model: candidate.model,
        stream: asStream,
        ...(call.noThinking ? { reasoning: { enabled: false } } : {})
      }
      body = encodeFor(connection, req).body
    }

    // Probes after an exclusion (or through a half-open breaker) wait less for headers.
    const headersTimeoutMs = probe
      ? probeTimeoutMs(connection.timeouts?.headersMs ?? (asStream ? timeouts.streamHeadersMs : timeouts.headersMs))
      : undefined
    // The traffic inspector's tap (src/services/inspector/agentBridge.ts), only while it records
    // bodies: what is recorded is what goes out, the endpoint's URL and the body once the model is set.
    const tap = ctx.tap
    const onPrepared =
      tap === undefined
        ? undefined
        : (prepared: { readonly url: string; readonly body: string }) =>
            tap.sent(
              { provider: connection.provider.id, connection: connection.name, model: candidate.model, url: prepared.url },
              prepared.body
            )
    // One object, no spreads: an unset option reads as an absent one.
    return {
      connection,
      passthrough,
      upstream,
      collect,
      body,
      stream: asStream,
      forward,
      // A non-streamed call reads the answer in the same wait as its headers.
      readWhole: !asStream,
      // The attempt is tied to the client: its leaving aborts the upstream call.
      abortWhen: clientGone(ctx),
      headersTimeoutMs: headersTimeoutMs || undefined,
      onPrepared
    }
  }

  /** A send's failure as the attempt's: a misconfigured or refused connection is skipped, not failed. */
  const sendFailed = (e: InferenceError) =>
    attemptFailed(
      e,
      failureOfError(e),
      e.code === "provider_misconfigured" || e.code === "provider_url_blocked" || e.code === "oauth_refresh_failed"
    )

  /** Whether the upstream's 2xx is a stream to relay (else a whole body, read as such). */
  const isStreamed = (p: Prepared, res: UpstreamResponse): boolean => {
    // A stream was asked for: a JSON body is an answer given whole, an HTML page (a proxy's or a
    // load balancer's page in a 200) is read whole too and refused as not JSON with its start
    // quoted; anything else is read as the stream (a stream of no event of its format is refused
    // by the decoder: upstream_malformed).
    const contentType = String(res.headers["content-type"] ?? "")
    return p.stream && !contentType.includes("application/json") && !contentType.includes("text/html")
  }

  /** The stream's content type for the client. */
  const streamType = (call: InferenceCall, p: Prepared, res: UpstreamResponse): string =>
    call.jsonArrayStream
      ? JSON_ARRAY_CONTENT_TYPE
      : p.passthrough
        ? String(res.headers["content-type"] ?? call.format.streamContentType)
        : call.format.streamContentType

  /**
   * A whole 2xx answer, first half: refused when it is an error or not the format's answer;
   * replayed as events when the client asked for a stream (done then); else its usage, cost and
   * whether its reasoning state was sealed, for `wholeEnd` (after the schema check, if any).
   */
  const wholeBegin = (
    call: InferenceCall,
    candidate: Candidate,
    p: Prepared,
    res: UpstreamResponse,
    text: string
  ):
    | AttemptFailed
    | { readonly outcome: AttemptOutcome }
    | { readonly json: unknown; readonly usage: Usage | undefined; readonly costUsd: number; readonly resealed: boolean } => {
    const { format: client } = call
    const { connection, upstream, passthrough } = p
    const json = tryJson(text)
    const bad = errorInAnswer(upstream.id, json, text, client, connection, "answer")
    if (bad) return attemptFailed(bad.error, bad.info)
    const reported = upstream.usageOfResponse(json)
    const usage = reported ? wholeUsage(reported) : undefined
    const costUsd = accounting.cost(connection.provider.id, candidate.model, usage)
    if (call.stream) {
      // The client asked for a stream but the upstream answered whole: replay it as events.
      replayWhole(call, sealResponse(upstream.decodeResponse(json), connection.id))
      return {
        outcome: { status: 200, usage, ttftMs: null, error: null, headers: outcomeHeaders(res.headers), costUsd } satisfies AttemptOutcome
      }
    }
    // Pass-through: the upstream's own bytes go to the client, parsed only for usage and errors,
    // and re-written only when reasoning state in them is sealed (docs/reasoning-state.md) or the
    // answer was held to a schema and repaired (docs/structured-outputs.md).
    const resealed = passthrough && sealAnswer(upstream.id, json, connection.id)
    return { json, usage, costUsd, resealed }
  }

  /** A whole answer, second half: written to the client (`conformed`: the schema check's verdict, when the answer was held to one). */
  const wholeEnd = (
    call: InferenceCall,
    candidate: Candidate,
    p: Prepared,
    res: UpstreamResponse,
    text: string,
    begun: { readonly json: unknown; readonly usage: Usage | undefined; readonly costUsd: number; readonly resealed: boolean },
    conformed: Conformed | undefined
  ): AttemptOutcome => {
    const { ctx } = call
    const { connection, upstream, passthrough } = p
    let { usage, costUsd } = begun
    if (conformed) {
      usage = plusUsage(usage, conformed.extraUsage)
      costUsd += conformed.extraCostUsd
    }
    const answer =
      conformed?.changed || !passthrough
        ? encodeWhole(call, conformed?.decoded ?? sealResponse(upstream.decodeResponse(begun.json), connection.id))
        : begun.json
    const outcome: AttemptOutcome = { status: 200, usage, ttftMs: null, error: null, headers: outcomeHeaders(res.headers), costUsd }
    putCostHeaders(ctx, connection.provider.id, candidate.model, usage, costUsd + (call.extraCostUsd ?? 0), call.extraTokens)
    if (passthrough && !begun.resealed && !conformed?.changed) sendWhole(call, text, textBytes(res))
    else sendWhole(call, JSON.stringify(answer))
    const id = obj(answer)?.["id"]
    if (call.onCompleted && typeof id === "string")
      call.onCompleted({
        id,
        output: (obj(answer)?.["output"] as Array<unknown>) ?? [],
        ...(passthrough ? { origin: originOf(call, connection) } : {})
      })
    return outcome
  }

  /**
   * A collected stream, first half: its failure before output is the attempt's (nothing reached
   * the client, another target may answer); else the decoded answer, its usage and cost. A
   * Responses upstream's terminal response object is the answer as it is (same format).
   */
  const collectedBegin = (
    call: InferenceCall,
    candidate: Candidate,
    p: Prepared,
    gather: CollectedStream,
    result: StreamOutcome
  ): AttemptFailed | { decoded: CanonicalResponse; answer: unknown; payload: string; usage: Usage | undefined; costUsd: number } => {
    const { ctx, format: client } = call
    const { connection, upstream, passthrough } = p
    if (result.failedBeforeOutput) {
      const e = result.failedBeforeOutput
      return attemptFailed(clientError(client, clientFacing(e)), failureOfStream(e))
    }
    const terminal = passthrough && upstream.id === "openai-responses" ? gather.terminal() : undefined
    if (terminal !== undefined) {
      const bad = errorInAnswer(upstream.id, terminal, "", client, connection, "answer")
      if (bad) return attemptFailed(bad.error, bad.info)
      const decoded = upstream.decodeResponse(terminal)
      return {
        decoded,
        answer: terminal,
        payload: JSON.stringify(terminal),
        usage: decoded.usage,
        costUsd: accounting.cost(connection.provider.id, candidate.model, decoded.usage)
      }
    }
    const decoded = gather.collector.result(`${ctx.requestId}`)
    return {
      decoded,
      answer: undefined,
      payload: "",
      usage: decoded.usage,
      costUsd: accounting.cost(connection.provider.id, candidate.model, decoded.usage)
    }
  }

  /** A collected stream, second half: the whole answer written (encoded for the client unless it is the terminal object). */
  const collectedEnd = (
    call: InferenceCall,
    candidate: Candidate,
    p: Prepared,
    res: UpstreamResponse,
    begun: { decoded: CanonicalResponse; answer: unknown; payload: string; usage: Usage | undefined; costUsd: number },
    conformed: Conformed | undefined
  ): AttemptOutcome => {
    const { ctx } = call
    const { connection, passthrough } = p
    let { decoded, answer, payload, usage, costUsd } = begun
    if (conformed) {
      usage = plusUsage(usage, conformed.extraUsage)
      costUsd += conformed.extraCostUsd
      if (conformed.changed) {
        decoded = conformed.decoded
        answer = undefined
      }
    }
    if (answer === undefined) {
      answer = encodeWhole(passthrough && decoded.model ? { ...call, model: decoded.model } : call, decoded)
      payload = JSON.stringify(answer)
    }
    putCostHeaders(ctx, connection.provider.id, candidate.model, usage, costUsd + (call.extraCostUsd ?? 0), call.extraTokens)
    sendWhole(call, payload)
    const id = obj(answer)?.["id"]
    if (call.onCompleted && typeof id === "string")
      call.onCompleted({
        id,
        output: (obj(answer)?.["output"] as Array<unknown>) ?? [],
        ...(passthrough ? { origin: originOf(call, connection) } : {})
      })
    return { status: 200, usage, ttftMs: null, error: null, headers: outcomeHeaders(res.headers), costUsd } satisfies AttemptOutcome
  }

  // ------------------------------------------------------------ the pipeline's driver (an Effect)

  /** One attempt against one candidate: answers the client, or fails with nothing written. */
  // Created once and called per attempt, as every generator on the request path: a generator
  // function made per call keeps what it saw alive through young GCs (docs/performance.md).
  const attempt: (
    call: InferenceCall,
    candidate: Candidate,
    options: { readonly probe: boolean }
  ) => Effect.Effect<AttemptOutcome, AttemptFailed> = Effect.fnUntraced(function* (
    call: InferenceCall,
    candidate: Candidate,
    options: { readonly probe: boolean }
  ) {
    const { ctx, format: client } = call
    const p = yield* Effect.suspend(() => {
      try {
        return Effect.succeed(prepare(call, candidate, options.probe))
      } catch (e) {
        return e instanceof AttemptFailed ? Effect.fail(e) : Effect.die(e)
      }
    })
    const { connection, upstream } = p
    const tap = ctx.tap
    // The candidate is the target (its connection and model).
    const sent = sendAs(candidate, upstream.id, p.body, p, client, sendFailed)
    const res = yield* tap === undefined
      ? sent
      : Effect.tapError(sent, (f) => Effect.sync(() => tap.failed(null, f.error.message, undefined)))
    if (res.status < 200 || res.status >= 300) {
      const { error, info } = yield* readFailure(res, upstream, client, connection)
      if (tap !== undefined) tap.failed(res.status, info.message, info.body)
      return yield* Effect.fail(attemptFailed(error, info))
    }
    const streamed = isStreamed(p, res)
    if (tap !== undefined && streamed) tap.answered(res.status, headerValue(res.headers), undefined)

    if (!streamed) {
      const text = yield* Effect.mapError(wholeText(res, client, connection), (f) => attemptFailed(f.error, f.info))
      if (tap !== undefined) tap.answered(res.status, headerValue(res.headers), text)
      const begun = wholeBegin(call, candidate, p, res, text)
      if (begun instanceof AttemptFailed) return yield* Effect.fail(begun)
      if ("outcome" in begun) return begun.outcome
      const conformed =
        schemaOf(call) === undefined
          ? undefined
          : yield* conform(call, candidate, sealResponse(p.upstream.decodeResponse(begun.json), connection.id), p.passthrough)
      return wholeEnd(call, candidate, p, res, text, begun, conformed)
    }

    if (p.collect) {
      const gather = collectStream(upstream, connection)
      const result = yield* relayFrames(
        res,
        upstream.framing,
        gather.relay,
        DISCARD,
        watchdog,
        ctx.startedAt,
        connection.timeouts?.idleMs,
        ctx.tap?.chunk
      )
      const begun = collectedBegin(call, candidate, p, gather, result)
      if (begun instanceof AttemptFailed) return yield* Effect.fail(begun)
      // Held to the schema the request asked for, if any (docs/structured-outputs.md).
      const conformed = schemaOf(call) === undefined ? undefined : yield* conform(call, candidate, begun.decoded, p.passthrough)
      return collectedEnd(call, candidate, p, res, begun, conformed)
    }
    // A stream held to a schema is checked at its end: the validator is loaded first.
    if (schemaOf(call) !== undefined) yield* Effect.promise(schemaEngines)
    const relayed = makeRelay(call, upstream, client, p.passthrough, originOf(call, connection), connection)
    const result = yield* relayStream(
      ctx,
      res,
      upstream.framing,
      relayed.relay,
      streamType(call, p, res),
      watchdog,
      connection.timeouts?.idleMs
    )
    const ended = streamEnded(result, relayed, res, client)
    return ended instanceof AttemptFailed ? yield* Effect.fail(ended) : ended
  })

  // ------------------------------------------------------------ the common path's driver (callbacks)

  /** Whether `attemptNow` can try `candidate` for `call`: no OAuth token to refresh, no proxy, no schema to hold the answer to. */
  const canAttemptNow = (call: InferenceCall, candidate: Candidate): boolean =>
    schemaOf(call) === undefined && canSendNow(candidate.connection)

  /**
   * `attempt` driven by the HTTP client's callbacks, without an effect: `done` once. Only where
   * `canAttemptNow`. The same steps as `attempt`, in the same order. Each callback's own step is
   * guarded: its throw is the attempt's failure or a defect (as the pipeline's would be). One
   * closure per callback, no helper closures per request: the steps are `makeAttempt`'s own.
   */
  const attemptNow = (
    call: InferenceCall,
    candidate: Candidate,
    options: { readonly probe: boolean },
    done: (result: AttemptResult) => void
  ): void => {
    try {
      const p = prepare(call, candidate, options.probe)
      // The candidate is the target (its connection and model).
      sendNow(candidate, p.upstream.id, p.body, p, call.format, (sent) => {
        try {
          sentNow(call, candidate, p, sent, done)
        } catch (e) {
          threw(e, done)
        }
      })
    } catch (e) {
      threw(e, done)
    }
  }

  /** `attemptNow` once the upstream answered (or the send failed). */
  const sentNow = (call: InferenceCall, candidate: Candidate, p: Prepared, sent: Sent, done: (result: AttemptResult) => void): void => {
    const { ctx, format: client } = call
    const { connection, upstream } = p
    const tap = ctx.tap
    if (sent._tag === "gone") return done(sent)
    if (sent._tag === "failed") {
      if (tap !== undefined) tap.failed(null, sent.error.message, undefined)
      return done({ _tag: "failed", failed: sendFailed(sent.error) })
    }
    const res = sent.response
    if (res.status < 200 || res.status >= 300) {
      return readFailureNow(res, upstream, client, connection, ({ error, info }) => {
        try {
          if (tap !== undefined) tap.failed(res.status, info.message, info.body)
          done({ _tag: "failed", failed: attemptFailed(error, info) })
        } catch (e) {
          threw(e, done)
        }
      })
    }
    const streamed = isStreamed(p, res)
    if (tap !== undefined && streamed) tap.answered(res.status, headerValue(res.headers), undefined)
    if (!streamed) {
      return wholeTextNow(res, client, connection, (read) => {
        try {
          if ("failure" in read) return done({ _tag: "failed", failed: attemptFailed(read.failure.error, read.failure.info) })
          if (tap !== undefined) tap.answered(res.status, headerValue(res.headers), read.text)
          const begun = wholeBegin(call, candidate, p, res, read.text)
          if (begun instanceof AttemptFailed) return done({ _tag: "failed", failed: begun })
          done({
            _tag: "served",
            outcome: "outcome" in begun ? begun.outcome : wholeEnd(call, candidate, p, res, read.text, begun, undefined)
          })
        } catch (e) {
          threw(e, done)
        }
      })
    }
    if (p.collect) {
      const gather = collectStream(upstream, connection)
      relayFramesNow(
        res,
        upstream.framing,
        gather.relay,
        DISCARD,
        watchdog,
        ctx.startedAt,
        connection.timeouts?.idleMs,
        ctx.tap?.chunk,
        (ended) => {
          try {
            if (ended._tag !== "ended") return relayDone(ended, done)
            const begun = collectedBegin(call, candidate, p, gather, ended.outcome)
            if (begun instanceof AttemptFailed) return done({ _tag: "failed", failed: begun })
            done({ _tag: "served", outcome: collectedEnd(call, candidate, p, res, begun, undefined) })
          } catch (e) {
            threw(e, done)
          }
        }
      )
      return
    }
    const relayed = makeRelay(call, upstream, client, p.passthrough, originOf(call, connection), connection)
    relayStreamNow(ctx, res, upstream.framing, relayed.relay, streamType(call, p, res), watchdog, connection.timeouts?.idleMs, (ended) => {
      try {
        if (ended._tag !== "ended") return relayDone(ended, done)
        const result = streamEnded(ended.outcome, relayed, res, client)
        if (result instanceof AttemptFailed) return done({ _tag: "failed", failed: result })
        done({ _tag: "served", outcome: result })
      } catch (e) {
        threw(e, done)
      }
    })
  }

  /**
   * The pipeline's attempt: the callbacks' driver when it can take the candidate (most attempts),
   * else the Effect's. Either way the same steps.
   */
  const attemptEither = (
    call: InferenceCall,
    candidate: Candidate,
    options: { readonly probe: boolean }
  ): Effect.Effect<AttemptOutcome, AttemptFailed> =>
    canAttemptNow(call, candidate)
      ? Effect.async<AttemptOutcome, AttemptFailed>((resume) =>
          attemptNow(call, candidate, options, (r) =>
            resume(
              r._tag === "served"
                ? Effect.succeed(r.outcome)
                : r._tag === "failed"
                  ? Effect.fail(r.failed)
                  : r._tag === "gone"
                    ? // The client left (its fiber is being interrupted anyway), as the Effect's own driver ends then.
                      Effect.interrupt
                    : Effect.die(r.defect)
            )
          )
        )
      : attempt(call, candidate, options)

  return { attempt: attemptEither, attemptNow, canAttemptNow }
}

/**
 * The bytes a whole answer's text was decoded from (`wholeText` decodes `res.bytes` as UTF-8), when
 * encoding the text again gives them back: valid UTF-8 (an invalid sequence was decoded as U+FFFD,
 * which encodes otherwise). A pass-through answer then goes out as the upstream's own bytes, not
 * encoded again (a copy the size of the answer).
 */
const textBytes = (res: UpstreamResponse): Buffer | undefined => (res.bytes !== undefined && isUtf8(res.bytes) ? res.bytes : undefined)

/** A callback's step threw: an AttemptFailed is the attempt's failure, anything else a defect (as the pipeline's would be). */
const threw = (e: unknown, done: (result: AttemptResult) => void): void =>
  done(e instanceof AttemptFailed ? { _tag: "failed", failed: e } : { _tag: "defect", defect: e })

/** Where a pass-through answer came from (a stored Responses answer's origin). */
const originOf = (call: InferenceCall, connection: Connection): Origin => ({
  connectionId: connection.id,
  stored: call.body["store"] !== false
})

/** A relay that did not end with an outcome: the client left, or its own code threw. */
const relayDone = (ended: Exclude<RelayEnd, { readonly _tag: "ended" }>, done: (result: AttemptResult) => void): void =>
  done(ended._tag === "gone" ? ended : { _tag: "defect", defect: ended.defect })
