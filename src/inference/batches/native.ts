/**
 * Native batches (docs/files-batches.md, "Native batches"): a batch whose lines all target one
 * model served by an OpenAI or Anthropic connection may be forwarded whole to that provider's
 * own batch API, for its batch discount, instead of being run line by line by the gateway.
 *
 * The client sees the same `/v1/batches` object: the gateway's batch id, its status mapped from
 * the upstream's, the upstream's request counts while it runs, and the output and error files
 * stored through `Files` (OpenAI's batch output line format, whatever the upstream) when it ends.
 * The gateway validates the lines as for any batch, then:
 *
 * - OpenAI (`openai`, `openai-compatible`): the lines, their `model` set to the upstream's id and
 *   their `custom_id` to `line-<n>`, uploaded to `POST {base}/files` (purpose `batch`), then
 *   `POST {base}/batches`; polled with `GET {base}/batches/{id}`; results from
 *   `GET {base}/files/{output_file_id|error_file_id}/content`.
 * - Anthropic: `POST /v1/messages/batches` `{requests: [{custom_id: "line-<n>", params}]}`;
 *   polled with `GET /v1/messages/batches/{id}`; results from its `results_url` (JSONL of
 *   `{custom_id, result: {type, message | error}}`), translated to OpenAI's output lines.
 *
 * Every upstream call is a `CustomCall` through `Inference.send` (the connection's key, the
 * outbound URL policy, error answers scrubbed by `readFailure`). The BatchRunner's sweep calls
 * `step` for each active native batch (at most every GATEWAY_NATIVE_BATCH_POLL_MS per batch);
 * `GET /v1/batches/{id}` calls `refresh` (at most once a second per batch). Each answered line is
 * written once (the same conditional UPDATE as a gateway-run line) and, only then, its usage
 * row: request id `<batch id>_<line>`, the batch owner's key, priced at the model's prices times
 * NATIVE_BATCH_PRICE_FACTOR.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as readline from "node:readline"
import { Accounting } from "../../services/accounting/Accounting.js"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { Files } from "../files/Files.js"
import { num, obj, str, tryJson } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import { multipartBody } from "../../platform/http/multipart.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import { firstOf } from "../fallback.js"
import { Inference } from "../pipeline.js"
import { type Connection, Connections } from "../../upstream/providers/Connections.js"
import { rowsChanged } from "../../platform/store/dialect.js"
import type { CustomCall } from "../../upstream/client/executors.js"
import type { UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"
import { Usage } from "../../services/usage/Usage.js"
import type { Batch, BatchStatus } from "./Batches.js"

/**
 * The price of a native batch line relative to the same request made synchronously: OpenAI's
 * Batch API and Anthropic's Message Batches API both charge 50% of the standard prices.
 */
export const NATIVE_BATCH_PRICE_FACTOR = 0.5

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

/** The OpenAI batch endpoints an OpenAI-family upstream runs natively. */
const OPENAI_ENDPOINTS = ["/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions"]
const OPENAI_PROVIDERS = ["openai", "openai-compatible"]
const ENDPOINT_NAMES: Record<string, string> = {
  "/v1/chat/completions": "chat.completions",
  "/v1/responses": "responses",
  "/v1/embeddings": "embeddings",
  "/v1/messages": "messages",
  "/v1/completions": "completions"
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

const HEADERS_MS = 30_000

/** Why a batch cannot go native: a 400 naming it (the client asked for native explicitly). */
const unavailable = (why: string) => badRequest(`this batch cannot be forwarded to a native batch API: ${why}`, "metadata.gateway_mode", "native_batch_unavailable")

/** The upstream failed in a way the next step should try again (logged by the runner). */
export class NativeUpstreamError {
  readonly _tag = "NativeUpstreamError"
  constructor(
    readonly message: string,
    /** The upstream's HTTP status, when it answered. */
    readonly status: number | null = null
  ) {}
}

export type Finish = (b: Batch, status: "completed" | "expired" | "cancelled") => Effect.Effect<void, unknown>

export interface NativeBatchesShape {
  /**
   * Whether the input file can go native, and to which upstream: every line targets the same
   * model id, which resolves directly (no combo, auto or quota-share id) to an OpenAI-family
   * connection (endpoint chat, responses, embeddings or completions) or an Anthropic one
   * (endpoint `/v1/messages`). A 400 naming why not.
   */
  readonly plan: (owner: string, inputFileId: string, endpoint: string) => Effect.Effect<NativeState, InferenceError>
  /** One step of the runner: submit, poll, or read the results and end the batch through `finish`. */
  readonly step: (b: Batch, finish: Finish) => Effect.Effect<void, unknown>
  /** A GET's poll: the upstream's status and counts, at most once a second per batch; failures ignored. */
  readonly refresh: (b: Batch) => Effect.Effect<void>
  /** Forwards a cancel (once); a failure is tried again by the runner's next step. */
  readonly forwardCancel: (b: Batch) => Effect.Effect<void>
}

export class NativeBatches extends Context.Tag("gateway/NativeBatches")<NativeBatches, NativeBatchesShape>() {
  static readonly layer = Layer.effect(
    NativeBatches,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const files = yield* Files
      const inference = yield* Inference
      const connections = yield* Connections
      const accounting = yield* Accounting
      const usage = yield* Usage
      const pollMs = yield* positiveInteger("GATEWAY_NATIVE_BATCH_POLL_MS", "milliseconds", 30_000)
      const polledAt = new Map<string, number>()
      /** Batches with an upstream call under way (a GET's poll and the runner's step do not overlap). */
      const busy = new Set<string>()

      const save = (id: string, state: NativeState) => sql`UPDATE batches SET native = ${JSON.stringify(state)} WHERE id = ${id}`.pipe(Effect.orDie)
      const load = (id: string) =>
        Effect.map(sql<{ status: string; native: string | null }>`SELECT status, native FROM batches WHERE id = ${id}`.pipe(Effect.orDie), (rows) =>
          rows[0]?.native ? { status: rows[0].status as BatchStatus, state: JSON.parse(rows[0].native) as NativeState } : undefined
        )

      const connectionOf = (state: NativeState) =>
        Effect.mapError(connections.get(state.connectionId), () => new NativeUpstreamError(`the connection of this native batch (${state.connectionId}) no longer exists`))

      // Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a native batch lives at the
      // provider that holds it: its upload, polls and results are pinned to that connection.
      /** One upstream call; a non-2xx answer is read (scrubbed) into the error. */
      const call = (connection: Connection, model: string, custom: CustomCall, whole = true) =>
        Effect.gen(function* () {
          const res = yield* inference
            .send({ connection, model }, connection.format, {}, { stream: false, readWhole: whole, custom, headersTimeoutMs: HEADERS_MS }, openAiChat)
            .pipe(Effect.mapError((e) => new NativeUpstreamError(e.message)))
          if (res.status < 200 || res.status >= 300) {
            const { info } = yield* inference.readFailure(res, FORMATS[connection.format], openAiChat, connection)
            return yield* Effect.fail(new NativeUpstreamError(`${custom.method ?? "POST"} ${custom.path}: HTTP ${res.status}: ${info.message}`.slice(0, 500), res.status))
          }
          return res
        })
      const json = (res: UpstreamResponse) => obj(tryJson(res.bytes?.toString("utf8") ?? "")) ?? {}

      // ------------------------------------------------------------ plan

      const plan: NativeBatchesShape["plan"] = (owner, inputFileId, endpoint) =>
        Effect.gen(function* () {
          const input = yield* files.content(owner, inputFileId)
          if (!input)
            return yield* Effect.fail(new InferenceError({ status: 404, kind: "not_found", code: "not_found", message: `no file '${inputFileId}'`, param: "input_file_id" }))
          const models = new Set<string>()
          const lines = readline.createInterface({ input: input.stream, crlfDelay: Infinity })
          yield* Effect.promise(async () => {
            for await (const text of lines) {
              if (text.trim() === "") continue
              // Malformed lines are the validator's to report (the batch then fails as any batch).
              const model = str(obj(obj(tryJson(text))?.["body"])?.["model"])
              if (model !== undefined) models.add(model)
              if (models.size > 1) break
            }
          }).pipe(Effect.ensuring(Effect.sync(() => (lines.close(), input.stream.destroy()))))
          if (models.size === 0) return yield* unavailable("no line names a model")
          if (models.size > 1)
            return yield* unavailable(
              `the lines name more than one model (${[...models]
                .slice(0, 2)
                .map((m) => `'${m}'`)
                .join(", ")}); a native batch targets one model`
            )
          const model = [...models][0]!
          const routed = yield* inference.plan(model, openAiChat)
          if (routed.kind !== "direct") return yield* unavailable(`'${model}' is a ${routed.kind} id; a native batch needs one provider model`)
          const first = firstOf(routed)
          if (!first) return yield* unavailable(`no connection serves '${model}'`)
          const c = first.connection
          const provider: NativeProvider | undefined =
            OPENAI_PROVIDERS.includes(c.provider.id) && (c.format === "openai-chat" || c.format === "openai-responses")
              ? "openai"
              : c.provider.id === "anthropic" && c.format === "anthropic"
                ? "anthropic"
                : undefined
          if (!provider)
            return yield* unavailable(`'${model}' is served by ${c.name} (${c.provider.id}), which has no native batch API the gateway uses (OpenAI and Anthropic connections do)`)
          if (provider === "openai" && !OPENAI_ENDPOINTS.includes(endpoint))
            return yield* unavailable(`OpenAI's batch API does not take '${endpoint}' (it takes ${OPENAI_ENDPOINTS.join(", ")})`)
          if (provider === "anthropic" && endpoint !== "/v1/messages") return yield* unavailable(`Anthropic's message batches take '/v1/messages' lines only, not '${endpoint}'`)
          return {
            provider,
            connectionId: c.id,
            model: first.model,
            requestedModel: model,
            upstreamId: null,
            upstreamInputFileId: null,
            upstreamStatus: null,
            upstreamOutputFileId: null,
            upstreamErrorFileId: null,
            resultsUrl: null,
            cancelSent: false,
            errors: null
          } satisfies NativeState
        })

      // ------------------------------------------------------------ submit

      const linesOf = (b: Batch) => sql<{ line: number; request: string }>`SELECT line, request FROM batch_lines WHERE batch_id = ${b.id} ORDER BY line`.pipe(Effect.orDie)

      const submit = (b: Batch, state: NativeState, connection: Connection) =>
        Effect.gen(function* () {
          const rows = yield* linesOf(b)
          const params = (r: { request: string }) => ({ ...(JSON.parse(r.request) as Record<string, unknown>), model: state.model })
          if (state.provider === "anthropic") {
            const requests = rows.map((r) => ({ custom_id: `line-${r.line}`, params: params(r) }))
            const res = yield* call(connection, state.model, { path: "/v1/messages/batches", json: { requests } })
            const id = str(json(res)["id"])
            if (!id) return yield* Effect.fail(new NativeUpstreamError("the upstream's message batch has no id"))
            return { ...state, upstreamId: id, upstreamStatus: str(json(res)["processing_status"]) ?? "in_progress" }
          }
          // The input file is uploaded once; a retry after a failed create reuses it.
          let fileId = state.upstreamInputFileId
          if (!fileId) {
            const jsonl = rows.map((r) => JSON.stringify({ custom_id: `line-${r.line}`, method: "POST", url: b.endpoint, body: params(r) })).join("\n") + "\n"
            const body = multipartBody([
              { name: "purpose", value: "batch" },
              { name: "file", filename: `${b.id}.jsonl`, contentType: "application/jsonl", data: Buffer.from(jsonl, "utf8") }
            ])
            const up = yield* call(connection, state.model, { path: "/files", bytes: body })
            fileId = str(json(up)["id"]) ?? null
            if (!fileId) return yield* Effect.fail(new NativeUpstreamError("the upstream's file has no id"))
            yield* save(b.id, { ...state, upstreamInputFileId: fileId })
          }
          const res = yield* call(connection, state.model, {
            path: "/batches",
            json: { input_file_id: fileId, endpoint: b.endpoint, completion_window: "24h", metadata: { gateway_batch_id: b.id } }
          })
          const id = str(json(res)["id"])
          if (!id) return yield* Effect.fail(new NativeUpstreamError("the upstream's batch has no id"))
          return { ...state, upstreamInputFileId: fileId, upstreamId: id, upstreamStatus: str(json(res)["status"]) ?? "validating" }
        })

      // ------------------------------------------------------------ poll

      interface Polled {
        readonly state: NativeState
        readonly counts: { total: number; completed: number; failed: number } | null
        /** The upstream is done: how the batch ends (after its results are read). */
        readonly ended: "completed" | "expired" | "cancelled" | "failed" | null
      }

      const poll = (state: NativeState, connection: Connection): Effect.Effect<Polled, NativeUpstreamError> =>
        Effect.gen(function* () {
          if (state.provider === "anthropic") {
            const j = json(yield* call(connection, state.model, { path: `/v1/messages/batches/${encodeURIComponent(state.upstreamId!)}`, method: "GET" }))
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
          const j = json(yield* call(connection, state.model, { path: `/batches/${encodeURIComponent(state.upstreamId!)}`, method: "GET" }))
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
          const ended = status === "completed" ? "completed" : status === "expired" ? "expired" : status === "cancelled" ? "cancelled" : status === "failed" ? "failed" : null
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
        })

      /** The client-facing status while the upstream works. */
      const runningStatus = (state: NativeState, current: BatchStatus, ended: Polled["ended"]): BatchStatus =>
        current === "cancelling" || state.cancelSent || state.upstreamStatus === "cancelling" || state.upstreamStatus === "canceling"
          ? "cancelling"
          : state.upstreamStatus === "finalizing" || (ended !== null && ended !== "failed")
            ? "finalizing"
            : "in_progress"

      const applyPoll = (b: Batch, p: Polled) =>
        Effect.gen(function* () {
          yield* save(b.id, p.state)
          const status = runningStatus(p.state, b.status, p.ended)
          const fields: Record<string, unknown> = { status, ...(p.counts ? { total: p.counts.total || b.total, completed: p.counts.completed, failed: p.counts.failed } : {}) }
          if (status === "finalizing" && b.finalizingAt === null) fields["finalizing_at"] = Date.now()
          if (status === "cancelling" && b.cancellingAt === null) fields["cancelling_at"] = Date.now()
          // `b` was read before the poll: a cancel that came meanwhile set `cancelling`, which a poll never undoes.
          const from = status === "cancelling" ? ["in_progress", "finalizing", "cancelling"] : ["in_progress", "finalizing"]
          yield* sql`UPDATE batches SET ${sql.update(fields as never)} WHERE id = ${b.id} AND ${sql.in("status", from)}`.pipe(Effect.orDie)
        })

      // ------------------------------------------------------------ results

      const lineOf = (customId: unknown): number | undefined => {
        const m = /^line-(\d+)$/.exec(typeof customId === "string" ? customId : "")
        return m ? Number(m[1]) : undefined
      }

      interface Answer {
        readonly statusCode: number
        readonly body: unknown
        readonly error: unknown
        readonly usage: { input: number | null; output: number | null; cached: number | null }
      }

      const openAiAnswer = (o: Record<string, unknown>): Answer | undefined => {
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

      const anthropicAnswer = (o: Record<string, unknown>): Answer | undefined => {
        const result = obj(o["result"]) ?? {}
        const type = str(result["type"])
        if (type === "succeeded") {
          const u = obj(obj(result["message"])?.["usage"]) ?? {}
          return {
            statusCode: 200,
            body: result["message"],
            error: null,
            usage: { input: num(u["input_tokens"]) ?? null, output: num(u["output_tokens"]) ?? null, cached: num(u["cache_read_input_tokens"]) ?? null }
          }
        }
        if (type === "errored") {
          const e = obj(result["error"]) ?? {}
          const inner = obj(e["error"]) ?? e
          return { statusCode: ANTHROPIC_ERROR_STATUS[str(inner["type"]) ?? ""] ?? 500, body: e, error: null, usage: { input: null, output: null, cached: null } }
        }
        return undefined
      }

      /** Writes one answered line once (the conditional UPDATE), then its usage row. */
      const record = (b: Batch, state: NativeState, connection: Connection, line: number, a: Answer) =>
        Effect.gen(function* () {
          const rows = yield* sql<{ custom_id: string }>`SELECT custom_id FROM batch_lines WHERE batch_id = ${b.id} AND line = ${line}`
          const customId = rows[0]?.custom_id
          if (customId === undefined) return
          const requestId = `${b.id}_${line}`
          const result = {
            id: `batch_req_${b.id.slice(6)}_${line}`,
            custom_id: customId,
            response: a.error && a.body === null ? null : { status_code: a.statusCode, request_id: requestId, body: a.body },
            error: a.error ?? null
          }
          const raw = yield* sql`UPDATE batch_lines SET status_code = ${a.statusCode}, result = ${JSON.stringify(result)}
            WHERE batch_id = ${b.id} AND line = ${line} AND status_code IS NULL`.raw
          if (rowsChanged(raw) !== 1) return
          const ok = a.statusCode >= 200 && a.statusCode < 300
          const tokens = { inputTokens: a.usage.input ?? undefined, outputTokens: a.usage.output ?? undefined, cachedInputTokens: a.usage.cached ?? undefined }
          const costUsd = ok ? accounting.cost(connection.provider.id, state.model, tokens) * NATIVE_BATCH_PRICE_FACTOR : 0
          const apiKeyId = b.owner === "" ? null : b.owner
          const error = ok ? null : (str(obj(obj(a.body)?.["error"])?.["message"]) ?? str(obj(a.error)?.["message"]) ?? `HTTP ${a.statusCode}`).slice(0, 500)
          yield* usage.record({
            requestId,
            apiKeyId,
            connectionId: connection.id,
            provider: connection.provider.id,
            model: state.model,
            endpoint: ENDPOINT_NAMES[b.endpoint] ?? b.endpoint,
            stream: false,
            status: a.statusCode,
            usage: { input: a.usage.input, output: a.usage.output, cached: a.usage.cached, reasoning: null },
            latencyMs: Date.now() - b.createdAt,
            ttftMs: null,
            error,
            costUsd,
            requestedModel: state.requestedModel
          })
          accounting.settle({
            requestId,
            apiKeyId,
            provider: connection.provider.id,
            model: state.model,
            requestedModel: state.requestedModel,
            connection: connection.name,
            status: a.statusCode,
            usage: tokens,
            costUsd,
            error
          })
        }).pipe(Effect.orDie)

      /** Reads a results JSONL from the upstream as it streams, recording each line. */
      const ingest = (b: Batch, state: NativeState, connection: Connection, custom: CustomCall, answer: (o: Record<string, unknown>) => Answer | undefined) =>
        Effect.gen(function* () {
          const res = yield* call(connection, state.model, { ...custom, accept: "application/binary" }, false)
          const lines = readline.createInterface({ input: res.body as unknown as NodeJS.ReadableStream, crlfDelay: Infinity })
          const iterator = lines[Symbol.asyncIterator]()
          try {
            for (;;) {
              const next = yield* Effect.tryPromise({ try: () => iterator.next(), catch: (e) => new NativeUpstreamError(`reading the upstream's results failed: ${String(e)}`) })
              if (next.done) break
              const o = obj(tryJson(next.value as string))
              const line = lineOf(o?.["custom_id"])
              if (!o || line === undefined) continue
              const a = answer(o)
              if (a) yield* record(b, state, connection, line, a)
            }
          } finally {
            lines.close()
          }
        })

      const readResults = (b: Batch, state: NativeState, connection: Connection) =>
        Effect.gen(function* () {
          if (state.provider === "anthropic") {
            const url = state.resultsUrl
            if (url) yield* ingest(b, state, connection, { path: `/v1/messages/batches/${encodeURIComponent(state.upstreamId!)}/results`, url, method: "GET" }, anthropicAnswer)
            return
          }
          for (const id of [state.upstreamOutputFileId, state.upstreamErrorFileId]) {
            if (id) yield* ingest(b, state, connection, { path: `/files/${encodeURIComponent(id)}/content`, method: "GET" }, openAiAnswer)
          }
        })

      // ------------------------------------------------------------ the runner's step

      const exclusive = <A, E>(id: string, e: Effect.Effect<A, E>): Effect.Effect<A | undefined, E> =>
        Effect.suspend(() => {
          if (busy.has(id)) return Effect.succeed(undefined)
          busy.add(id)
          return Effect.ensuring(
            e,
            Effect.sync(() => busy.delete(id))
          )
        })

      const sendCancel = (b: Batch, state: NativeState, connection: Connection) =>
        Effect.gen(function* () {
          const path =
            state.provider === "anthropic" ? `/v1/messages/batches/${encodeURIComponent(state.upstreamId!)}/cancel` : `/batches/${encodeURIComponent(state.upstreamId!)}/cancel`
          yield* call(connection, state.model, { path, method: "POST", json: {} })
          const next = { ...state, cancelSent: true }
          yield* save(b.id, next)
          return next
        })

      const step: NativeBatchesShape["step"] = (b, finish) =>
        exclusive(
          b.id,
          Effect.gen(function* () {
            const current = yield* load(b.id)
            if (!current) return
            let state = current.state
            if (!state.upstreamId) {
              // Cancelled before it was forwarded: nothing ran.
              if (current.status === "cancelling") return yield* finish(b, "cancelled")
              const connection = yield* connectionOf(state)
              const submitted = yield* Effect.either(submit(b, state, connection))
              if (submitted._tag === "Left") {
                const e = submitted.left
                // The upstream refused the batch (a 4xx other than 408/429): it will not take it on a
                // retry either, so the batch fails with its (scrubbed) reason; anything else is tried
                // again at the next step.
                if (e.status === null || e.status < 400 || e.status >= 500 || e.status === 408 || e.status === 429) return yield* Effect.fail(e)
                const errors = [{ code: "native_batch_refused", message: `the upstream refused the batch: ${e.message}`, param: null, line: null }]
                yield* sql`UPDATE batches SET status = 'failed', errors = ${JSON.stringify(errors)}, failed_at = ${Date.now()} WHERE id = ${b.id} AND status IN ('in_progress', 'cancelling')`
                return
              }
              state = submitted.right
              yield* save(b.id, state)
              polledAt.set(b.id, Date.now())
              return
            }
            const connection = yield* connectionOf(state)
            if (current.status === "cancelling" && !state.cancelSent) state = yield* sendCancel(b, state, connection)
            const last = polledAt.get(b.id) ?? 0
            if (Date.now() - last < pollMs) return
            polledAt.set(b.id, Date.now())
            const p = yield* poll(state, connection)
            yield* applyPoll({ ...b, status: current.status }, p)
            if (!p.ended) return
            if (p.ended === "failed") {
              const errors = p.state.errors ?? [{ code: "upstream_failed", message: `the upstream batch ${state.upstreamId} failed`, param: null, line: null }]
              yield* sql`UPDATE batches SET status = 'failed', errors = ${JSON.stringify(errors)}, failed_at = ${Date.now()} WHERE id = ${b.id} AND status IN ('in_progress', 'finalizing', 'cancelling')`
              polledAt.delete(b.id)
              return
            }
            yield* readResults(b, p.state, connection)
            // The counts are the recorded lines' from now on (the same rule as a gateway-run batch).
            yield* sql`UPDATE batches SET
                completed = (SELECT COUNT(*) FROM batch_lines WHERE batch_id = ${b.id} AND status_code >= 200 AND status_code < 300),
                failed = (SELECT COUNT(*) FROM batch_lines WHERE batch_id = ${b.id} AND (status_code < 200 OR status_code >= 300))
              WHERE id = ${b.id}`
            const after = yield* load(b.id)
            const batch = { ...b, status: after?.status ?? b.status }
            yield* finish(batch, current.status === "cancelling" && p.ended === "completed" ? "cancelled" : p.ended)
            polledAt.delete(b.id)
          })
        )

      const refresh: NativeBatchesShape["refresh"] = (b) =>
        Effect.gen(function* () {
          const state = b.native
          if (!state?.upstreamId || !["in_progress", "finalizing", "cancelling"].includes(b.status)) return
          if (Date.now() - (polledAt.get(b.id) ?? 0) < 1000) return
          yield* exclusive(
            b.id,
            Effect.gen(function* () {
              const connection = yield* connectionOf(state)
              const p = yield* poll(state, connection)
              // Only the status and counts: reading the results and ending the batch is the runner's step.
              const last = (yield* load(b.id))?.state
              yield* applyPoll(b, { ...p, state: { ...p.state, cancelSent: last?.cancelSent ?? p.state.cancelSent } })
            })
          )
        }).pipe(Effect.catchAll((e) => Effect.logDebug(`native batch ${b.id}: poll on GET failed: ${e.message}`)))

      const forwardCancel: NativeBatchesShape["forwardCancel"] = (b) =>
        Effect.gen(function* () {
          const current = yield* load(b.id)
          const state = current?.state
          if (!state?.upstreamId || state.cancelSent) return
          // A runner step in flight holds the batch: wait for it (briefly) so the cancel goes out
          // now rather than at the next poll, which may be half a minute away.
          yield* Effect.repeat(
            Effect.sync(() => busy.has(b.id)),
            { schedule: Schedule.spaced("20 millis"), while: (held) => held, times: 250 }
          )
          const fresh = (yield* load(b.id))?.state
          if (!fresh?.upstreamId || fresh.cancelSent) return
          yield* exclusive(
            b.id,
            Effect.flatMap(connectionOf(fresh), (connection) => sendCancel(b, fresh, connection))
          )
        }).pipe(Effect.catchAll((e) => Effect.logWarning(`native batch ${b.id}: forwarding the cancel failed (tried again by the runner): ${e.message}`)))

      return { plan, step, refresh, forwardCancel } satisfies NativeBatchesShape
    })
  )
}
