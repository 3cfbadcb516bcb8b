/**
 * What a route hands the pipeline (`InferenceCall`) and what the pipeline offers routes and the
 * WebSocket transport (`InferenceShape`). Types only, so that no module imports the pipeline
 * (`Inference.ts`) for a type: it imports its parts, none of them import it.
 */
import type * as Effect from "effect/Effect"
import type { CanonicalRequest, CanonicalResponse, FormatId } from "../domain/canonical.js"
import type { StreamEncoder, WireFormat } from "../upstream/formats/format.js"
import type { Connection, ResolvedTarget } from "../upstream/providers/Connections.js"
import type { FailureInfo } from "../services/resilience/types.js"
import type { RoutePlan } from "../services/routing/plan.js"
import type { CustomCall } from "../upstream/client/executors.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import type { AttemptOutcome, Tracking } from "../kernel/attempts.js"
import type { InferenceError } from "../kernel/errors.js"
import type { CommonPathEnds, CommonPathRefusal } from "./commonPath.js"
import type { AttemptRequest, TryCandidate } from "./fallback.js"
import type { HttpRequestContext } from "./io.js"
import type { Origin } from "./ResponseStore.js"
import type { EventFraming } from "./stream.js"

/** Tokens spent on an answer besides its own call (a fusion panel). */
export interface ExtraTokens {
  readonly input: number
  readonly output: number
}

/** One inference request as a route hands it over. */
export interface InferenceCall {
  readonly ctx: HttpRequestContext
  /** The client's wire format. */
  readonly format: WireFormat
  /** The client's body, parsed (Gemini routes add `model` from the path). */
  readonly body: Record<string, unknown>
  /** The model id as the client asked for it. */
  readonly model: string
  readonly stream: boolean
  /** Usage label: `chat.completions`, `messages`, `responses`, `generateContent`, `api.chat`, ... */
  readonly endpoint: string
  /** Shapes the answer (OpenAI `stream_options`, Responses echo fields, Ollama generate mode). */
  readonly encodeOptions?: Readonly<Record<string, unknown>>
  /** The request in canonical form, when the route decodes it itself (`/api/generate`, `/v1/completions`). */
  readonly decode?: (body: Record<string, unknown>) => CanonicalRequest
  /** The answer in the client's shape, when the route's shape differs from its format's default. */
  readonly encodeResponse?: (res: CanonicalResponse) => unknown
  readonly streamEncoder?: () => StreamEncoder
  /**
   * The client reads the stream as one JSON array written as it grows (Gemini without
   * `alt=sse`): `application/json`, each chunk an element. `streamEncoder` then frames so too.
   */
  readonly jsonArrayStream?: boolean
  /**
   * The client takes each passed-through event's data on its own (the WebSocket transport: one
   * message per event), framed so instead of as SSE.
   */
  readonly eventFraming?: () => EventFraming
  /** Reasoning off (the no-thinking alias). */
  readonly noThinking?: boolean
  /** Whether the route may pass the body through unchanged when the upstream speaks its format. */
  readonly passthrough?: boolean
  /** Cost already spent on this answer elsewhere (a fusion panel), added to its cost header. */
  readonly extraCostUsd?: number
  /** Tokens already spent on this answer elsewhere (a fusion panel), added to its token headers. */
  readonly extraTokens?: ExtraTokens
  /** A Responses answer completed; `origin` is set when the upstream produced it itself (pass-through). */
  readonly onCompleted?: (result: { readonly id: string; readonly output: ReadonlyArray<unknown>; readonly origin?: Origin }) => void
}

export interface SendOptions {
  readonly stream: boolean
  readonly op?: "generate" | "count_tokens" | "embed"
  /** A media call, job poll or download: its path, method and body instead of the family's (`body` and `op` are then unused). */
  readonly custom?: CustomCall
  readonly forward?: Readonly<Record<string, string>>
  /** Overrides the headers timeout (probes after an exclusion use a shorter one). */
  readonly headersTimeoutMs?: number
  /** Read the answer whole before answering (a non-streamed call): see UpstreamRequest.readWhole. */
  readonly readWhole?: boolean
  /** Abort when the client goes away rather than on interruption: see UpstreamRequest.abortWhen. */
  readonly abortWhen?: (abort: () => void) => () => void
  /** Told the request exactly as it goes out (its URL and body: the traffic inspector's tap), before it is sent. */
  readonly onPrepared?: (prepared: { readonly url: string; readonly body: string }) => void
}

export interface InferenceShape {
  /** Routes, translates and answers one request, falling back to the next target on retryable failures. */
  readonly run: (call: InferenceCall) => Effect.Effect<void, InferenceError>
  /**
   * `run` without a fiber, for the requests the common path takes (src/inference/commonPath.ts):
   * answers why it does not (nothing was done: `run` it), or undefined when it took it; `ends`
   * is then called once, `done` when the request is answered and its usage row queued, `handoff`
   * with the Effect that finishes it when it stopped being common.
   */
  readonly runNow: (call: InferenceCall, ends: CommonPathEnds) => CommonPathRefusal | undefined
  /** Resolves a model id to the connection the router would try first, as a 404 in the client's terms when it cannot. */
  readonly resolve: (model: string, format: WireFormat) => Effect.Effect<ResolvedTarget, InferenceError>
  /**
   * The router's plan for a model id (candidates in order, the blocked ones, probes), refused in
   * the client's terms (400, 404) when the id cannot be served at all.
   */
  readonly plan: (model: string, format: WireFormat) => Effect.Effect<RoutePlan, InferenceError>
  /**
   * The guarded attempt (src/inference/fallback.ts): `attempt` against the plan's candidates in
   * order, with admission, breakers, cooldowns, token limits, the half-open probe gate, what each
   * outcome tells the resilience layer and the router, and fallback on retryable failures while
   * nothing reached the client. Every upstream call goes through it.
   */
  readonly guarded: <R extends AttemptRequest, A extends AttemptOutcome>(
    request: R,
    plan: RoutePlan,
    track: Tracking,
    attempt: TryCandidate<R, A>
  ) => Effect.Effect<A, InferenceError>
  /** Sends one prepared request to a connection, checking the outbound URL policy first. */
  readonly send: (
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat
  ) => Effect.Effect<UpstreamResponse, InferenceError>
  /**
   * An upstream error answer, read: rendered for the client (scrubbed of the connection's
   * secrets), and described for the resilience layer.
   */
  readonly readFailure: (
    res: UpstreamResponse,
    upstream: WireFormat,
    client: WireFormat,
    connection: Connection
  ) => Effect.Effect<{ readonly error: InferenceError; readonly info: FailureInfo }>
  /**
   * The request will write a usage row for `endpoint`: written ahead while it runs, so a crash
   * does not lose it (src/services/usage/InFlight.ts). Answers the function that ends it (for an HTTP
   * request the server's exit handler does).
   */
  readonly track: (ctx: HttpRequestContext, endpoint: string) => () => void
  /** A successful answer's body, read whole under the size limit; one that could not be is the target's failure. */
  readonly wholeText: (
    res: UpstreamResponse,
    client: WireFormat,
    connection: Connection
  ) => Effect.Effect<string, { readonly error: InferenceError; readonly info: FailureInfo }>
}
