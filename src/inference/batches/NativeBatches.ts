/**
 * Native batches (docs/files-batches.md, "Native batches"): a one-model batch forwarded whole to
 * OpenAI's or Anthropic's own batch API. Parts: nativeWire.ts, nativeRunner.ts, nativeResults.ts.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as readline from "node:readline"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import { Accounting } from "../../services/accounting/Accounting.js"
import { Usage } from "../../services/usage/Usage.js"
import { obj, str, tryJson } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { Connections } from "../../upstream/providers/Connections.js"
import type { InferenceShape } from "../call.js"
import { firstOf } from "../fallback.js"
import { Files, type FilesShape } from "../files/Files.js"
import { Inference } from "../Inference.js"
import type { Batch } from "./Batches.js"
import { makeNativeResults } from "./nativeResults.js"
import { type Finish, makeNativeRunner } from "./nativeRunner.js"
import { makeNativeCall, type NativeProvider, type NativeState } from "./nativeWire.js"

export { NATIVE_BATCH_PRICE_FACTOR } from "./nativeResults.js"
export type { Finish } from "./nativeRunner.js"
export { type NativeProvider, type NativeState, NativeUpstreamError } from "./nativeWire.js"

/** The OpenAI batch endpoints an OpenAI-family upstream runs natively. */
const OPENAI_ENDPOINTS = ["/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions"]
const OPENAI_PROVIDERS = ["openai", "openai-compatible"]

/** Why a batch cannot go native: a 400 naming it (the client asked for native explicitly). */
const unavailable = (why: string) =>
  badRequest(`this batch cannot be forwarded to a native batch API: ${why}`, "metadata.gateway_mode", "native_batch_unavailable")

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
      const call = makeNativeCall(inference)
      const readResults = makeNativeResults({ sql, accounting: yield* Accounting, usage: yield* Usage, call })
      const pollMs = yield* positiveInteger("GATEWAY_NATIVE_BATCH_POLL_MS", "milliseconds", 30_000)
      const runner = makeNativeRunner({ sql, connections: yield* Connections, call, readResults, pollMs })
      return {
        plan: (owner, inputFileId, endpoint) => plan({ files, inference }, owner, inputFileId, endpoint),
        step: runner.step,
        refresh: runner.refresh,
        forwardCancel: runner.forwardCancel
      } satisfies NativeBatchesShape
    })
  )
}

/**
 * Whether the input file can go native, and to which upstream (NativeBatchesShape.plan): its
 * lines name one model, which resolves directly to one OpenAI or Anthropic connection.
 */
const plan = (
  deps: { readonly files: FilesShape; readonly inference: InferenceShape },
  owner: string,
  inputFileId: string,
  endpoint: string
) =>
  Effect.gen(function* () {
    const { files, inference } = deps
    const input = yield* files.content(owner, inputFileId)
    if (!input)
      return yield* Effect.fail(
        new InferenceError({
          status: 404,
          kind: "not_found",
          code: "not_found",
          message: `no file '${inputFileId}'`,
          param: "input_file_id"
        })
      )
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
      return yield* unavailable(
        `'${model}' is served by ${c.name} (${c.provider.id}), which has no native batch API the gateway uses (OpenAI and Anthropic connections do)`
      )
    if (provider === "openai" && !OPENAI_ENDPOINTS.includes(endpoint))
      return yield* unavailable(`OpenAI's batch API does not take '${endpoint}' (it takes ${OPENAI_ENDPOINTS.join(", ")})`)
    if (provider === "anthropic" && endpoint !== "/v1/messages")
      return yield* unavailable(`Anthropic's message batches take '/v1/messages' lines only, not '${endpoint}'`)
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
