import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as readline from "node:readline"
import type { AccountingShape } from "../../services/accounting/Accounting.js"
import type { UsageShape } from "../../services/usage/Usage.js"
import { obj, str, tryJson } from "../../upstream/formats/common.js"
import type { CustomCall } from "../../upstream/client/executors.js"
import type { Connection } from "../../upstream/providers/Connections.js"
import { rowsChanged } from "../../platform/store/dialect.js"
import type { Batch } from "./Batches.js"
import { type Answer, anthropicAnswer, lineOf, type NativeCall, type NativeState, NativeUpstreamError, openAiAnswer } from "./nativeWire.js"

/**
 * The price of a native batch line relative to the same request made synchronously: OpenAI's
 * Batch API and Anthropic's Message Batches API both charge 50% of the standard prices.
 */
export const NATIVE_BATCH_PRICE_FACTOR = 0.5

const ENDPOINT_NAMES: Record<string, string> = {
  "/v1/chat/completions": "chat.completions",
  "/v1/responses": "responses",
  "/v1/embeddings": "embeddings",
  "/v1/messages": "messages",
  "/v1/completions": "completions"
}

/**
 * An ended native batch's results, read from the upstream as they stream: each answered line
 * written once (the same conditional UPDATE as a gateway-run line) and, only then, its usage row:
 * request id `<batch id>_<line>`, the batch owner's key, priced at the model's prices times
 * NATIVE_BATCH_PRICE_FACTOR.
 */
export const makeNativeResults = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly accounting: AccountingShape
  readonly usage: UsageShape
  readonly call: NativeCall
}) => {
  const { sql, accounting, usage, call } = deps

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
      const tokens = {
        inputTokens: a.usage.input ?? undefined,
        outputTokens: a.usage.output ?? undefined,
        cachedInputTokens: a.usage.cached ?? undefined
      }
      const costUsd = ok ? accounting.cost(connection.provider.id, state.model, tokens) * NATIVE_BATCH_PRICE_FACTOR : 0
      const apiKeyId = b.owner === "" ? null : b.owner
      const error = ok
        ? null
        : (str(obj(obj(a.body)?.["error"])?.["message"]) ?? str(obj(a.error)?.["message"]) ?? `HTTP ${a.statusCode}`).slice(0, 500)
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
  const ingest = (
    b: Batch,
    state: NativeState,
    connection: Connection,
    custom: CustomCall,
    answer: (o: Record<string, unknown>) => Answer | undefined
  ) =>
    Effect.gen(function* () {
      const res = yield* call(connection, state.model, { ...custom, accept: "application/binary" }, false)
      const lines = readline.createInterface({ input: res.body as unknown as NodeJS.ReadableStream, crlfDelay: Infinity })
      const iterator = lines[Symbol.asyncIterator]()
      try {
        for (;;) {
          const next = yield* Effect.tryPromise({
            try: () => iterator.next(),
            catch: (e) => new NativeUpstreamError(`reading the upstream's results failed: ${String(e)}`)
          })
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

  /** Anthropic's results URL, or OpenAI's output and error files. */
  return (b: Batch, state: NativeState, connection: Connection) =>
    Effect.gen(function* () {
      if (state.provider === "anthropic") {
        const url = state.resultsUrl
        if (url)
          yield* ingest(
            b,
            state,
            connection,
            { path: `/v1/messages/batches/${encodeURIComponent(state.upstreamId!)}/results`, url, method: "GET" },
            anthropicAnswer
          )
        return
      }
      for (const id of [state.upstreamOutputFileId, state.upstreamErrorFileId]) {
        if (id) yield* ingest(b, state, connection, { path: `/files/${encodeURIComponent(id)}/content`, method: "GET" }, openAiAnswer)
      }
    })
}
