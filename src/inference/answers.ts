/**
 * Reading an upstream's answer and shaping the gateway's own: rate-limit hints, whole answers
 * as events and back, and the cost telemetry headers. Error shapes (answered, and inside a 200)
 * belong to each format (`WireFormat.isErrorBody`, `errorIn200`).
 */
import type { CanonicalResponse, StreamEvent, Usage } from "../domain/canonical.js"
import { formatCost } from "../services/accounting/cost.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import { endStream, type HttpRequestContext, jsonResponseHeaders, responseHeaders, startStream, writeWhole } from "./io.js"
import type { ExtraTokens, InferenceCall } from "./call.js"

/** Rate-limit hints worth passing to the client with an error. */
export const hintHeaders = (headers: UpstreamResponse["headers"]): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && (name === "retry-after" || name.startsWith("x-ratelimit-") || name.startsWith("anthropic-ratelimit-"))) {
      out[name] = Array.isArray(value) ? value.join(", ") : String(value)
    }
  }
  return out
}

/** A whole answer as the stream events that would have produced it (a client asked to stream, the upstream answered whole). */
export const responseEvents = (res: CanonicalResponse): Array<StreamEvent> => {
  const events: Array<StreamEvent> = [{ type: "start", id: res.id, model: res.model, created: res.created }]
  res.content.forEach((b, index) => {
    if (b.type === "text") events.push({ type: "block_start", index, block: { type: "text" } }, { type: "text_delta", index, text: b.text })
    else if (b.type === "reasoning") {
      events.push({
        type: "block_start",
        index,
        block: {
          type: "reasoning",
          ...(b.redacted !== undefined ? { redacted: b.redacted } : {}),
          ...(b.itemId ? { itemId: b.itemId } : {})
        }
      })
      if (b.text) events.push({ type: "reasoning_delta", index, text: b.text })
      if (b.signature || b.encrypted)
        events.push({ type: "signature", index, signature: (b.encrypted ?? b.signature)!, ...(b.encrypted ? { encrypted: true } : {}) })
    } else if (b.type === "tool_use") {
      events.push(
        {
          type: "block_start",
          index,
          block: { type: "tool_use", id: b.id, name: b.name, ...(b.signature ? { signature: b.signature } : {}) }
        },
        { type: "tool_args_delta", index, partialJson: JSON.stringify(b.input ?? {}) }
      )
    } else return
    events.push({ type: "block_stop", index })
  })
  if (res.usage) events.push({ type: "usage", usage: res.usage })
  events.push({ type: "finish", stopReason: res.stopReason, ...(res.stopSequence ? { stopSequence: res.stopSequence } : {}) })
  return events
}

/**
 * Cost telemetry of a non-streamed success (spec document 1, "Custom headers"). `extra`:
 * tokens spent elsewhere on this answer (a fusion panel), counted like its cost is.
 */
export const costHeaders = (
  ctx: HttpRequestContext,
  provider: string,
  model: string,
  u: Partial<Usage> | undefined,
  costUsd: number,
  cacheHit: boolean,
  extra?: ExtraTokens
): Record<string, string> => ({
  "x-gateway-response-cost": formatCost(costUsd),
  "x-gateway-tokens-in": String((u?.inputTokens ?? 0) + (extra?.input ?? 0)),
  "x-gateway-tokens-out": String((u?.outputTokens ?? 0) + (extra?.output ?? 0)),
  "x-gateway-model": model,
  "x-gateway-provider": provider,
  "x-gateway-latency-ms": String(Date.now() - ctx.startedAt),
  "x-gateway-cache-hit": cacheHit ? "true" : "false"
})

/**
 * `costHeaders` set on the request's own answer headers (`ctx.responseHeaders`), as
 * `Object.assign(ctx.responseHeaders, costHeaders(...))` would set them, without the object made
 * to be copied: a whole answer's usual end (src/inference/attempt.ts).
 */
export const putCostHeaders = (
  ctx: HttpRequestContext,
  provider: string,
  model: string,
  u: Partial<Usage> | undefined,
  costUsd: number,
  extra?: ExtraTokens
): void => {
  const h = ctx.responseHeaders
  h["x-gateway-response-cost"] = formatCost(costUsd)
  h["x-gateway-tokens-in"] = String((u?.inputTokens ?? 0) + (extra?.input ?? 0))
  h["x-gateway-tokens-out"] = String((u?.outputTokens ?? 0) + (extra?.output ?? 0))
  h["x-gateway-model"] = model
  h["x-gateway-provider"] = provider
  h["x-gateway-latency-ms"] = String(Date.now() - ctx.startedAt)
  h["x-gateway-cache-hit"] = "false"
}

/** A stream read as one JSON array (Gemini without `alt=sse`), as Google answers it. */
export const JSON_ARRAY_CONTENT_TYPE = "application/json; charset=UTF-8"

/** A whole answer to a client that asked for a stream: its events, replayed in the client's stream format. */
export const replayWhole = (call: InferenceCall, decoded: CanonicalResponse): void => {
  const { ctx, format: client } = call
  const encoder =
    call.streamEncoder?.() ??
    client.streamEncoder({ model: call.model, requestId: ctx.requestId, ...(call.encodeOptions ? { options: call.encodeOptions } : {}) })
  if (ctx.progress) ctx.progress.contentStarted = true
  if (!ctx.res.headersSent)
    startStream(ctx, {
      ...responseHeaders(ctx),
      "content-type": call.jsonArrayStream ? JSON_ARRAY_CONTENT_TYPE : client.streamContentType,
      "cache-control": "no-cache"
    })
  endStream(
    ctx,
    responseEvents(decoded)
      .map((e) => encoder.push(e))
      .join("") + encoder.end()
  )
}

/** A whole answer in the client's shape (the route's own shape when it has one). */
export const encodeWhole = (call: InferenceCall, decoded: CanonicalResponse): unknown =>
  call.encodeResponse
    ? call.encodeResponse(decoded)
    : call.format.encodeResponse(decoded, {
        model: call.model,
        requestId: call.ctx.requestId,
        ...(call.encodeOptions ? { options: call.encodeOptions } : {})
      })

/**
 * Sends a whole JSON answer (its cost headers already on the context); the response cache's hook may keep it (onResponse).
 * `bytes`: `payload` exactly as UTF-8, when the caller has them (an upstream's answer passed through): its length is the
 * answer's and they are written as they are, rather than the text measured and encoded again.
 */
export const sendWhole = (call: InferenceCall, payload: string, bytes?: Buffer): void => {
  const { ctx } = call
  // A text of the gateway's own (a translated answer) is encoded once, here, and its length read
  // from the bytes: measuring it and then encoding it walked it twice. Not when a rewrite may
  // change the text (the bytes would go unused).
  const out = bytes ?? (ctx.rewrite?.whole === undefined ? Buffer.from(payload, "utf8") : undefined)
  writeWhole(ctx, 200, jsonResponseHeaders(ctx, out !== undefined ? out.length : Buffer.byteLength(payload)), payload, out)
}
