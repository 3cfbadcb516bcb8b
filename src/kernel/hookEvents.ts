/**
 * What a lifecycle hook sees and answers (docs/ARCHITECTURE.md, "Seam 2"): the events in the
 * order a request meets them, what each carries, the request view, the verdicts a handler may
 * give and their helpers (`blockRequest`, `modifyBody`, `addMetadata`). Types and three small
 * functions only: the table and the firing are in hooks.ts, which re-exports all of this, so
 * later plugins and guardrails depend on this contract alone.
 */
import type * as Effect from "effect/Effect"
import type { FormatId, Usage } from "../domain/canonical.js"
import type { Candidate } from "../services/routing/types.js"
import type { RequestContext } from "./request.js"
import type { FailureInfo } from "../services/resilience/types.js"
import type { RoutePlan } from "../services/routing/plan.js"
import type { UsageRecord } from "../services/usage/Usage.js"

/** A request's headers, lower-cased names, as the transport received them (node's `IncomingHttpHeaders` is one). */
export type RequestHeaders = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** A hook's priority when it names none (spec document 3, "Plugin default priority"). */
export const DEFAULT_PRIORITY = 100

/** The events, in the order a request meets them. */
export const HOOK_EVENTS = [
  "onRequest",
  "onQuotaExhaust",
  "onComboResolve",
  "onModelSelect",
  "onAttemptStart",
  "onProviderError",
  "onRateLimit",
  "onStreamStart",
  "onFrame",
  "onStreamEnd",
  "onResponse",
  "onError"
] as const

export type HookEvent = (typeof HOOK_EVENTS)[number]

// ---------------------------------------------------------------- what each event carries

/** A connection and model the request may go to (`key` is `<connection>/<model>`, as in X-Gateway headers and logs). */
export interface HookTarget {
  readonly key: string
  readonly provider: string
  readonly connection: string
  readonly model: string
}

/** A request the pipeline takes (chat completions, completions, responses, messages, generateContent, api/chat, api/generate), before
 * anything else. */
export interface RequestEvent {
  /** Usage label: `chat.completions`, `messages`, `responses`, `generateContent`, `api.chat`, ... */
  readonly endpoint: string
  /** The client's wire format. */
  readonly format: FormatId
  /** The model id as the client asked for it. */
  readonly model: string
  readonly stream: boolean
  /** The client's body, as earlier handlers left it. */
  readonly body: Readonly<Record<string, unknown>>
}

/** The API key's budget is spent or one of its token limits reached (observes only). */
export interface QuotaExhaustEvent {
  readonly kind: "budget" | "token_limit"
  /** The budget's window (`daily`, `weekly`, `monthly`...); null for a token limit. */
  readonly window: string | null
  readonly spentUsd: number | null
  readonly limitUsd: number | null
  readonly retryAfterMs: number | null
  /** `refused`: the client gets 429; `emergency_fallback`: the request goes on to `fallbackModel`. */
  readonly action: "refused" | "emergency_fallback"
  readonly fallbackModel: string | null
  readonly message: string
}

/** A combo, auto id or quota-share group resolved into ordered candidates (not fired for a plain model id). */
export interface ComboResolveEvent {
  /** The id routed (the emergency model when the budget was spent). */
  readonly model: string
  readonly route: "combo" | "auto" | "quota-share"
  /** The combo name, auto id or quota-share group. */
  readonly scope: string
  readonly strategy: string
  /** Admissible candidates, in the order they will be tried. */
  readonly candidates: ReadonlyArray<HookTarget>
  /** Candidates left out, and why (`circuit_open`, `cooldown`, `token_limit`, ...). */
  readonly blocked: ReadonlyArray<{ readonly target: HookTarget; readonly reason: string }>
  /** A fusion plan: a panel answers in parallel, then a judge. */
  readonly fusion: boolean
}

/** The model id resolved to where the request goes (every pipeline request, after onComboResolve). */
export interface ModelSelectEvent {
  readonly model: string
  /** The client's wire format and the endpoint's usage label (as in onRequest): how `body` reads. */
  readonly format: FormatId
  readonly endpoint: string
  readonly route: RoutePlan["kind"]
  readonly strategy: string
  /** The first candidate (undefined when every candidate is blocked). */
  readonly target: HookTarget | undefined
  readonly candidates: ReadonlyArray<HookTarget>
  /** The body as onRequest left it; a handler may replace it for what goes upstream. */
  readonly body: Readonly<Record<string, unknown>>
}

/** One upstream attempt is about to be sent (after admission; fallbacks fire it again). */
export interface AttemptStartEvent {
  /** 1 for the first attempt of the request. */
  readonly attempt: number
  readonly target: HookTarget
  /** A probe of a connection or provider that was failing (shorter timeout). */
  readonly probe: boolean
}

/** An attempt failed because of what the upstream did (error status, error in a 200, timeout, refused or cut connection, stall). */
export interface ProviderErrorEvent {
  readonly attempt: number
  readonly target: HookTarget
  /** The upstream's status (504 for a timeout or stall, 502 for a refused or cut connection). */
  readonly status: number
  readonly kind: FailureInfo["kind"]
  /** The resilience layer's reading: `rate_limited`, `quota_exhausted`, `server_error`, `overloaded`, `timeout`, ... */
  readonly reason: string
  /** Whether another target may be tried (nothing reached the client yet and the failure is not the request's own). */
  readonly retryable: boolean
  readonly message: string
  /** The answer had begun (a stream broke after its first content): the client got the error in-stream. */
  readonly answered: boolean
}

/** The head of a streamed answer went out (also when X-Gateway-Progress opened the stream early). */
export interface StreamStartEvent {
  readonly status: number
  readonly headers: Readonly<Record<string, string | number>>
}

/**
 * A piece of a streamed answer went out: one write, whole events of the client's stream format
 * (what one upstream chunk produced; a progress comment).
 */
export interface FrameEvent {
  readonly text: string
  /** A binary answer's piece (media content relayed as it arrives); `text` is then empty. */
  readonly bytes?: Uint8Array
}

/** A streamed answer ended: `text` is what went out with the end (often empty); `error` when it ended with an error event. */
export interface StreamEndEvent {
  readonly text: string
  readonly error: string | null
}

/** The answer as written, and the usage row the request wrote (pipeline requests). */
interface Ending {
  /** The status the client got (200 for a stream, also one that ended in an in-stream error; 499 when the client left first). */
  readonly status: number
  /** The answer's headers (those of the stream's head for a streamed answer); undefined when nothing was written. */
  readonly headers: Readonly<Record<string, string | number>> | undefined
  /** A whole answer's bytes as sent; undefined for a streamed answer (its frames went by onFrame). */
  readonly body: string | Buffer | undefined
  readonly streamed: boolean
  /** The usage row of a pipeline request, written by the built-in hook that runs first; undefined for other requests. */
  readonly usage: UsageRecord | undefined
}

/** The request ended with its answer (every request of the inference plane, fired once, after the answer was written). */
export interface ResponseEvent extends Ending {}

/** The request ended with an error answer (in the client's format), or the client left before its answer (status 499). */
export interface ErrorEvent extends Ending {
  /** The error answered; undefined when the client left. */
  readonly error: { readonly status: number; readonly code: string | null; readonly message: string } | undefined
  /** The hook whose handler blocked the request, if one did. */
  readonly blockedBy: string | undefined
}

export interface HookEvents {
  readonly onRequest: RequestEvent
  readonly onQuotaExhaust: QuotaExhaustEvent
  readonly onComboResolve: ComboResolveEvent
  readonly onModelSelect: ModelSelectEvent
  readonly onAttemptStart: AttemptStartEvent
  readonly onProviderError: ProviderErrorEvent
  readonly onRateLimit: ProviderErrorEvent
  readonly onStreamStart: StreamStartEvent
  readonly onFrame: FrameEvent
  readonly onStreamEnd: StreamEndEvent
  readonly onResponse: ResponseEvent
  readonly onError: ErrorEvent
}

// ---------------------------------------------------------------- what a handler sees and answers

/** The request as hooks see it; one per request, created when a handler first runs. */
export interface HookRequest {
  readonly requestId: string
  /** When the request arrived (epoch ms). */
  readonly timestamp: number
  readonly method: string
  readonly path: string
  readonly headers: RequestHeaders
  /** The gateway API key that authenticated the request, if one did. */
  readonly apiKeyId: string | null
  /** What hooks attached to this request (mutable; `addMetadata` merges into it). Not written to the usage row or headers. */
  readonly metadata: Record<string, unknown>
}

/** A hook's own answer to the client (spec document 3, `blockRequest`). */
export interface BlockAnswer {
  /** Default 403. */
  readonly status?: number
  /** The error code the client reads (default `request_blocked`). */
  readonly code?: string
  /** Sent as JSON as it is; without it the answer is an error in the client's own format carrying `message`. */
  readonly body?: unknown
  readonly message?: string
  readonly headers?: Readonly<Record<string, string>>
}

/**
 * A rewrite of what the client gets (output guardrails), given at onRequest: io.ts's writers run
 * it just before the bytes go out; onFrame, onResponse and the others then see what was sent.
 * Several compose in the order of their hooks. Each function is optional and synchronous.
 */
export interface AnswerRewrite {
  /** A whole text answer (JSON, error answers included): what the client gets instead. */
  readonly whole?: (answer: {
    readonly status: number
    readonly headers: Readonly<Record<string, string | number>>
    readonly body: string
  }) => {
    readonly status: number
    readonly headers: Readonly<Record<string, string | number>>
    readonly body: string
  }
  /** The head of a streamed answer. */
  readonly head?: (headers: Readonly<Record<string, string | number>>) => Readonly<Record<string, string | number>>
  /** One text write of a streamed answer (whole events of the client's stream format): what goes out now ("" holds it all back). */
  readonly frame?: (text: string) => string
  /** The stream's end with its last text: what goes out with the end (what was held back, flushed), and the error it ends with. */
  readonly end?: (text: string, error: string | null) => { readonly text: string; readonly error: string | null }
}

/** What a handler may answer; each field is honoured by the events that allow it, ignored by the others. */
export interface HookVerdict {
  /** Replaces the request body (onRequest, onModelSelect). */
  readonly body?: Record<string, unknown>
  /** Ends the request with this answer (onRequest, onComboResolve, onModelSelect, onAttemptStart); later handlers do not run. */
  readonly block?: BlockAnswer
  /** Merged into the request's metadata (any event). */
  readonly metadata?: Readonly<Record<string, unknown>>
  /** Rewrites the answer as it is written (onRequest). */
  readonly rewrite?: AnswerRewrite
  /** Response headers added to the answer, however it ends (onRequest, onModelSelect): a policy's or guardrail's warning. */
  readonly headers?: Readonly<Record<string, string>>
}

export type HookReturn = HookVerdict | void | undefined

export type HookHandler<E> = (event: E, request: HookRequest) => HookReturn | Effect.Effect<HookReturn, unknown>

export type RequestHook = {
  /** Names the hook in logs and in `blockedBy`. */
  readonly name: string
  /** Lower runs first; equal priorities run in registration order. Default 100. */
  readonly priority?: number
  /**
   * A guard (a guardrail, a policy): when one of its handlers throws or fails, the request is
   * refused (503 `guardrail_unavailable`, naming it) instead of going on without it. Other hooks
   * that fail are logged and skipped.
   */
  readonly failClosed?: boolean
  /**
   * Whether this hook's onRequest or onAttemptStart may act on a request for `model` from
   * `apiKeyId`, answered from memory. False lets the request take the common path (which runs no
   * onRequest hook); absent, every request may be acted on.
   */
  readonly wants?: (model: string, apiKeyId: string | null) => boolean
} & { readonly [K in HookEvent]?: HookHandler<HookEvents[K]> }

/**
 * What a fail-closed hook throws to say which of its parts failed (one guardrail of several, one
 * policy of many); the refusal names `part`.
 */
export class GuardFailure extends Error {
  constructor(
    readonly part: string,
    readonly reason: unknown
  ) {
    super(`${part} failed: ${reason instanceof Error ? reason.message : String(reason)}`)
    this.name = "GuardFailure"
  }
}

/** Blocks the request with `answer` (status default 403). */
export const blockRequest = (answer: BlockAnswer = {}): HookVerdict => ({ block: answer })
/** Replaces the request body. */
export const modifyBody = (body: Record<string, unknown>): HookVerdict => ({ body })
/** Attaches metadata to the request. */
export const addMetadata = (metadata: Readonly<Record<string, unknown>>): HookVerdict => ({ metadata })

// ---------------------------------------------------------------- listeners

/**
 * A listener of the request lifecycle: it sees, never changes or blocks, and is called
 * synchronously at each point (so it must not wait on anything). Observability (metrics and
 * traces) and the webhooks' request events are listeners; the traffic inspector and plugins that
 * only observe will be. Each method is optional: a point no listener takes costs a check.
 */
export interface LifecycleListener {
  readonly name: string
  /** The request arrived, before authentication (the request's span begins here). */
  readonly begin?: (ctx: RequestContext) => void
  /** Its route plan is known (a combo's strategy, a direct target). */
  readonly routed?: (ctx: RequestContext, plan: RoutePlan) => void
  /** An attempt on one candidate begins; what this answers is handed to `attemptEnd` (a span). */
  readonly attemptStart?: (ctx: RequestContext, attempt: AttemptStart) => unknown
  /** The attempt ended: answered, failed, or cut. */
  readonly attemptEnd?: (ctx: RequestContext, started: unknown, end: AttemptEnd) => void
  /** The request ended: its status (499: the client went away) and error; its usage row, if any, is on ctx. */
  readonly end?: (ctx: RequestContext, status: number, error?: RequestFailure) => void
  /**
   * A request was settled by accounting (its spend and tokens counted): every request that wrote
   * a usage row, and each line of a provider-run batch, which has no request of its own here. The
   * webhooks' `request.completed` and `request.failed` come from this.
   */
  readonly settled?: (s: Settlement) => void
}

/** What one finished request settles: spend for budgets, tokens for limits, the request event. */
export interface Settlement {
  readonly requestId: string
  readonly apiKeyId: string | null
  readonly provider: string | null
  readonly model: string | null
  readonly requestedModel: string
  /** The connection's name (token limits written as `<connection>/<model>`). */
  readonly connection?: string | null
  readonly status: number
  readonly usage: Partial<Usage> | undefined
  readonly costUsd: number
  readonly error: string | null
}

/** What the guarded attempt tells listeners when an attempt starts. */
export interface AttemptStart {
  /** The usage label of the request (`chat.completions`, `embeddings`, ...). */
  readonly endpoint: string | undefined
  readonly candidate: Candidate
  /** 1 for the first. */
  readonly attempt: number
  /** A half-open breaker's probe. */
  readonly probe: boolean
}

/** What the guarded attempt tells listeners when an attempt ends. */
export interface AttemptEnd {
  /** The usage label of the request (`chat.completions`, `embeddings`, ...). */
  readonly endpoint: string | undefined
  readonly candidate: Candidate
  readonly latencyMs: number
  /** Empty when it answered; else the upstream's status or what went wrong (`timeout`, `cut`, ...). */
  readonly errorType: string
  readonly usage: Partial<Usage> | undefined
  readonly ttftMs: number | null
  /** The answer's cost: computed only when a listener took the attempt's start (spans carry it). */
  readonly costUsd?: number
  readonly message?: string
}

/** Why a request failed, as listeners see it. */
export interface RequestFailure {
  readonly code: string | null
  readonly message: string
}
