/**
 * What a native batch says to its provider and how the provider's answers read
 * (docs/files-batches.md, "Native batches"): the one upstream call every step makes, a polled
 * batch's status and counts, and a result line as the gateway's answer.
 */
import * as Effect from "effect/Effect"
import { num, obj, str, tryJson } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import type { CustomCall } from "../../upstream/client/executors.js"
import type { UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"
import type { Connection } from "../../upstream/providers/Connections.js"
import type { InferenceShape } from "../call.js"
import type { BatchStatus } from "./Batches.js"

export type NativeProvider = "openai" | "anthropic"

/** What the gateway keeps of a forwarded batch (`batches.native`, JSON). */
export interface NativeState {
  readonly provider: NativeProvider
  readonly connectionId: string
  /** The model id as the upstream knows it (every line's `model` is set to it). */
  readonly model: string
  /** The model id the lines named (a usage row's `requestedModel`). */
  readonly requestedModel: string
  readonly upstreamId: string | null
  /** OpenAI: the uploaded input file. */
  readonly upstreamInputFileId: string | null
  readonly upstreamStatus: string | null
  readonly upstreamOutputFileId: string | null
  readonly upstreamErrorFileId: string | null
  /** Anthropic: where the results are read. */
  readonly resultsUrl: string | null
  readonly cancelSent: boolean
  /** The upstream's validation errors (OpenAI `failed`). */
  readonly errors: ReadonlyArray<{ code: string; message: string; param: string | null; line: number | null }> | null
}

/** The upstream failed in a way the next step should try again (logged by the runner). */
export class NativeUpstreamError {
  readonly _tag = "NativeUpstreamError"
  constructor(
    readonly message: string,
    /** The upstream's HTTP status, when it answered. */
    readonly status: number | null = null
  ) {}
}

const HEADERS_MS = 30_000

/** One upstream call; a non-2xx answer is read (scrubbed) into the error. */
export type NativeCall = (
  connection: Connection,
  model: string,
  custom: CustomCall,
  whole?: boolean
) => Effect.Effect<UpstreamResponse, NativeUpstreamError>

/**
 * Every upstream call is a `CustomCall` through `Inference.send` (the connection's key, the
 * outbound URL policy, error answers scrubbed by `readFailure`). Outside the guarded attempt
 * (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a native batch lives at the
 * provider that holds it, so its upload, polls and results are pinned to that connection.
 */
export const makeNativeCall =
  (inference: InferenceShape): NativeCall =>
  (connection, model, custom, whole = true) =>
    Effect.gen(function* () {
      const res = yield* inference
        .send(
          { connection, model },
          connection.format,
          {},
          { stream: false, readWhole: whole, custom, headersTimeoutMs: HEADERS_MS },
          openAiChat
        )
        .pipe(Effect.mapError((e) => new NativeUpstreamError(e.message)))
      if (res.status < 200 || res.status >= 300) {
        const { info } = yield* inference.readFailure(res, FORMATS[connection.format], openAiChat, connection)
        return yield* Effect.fail(
          new NativeUpstreamError(
            `${custom.method ?? "POST"} ${custom.path}: HTTP ${res.status}: ${info.message}`.slice(0, 500),
            res.status
          )
        )
      }
      return res
    })

/** A whole answer's JSON object (empty when it is not one). */
export const jsonOf = (res: UpstreamResponse) => obj(tryJson(res.bytes?.toString("utf8") ?? "")) ?? {}

/** What a poll learnt of the upstream's batch. */
export interface Polled {
  readonly state: NativeState
  readonly counts: { total: number; completed: number; failed: number } | null
  /** The upstream is done: how the batch ends (after its results are read). */
  readonly ended: "completed" | "expired" | "cancelled" | "failed" | null
}

/** An Anthropic message batch (`GET /v1/messages/batches/{id}`). */
export const polledAnthropic = (state: NativeState, j: Record<string, unknown>): Polled => {
  const status = str(j["processing_status"]) ?? "in_progress"
  const rc = obj(j["request_counts"]) ?? {}
  const n = (k: string) => num(rc[k]) ?? 0
  const counts = {
    total: n("processing") + n("succeeded") + n("errored") + n("canceled") + n("expired"),
    completed: n("succeeded"),
    failed: n("errored") + n("canceled") + n("expired")
  }
  const ended = status !== "ended" ? null : state.cancelSent || n("canceled") > 0 ? "cancelled" : n("expired") > 0 ? "expired" : "completed"
  return { state: { ...state, upstreamStatus: status, resultsUrl: str(j["results_url"]) ?? state.resultsUrl }, counts, ended }
}

/** An OpenAI batch (`GET /batches/{id}`). */
export const polledOpenAi = (state: NativeState, j: Record<string, unknown>): Polled => {
  const status = str(j["status"]) ?? "in_progress"
  const rc = obj(j["request_counts"])
  const counts = rc ? { total: num(rc["total"]) ?? 0, completed: num(rc["completed"]) ?? 0, failed: num(rc["failed"]) ?? 0 } : null
  const errors = (Array.isArray(obj(j["errors"])?.["data"]) ? (obj(j["errors"])!["data"] as Array<unknown>) : []).map((e) => {
    const o = obj(e) ?? {}
    return {
      code: str(o["code"]) ?? "upstream_error",
      message: str(o["message"]) ?? "the upstream refused the batch",
      param: str(o["param"]) ?? null,
      line: num(o["line"]) ?? null
    }
  })
  const ended =
    status === "completed"
      ? "completed"
      : status === "expired"
        ? "expired"
        : status === "cancelled"
          ? "cancelled"
          : status === "failed"
            ? "failed"
            : null
  return {
    state: {
      ...state,
      upstreamStatus: status,
      upstreamOutputFileId: str(j["output_file_id"]) ?? null,
      upstreamErrorFileId: str(j["error_file_id"]) ?? null,
      errors: errors.length > 0 ? errors : state.errors
    },
    counts,
    ended
  }
}

/** The client-facing status while the upstream works. */
export const runningStatus = (state: NativeState, current: BatchStatus, ended: Polled["ended"]): BatchStatus =>
  current === "cancelling" || state.cancelSent || state.upstreamStatus === "cancelling" || state.upstreamStatus === "canceling"
    ? "cancelling"
    : state.upstreamStatus === "finalizing" || (ended !== null && ended !== "failed")
      ? "finalizing"
      : "in_progress"

/** A result line as the gateway records it. */
export interface Answer {
  readonly statusCode: number
  readonly body: unknown
  readonly error: unknown
  readonly usage: { input: number | null; output: number | null; cached: number | null }
}

/** The line number of a `line-<n>` custom id. */
export const lineOf = (customId: unknown): number | undefined => {
  const m = /^line-(\d+)$/.exec(typeof customId === "string" ? customId : "")
  return m ? Number(m[1]) : undefined
}

/** An OpenAI output or error file line; undefined for a line that never ran (left to the gateway's own words). */
export const openAiAnswer = (o: Record<string, unknown>): Answer | undefined => {
  const response = obj(o["response"])
  if (!response) {
    const code = str(obj(o["error"])?.["code"])
    // Never run (the upstream's window passed or it was cancelled): left unanswered, so the
    // error file says so in the gateway's words (batch_expired / batch_cancelled).
    if (code === "batch_expired" || code === "batch_cancelled") return undefined
    return {
      statusCode: 502,
      body: null,
      error: o["error"] ?? { code: "upstream_error", message: "the upstream answered no response for this line" },
      usage: { input: null, output: null, cached: null }
    }
  }
  const body = response["body"]
  const u = obj(obj(body)?.["usage"]) ?? {}
  const details = obj(u["prompt_tokens_details"]) ?? obj(u["input_tokens_details"]) ?? {}
  return {
    statusCode: num(response["status_code"]) ?? 200,
    body,
    error: null,
    usage: {
      input: num(u["prompt_tokens"]) ?? num(u["input_tokens"]) ?? null,
      output: num(u["completion_tokens"]) ?? num(u["output_tokens"]) ?? null,
      cached: num(details["cached_tokens"]) ?? null
    }
  }
}

/** The HTTP status of an Anthropic error type (a batch result carries the type only). */
const ANTHROPIC_ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529
}

/** An Anthropic results line; undefined for a request cancelled or expired before it ran. */
export const anthropicAnswer = (o: Record<string, unknown>): Answer | undefined => {
  const result = obj(o["result"]) ?? {}
  const type = str(result["type"])
  if (type === "succeeded") {
    const u = obj(obj(result["message"])?.["usage"]) ?? {}
    return {
      statusCode: 200,
      body: result["message"],
      error: null,
      usage: {
        input: num(u["input_tokens"]) ?? null,
        output: num(u["output_tokens"]) ?? null,
        cached: num(u["cache_read_input_tokens"]) ?? null
      }
    }
  }
  if (type === "errored") {
    const e = obj(result["error"]) ?? {}
    const inner = obj(e["error"]) ?? e
    return {
      statusCode: ANTHROPIC_ERROR_STATUS[str(inner["type"]) ?? ""] ?? 500,
      body: e,
      error: null,
      usage: { input: null, output: null, cached: null }
    }
  }
  return undefined
}
