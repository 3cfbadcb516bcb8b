/**
 * The gateway's own hooks on the request lifecycle (hooks.ts), attached to the requests that
 * need them: the usage row (every pipeline request), the response cache's entry (a cacheable
 * request that missed) and the idempotency recorder (a request with an idempotency key). Being
 * attached per request, they cost nothing to the requests they do not concern, and a request
 * with no hook registered pays only for them.
 */
import * as Effect from "effect/Effect"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { RecordedResponse } from "../services/accounting/Idempotency.js"
import type { ResponseCacheShape } from "../services/accounting/ResponseCache.js"
import type { UsageShape } from "../services/usage/Usage.js"
import { outcomeCost, recordRequest, type Tracking } from "../kernel/attempts.js"
import type { Lookup } from "./cacheLookup.js"
import { attach, type ErrorEvent, type HookHost, type ResponseEvent, setUsage } from "../kernel/hooks.js"
import type { InferenceCall } from "./call.js"

/** Built-in hooks on the request's end run before every registered one, so those see the usage row. */
const FIRST = -Number.MAX_VALUE
/**
 * The response cache's entry goes in before anything else on the request's end (the usage row's
 * write may wait): a client repeating a request as soon as it has the answer finds it cached.
 */
const BEFORE_FIRST = Number.NEGATIVE_INFINITY

/**
 * The request's usage row and settlement, at its end whatever happened (a client that left is a
 * 499); the row goes on the event (`usage`) for the hooks after it.
 */
export const attachUsageRow = (usage: UsageShape, accounting: AccountingShape, call: InferenceCall, track: Tracking): void => {
  const write = (event: ResponseEvent | ErrorEvent) =>
    recordRequest(usage, accounting, call, track, (row) => {
      setUsage(event, row)
      // The request's metrics read it when it ends (src/services/observability/Observability.ts).
      call.ctx.usageRow = row
    })
  attach(call.ctx, { name: "gateway.usage", priority: FIRST, onResponse: write, onError: write })
}

/**
 * Keeps a whole 200 answer in the response cache under the key its lookup gave (its cost computed
 * as the usage row's is), before the usage row is written.
 */
export const attachCacheEntry = (
  cache: ResponseCacheShape,
  accounting: AccountingShape,
  call: InferenceCall,
  track: Tracking,
  lookup: Lookup & { readonly key: string }
): void =>
  attach(call.ctx, {
    name: "gateway.response-cache",
    priority: BEFORE_FIRST,
    onResponse: (event) => {
      const { tried, outcome } = track
      if (event.status !== 200 || typeof event.body !== "string" || !tried || outcome.status !== 200) return
      return Effect.asVoid(
        cache.put({
          key: lookup.key,
          model: call.model,
          format: call.format.id,
          // The answer before any output rewrite (guardrails): a hit is written through this
          // request's rewrite again (its own placeholders restored, its own sanitization).
          body: call.ctx.answerUnrewritten ?? event.body,
          usage: outcome.usage ?? null,
          costUsd: outcomeCost(accounting, tried, outcome),
          provider: tried.connection.provider.id,
          servedModel: tried.model,
          ...(lookup.params ? { params: lookup.params } : {}),
          ...(lookup.embedding ? { embedding: lookup.embedding } : {})
        })
      )
    }
  })

const headersOf = (h: Readonly<Record<string, string | number | undefined>> | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  if (h) for (const k in h) if (h[k] !== undefined) out[k.toLowerCase()] = String(h[k])
  return out
}

/**
 * Records what a request's answer writes (status, headers, body), from the lifecycle's events,
 * so a duplicate request can be answered with the same bytes: a whole answer from the request's
 * end, a streamed one from its head, frames and end.
 */
export const recordAnswer = (host: HookHost): { readonly result: () => RecordedResponse } => {
  let status = 200
  let headers: Record<string, string> = {}
  const chunks: Array<Buffer> = []
  let whole: Buffer | undefined
  const ended = (event: ResponseEvent | ErrorEvent) => {
    if (event.body === undefined) return
    status = event.status
    headers = headersOf(event.headers)
    whole = Buffer.from(event.body)
  }
  attach(host, {
    name: "gateway.idempotency",
    priority: Number.POSITIVE_INFINITY,
    onStreamStart: (event) => {
      status = event.status
      headers = headersOf(event.headers)
    },
    onFrame: (event) => {
      chunks.push(event.bytes ? Buffer.from(event.bytes) : Buffer.from(event.text))
    },
    onStreamEnd: (event) => {
      if (event.text !== "") chunks.push(Buffer.from(event.text))
    },
    onResponse: ended,
    onError: ended
  })
  return { result: () => ({ status, headers, body: whole ?? Buffer.concat(chunks) }) }
}
