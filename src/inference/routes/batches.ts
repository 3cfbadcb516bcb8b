/** `/v1/batches` (docs/files-batches.md, "Batches"): the OpenAI batch object over `Batches`; the `BatchRunner` runs them. */
import * as Effect from "effect/Effect"
import { BATCH_ENDPOINTS, type Batch, type BatchesShape, FINISHED } from "../batches/Batches.js"
import type { NativeBatchesShape } from "../batches/NativeBatches.js"
import { type FilesShape, ownerOf } from "../files/Files.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import { type HttpRequestContext, sendJson, withJsonObject } from "../io.js"
import { notFound } from "./files.js"
import type { RouteDef } from "./types.js"

const s = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000))

export const batchObject = (b: Batch) => ({
  id: b.id,
  object: "batch",
  endpoint: b.endpoint,
  errors: b.errors ? { object: "list", data: b.errors } : null,
  input_file_id: b.inputFileId,
  completion_window: b.completionWindow,
  status: b.status,
  output_file_id: b.outputFileId,
  error_file_id: b.errorFileId,
  created_at: s(b.createdAt),
  in_progress_at: s(b.inProgressAt),
  expires_at: s(b.expiresAt),
  finalizing_at: s(b.finalizingAt),
  completed_at: s(b.completedAt),
  failed_at: s(b.failedAt),
  expired_at: s(b.expiredAt),
  cancelling_at: s(b.cancellingAt),
  cancelled_at: s(b.cancelledAt),
  request_counts: { total: b.total, completed: b.completed, failed: b.failed },
  metadata: b.metadata
})

/**
 * The native option: `metadata.gateway_mode` (what the openai SDK sends without casts) or a
 * top-level `gateway_mode`, `"native"` to forward the batch to its provider's batch API,
 * `"gateway"` (the default) to run it in the gateway.
 */
const modeOf = (body: Record<string, unknown>, metadata: unknown): Effect.Effect<"native" | "gateway", InferenceError> => {
  const fromMetadata = typeof metadata === "object" && metadata !== null ? (metadata as Record<string, unknown>)["gateway_mode"] : undefined
  const top = body["gateway_mode"]
  for (const [v, param] of [
    [top, "gateway_mode"],
    [fromMetadata, "metadata.gateway_mode"]
  ] as const) {
    if (v !== undefined && v !== "native" && v !== "gateway")
      return Effect.fail(badRequest(`'${param}' must be 'native' or 'gateway'`, param))
  }
  return Effect.succeed(top === "native" || (top === undefined && fromMetadata === "native") ? "native" : "gateway")
}

const create = (batches: BatchesShape, files: FilesShape, native: NativeBatchesShape) => {
  const handle = Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const owner = ownerOf(ctx.apiKeyId)
    const input = body["input_file_id"]
    if (typeof input !== "string" || input === "")
      return yield* badRequest("'input_file_id' must be the id of a file uploaded with purpose 'batch'", "input_file_id")
    const endpoint = body["endpoint"]
    if (typeof endpoint !== "string" || !(BATCH_ENDPOINTS as ReadonlyArray<string>).includes(endpoint)) {
      return yield* badRequest(`'endpoint' must be one of ${BATCH_ENDPOINTS.join(", ")}`, "endpoint")
    }
    if (body["completion_window"] !== "24h") return yield* badRequest("'completion_window' must be '24h'", "completion_window")
    const metadata = body["metadata"]
    if (metadata !== undefined && metadata !== null) {
      const entries = typeof metadata === "object" && !Array.isArray(metadata) ? Object.entries(metadata) : undefined
      if (!entries || entries.length > 16 || entries.some(([k, v]) => k.length > 64 || typeof v !== "string" || v.length > 512)) {
        return yield* badRequest(
          "'metadata' must be an object of at most 16 string values (keys up to 64, values up to 512 characters)",
          "metadata"
        )
      }
    }
    const mode = yield* modeOf(body, metadata)
    const file = yield* files.find(owner, input)
    if (!file) return yield* notFound("file", input, "input_file_id")
    if (file.purpose !== "batch")
      return yield* badRequest(`the input file has purpose '${file.purpose}'; upload it with purpose 'batch'`, "input_file_id")
    const forwarded = mode === "native" ? yield* native.plan(owner, input, endpoint) : null
    const batch = yield* batches.create({
      owner,
      endpoint,
      inputFileId: input,
      completionWindow: "24h",
      metadata: (metadata as Record<string, string> | null | undefined) ?? null,
      native: forwarded
    })
    sendJson(ctx, 200, batchObject(batch))
  })
  return (ctx: HttpRequestContext) => withJsonObject(ctx, (body) => handle(ctx, body))
}

const own = (batches: BatchesShape, ctx: HttpRequestContext, id: string) =>
  Effect.flatMap(batches.find(ownerOf(ctx.apiKeyId), id), (b) => (b ? Effect.succeed(b) : Effect.fail(notFound("batch", id, "batch_id"))))

const retrieve = (batches: BatchesShape, native: NativeBatchesShape) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const b = yield* own(batches, ctx, params["id"] ?? "")
    if (!b.native) return sendJson(ctx, 200, batchObject(b))
    // A native batch is polled on GET too (at most once a second), so the answer is the upstream's latest.
    yield* native.refresh(b)
    sendJson(ctx, 200, batchObject(yield* own(batches, ctx, b.id)))
  })

const list = (batches: BatchesShape) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const raw = ctx.query.get("limit")
    const limit = raw === null ? 20 : Number(raw)
    if (raw !== null && (!/^\d+$/.test(raw) || limit < 1 || limit > 100))
      return yield* badRequest("'limit' must be an integer between 1 and 100", "limit")
    const page = yield* batches.list(ownerOf(ctx.apiKeyId), { limit, after: ctx.query.get("after") ?? undefined })
    const data = page.data.map(batchObject)
    sendJson(ctx, 200, {
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: data[data.length - 1]?.id ?? null,
      has_more: page.hasMore
    })
  })

const conflict = (message: string) =>
  new InferenceError({ status: 409, kind: "invalid_request", code: "batch_state", message, param: "batch_id" })

const cancel = (batches: BatchesShape, native: NativeBatchesShape) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const b = yield* own(batches, ctx, params["id"] ?? "")
    if (b.status === "cancelling" || b.status === "cancelled") return sendJson(ctx, 200, batchObject(b))
    if (b.status !== "validating" && b.status !== "in_progress")
      return yield* conflict(`batch ${b.id} is ${b.status} and cannot be cancelled`)
    const cancelling = yield* batches.cancel(b)
    if (!b.native) return sendJson(ctx, 200, batchObject(cancelling))
    // Forwarded at once (a failure is tried again by the runner's next step).
    yield* native.forwardCancel(cancelling)
    sendJson(ctx, 200, batchObject(yield* own(batches, ctx, b.id)))
  })

const remove = (batches: BatchesShape) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const b = yield* own(batches, ctx, params["id"] ?? "")
    if (!FINISHED.includes(b.status))
      return yield* conflict(
        `batch ${b.id} is ${b.status}; only a completed, failed, expired or cancelled batch can be deleted (cancel it first)`
      )
    yield* batches.remove(b)
    sendJson(ctx, 200, { id: b.id, object: "batch", deleted: true })
  })

const ID = /^\/v1\/batches\/(?<id>[^/]+)$/

export const batchRoutes = (batches: BatchesShape, files: FilesShape, native: NativeBatchesShape): ReadonlyArray<RouteDef> => [
  { method: "POST", path: "/v1/batches", format: openAiChat, handle: create(batches, files, native) },
  { method: "GET", path: "/v1/batches", format: openAiChat, handle: list(batches) },
  { method: "GET", path: ID, format: openAiChat, handle: retrieve(batches, native) },
  { method: "DELETE", path: ID, format: openAiChat, handle: remove(batches) },
  { method: "POST", path: /^\/v1\/batches\/(?<id>[^/]+)\/cancel$/, format: openAiChat, handle: cancel(batches, native) }
]
