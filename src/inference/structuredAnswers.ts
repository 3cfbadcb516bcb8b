/**
 * A whole answer held to the JSON Schema its request asked for (docs/structured-outputs.md):
 * validated against the client's own schema; an invalid one gets one repair attempt at the same
 * target (the validation errors sent back) before it is returned as it is. The verdict goes to
 * the client in `X-Gateway-Schema: valid | repaired | invalid`.
 */
import * as Effect from "effect/Effect"
import { type CanonicalRequest, type CanonicalResponse, type ContentBlock, textOf, type Usage, wholeUsage } from "../domain/canonical.js"
import type { FormatId } from "../domain/canonical.js"
import { tryJson } from "../upstream/formats/common.js"
import { FORMATS } from "../upstream/formats/registry.js"
import { sealResponse } from "../upstream/formats/signatures.js"
import { requestedSchema, strictSchema, withoutAddedNulls } from "../upstream/formats/structured.js"
import type { Candidate } from "../services/routing/types.js"
import type { Connection } from "../upstream/providers/Connections.js"
import type { InferenceCall, InferenceShape } from "./call.js"
import { checkAnswer, repairPrompt, type SchemaStatus, schemaEngines } from "../kernel/schemaCheck.js"
import { errorInAnswer } from "./sending.js"

export const SCHEMA_HEADER = "x-gateway-schema"

export interface Conformed {
  readonly decoded: CanonicalResponse
  /** The answer differs from what the upstream gave (repaired, or strict mode's nulls taken out): encode it again. */
  readonly changed: boolean
  readonly status?: SchemaStatus
  /** What the repair attempt used, added to the request's usage and cost. */
  readonly extraUsage?: Usage
  readonly extraCostUsd: number
}

export interface StructuredDeps extends Pick<InferenceShape, "send" | "wholeText"> {
  readonly encodeFor: (
    connection: Connection,
    req: CanonicalRequest
  ) => { readonly format: FormatId; readonly body: Record<string, unknown> }
  readonly cost: (provider: string, model: string, usage: Partial<Usage> | undefined) => number
}

const withText = (r: CanonicalResponse, text: string): CanonicalResponse => {
  let placed = false
  const content: Array<ContentBlock> = []
  for (const b of r.content) {
    if (b.type !== "text") content.push(b)
    else if (!placed) {
      content.push({ type: "text", text })
      placed = true
    }
  }
  if (!placed) content.push({ type: "text", text })
  return { ...r, content }
}

/** The schema a call asks for, in its client's format; undefined for most requests (a few field reads). */
export const schemaOf = (call: InferenceCall): Record<string, unknown> | undefined => requestedSchema(call.format.id, call.body)

/**
 * Whether the upstream was sent the schema compiled to OpenAI's strict rules (translated, the
 * provider takes them, the client left `strict` unset): its answer may carry added nulls.
 */
const compiledStrict = (call: InferenceCall, connection: Connection, passthrough: boolean, schema: Record<string, unknown>): boolean => {
  if (
    passthrough ||
    !connection.provider.quirks?.strictSchemas ||
    (connection.format !== "openai-chat" && connection.format !== "openai-responses")
  )
    return false
  if (strictSchema(schema) === undefined) return false
  try {
    const rf = (call.decode ?? call.format.decodeRequest)(call.body).responseFormat
    return rf?.type === "json_schema" && rf.strict === undefined
  } catch {
    return false
  }
}

export const makeStructured = (deps: StructuredDeps) => {
  /** One more try at the same target, the invalid answer and its errors in the conversation. */
  // Generator functions made once, as everywhere on the request path (docs/performance.md).
  const repairOnce = Effect.fnUntraced(function* (call: InferenceCall, candidate: Candidate, text: string, errors: ReadonlyArray<string>) {
    const connection = candidate.connection
    const canonical = (call.decode ?? call.format.decodeRequest)(call.body)
    const req: CanonicalRequest = {
      ...canonical,
      model: candidate.model,
      stream: false,
      messages: [
        ...canonical.messages,
        { role: "assistant", content: [{ type: "text", text }] },
        { role: "user", content: [{ type: "text", text: repairPrompt(errors) }] }
      ]
    }
    const { format, body } = deps.encodeFor(connection, req)
    const res = yield* deps.send({ connection, model: candidate.model }, format, body, { stream: false, readWhole: true }, call.format)
    if (res.status < 200 || res.status >= 300) return undefined
    const answer = yield* deps.wholeText(res, call.format, connection)
    const json = tryJson(answer)
    if (errorInAnswer(format, json, answer, call.format, connection, "answer")) return undefined
    const upstream = FORMATS[format]
    const reported = upstream.usageOfResponse(json)
    return { decoded: sealResponse(upstream.decodeResponse(json), connection.id), usage: reported ? wholeUsage(reported) : undefined }
  })
  const repair = (call: InferenceCall, candidate: Candidate, text: string, errors: ReadonlyArray<string>) =>
    repairOnce(call, candidate, text, errors).pipe(Effect.catchAll(() => Effect.succeed(undefined)))

  /**
   * The verdict on a whole answer, and the answer to send. `passthrough`: the request went as the
   * client sent it (no schema compiled). Streamed clients are not repaired (their text has gone).
   */
  const conform: (call: InferenceCall, candidate: Candidate, decoded: CanonicalResponse, passthrough: boolean) => Effect.Effect<Conformed> =
    Effect.fnUntraced(function* (call: InferenceCall, candidate: Candidate, decoded: CanonicalResponse, passthrough: boolean) {
      const schema = schemaOf(call)
      if (schema === undefined) return { decoded, changed: false, extraCostUsd: 0 }
      const engines = yield* Effect.promise(schemaEngines)
      let text = textOf(decoded.content)
      let changed = false
      if (compiledStrict(call, candidate.connection, passthrough, schema)) {
        const value = tryJson(text)
        if (value !== undefined) {
          const cleaned = JSON.stringify(withoutAddedNulls(schema, value))
          if (cleaned !== JSON.stringify(value)) {
            text = cleaned
            decoded = withText(decoded, text)
            changed = true
          }
        }
      }
      const verdict = checkAnswer(engines, schema, text)
      if (verdict === undefined) return { decoded, changed, extraCostUsd: 0 }
      const set = (status: SchemaStatus) => {
        call.ctx.responseHeaders[SCHEMA_HEADER] = status
        return status
      }
      if (verdict.valid) return { decoded, changed, status: set("valid"), extraCostUsd: 0 }
      const repaired = yield* repair(call, candidate, text, verdict.errors)
      if (repaired === undefined) return { decoded, changed, status: set("invalid"), extraCostUsd: 0 }
      const extraCostUsd = deps.cost(candidate.connection.provider.id, candidate.model, repaired.usage)
      const again = checkAnswer(engines, schema, textOf(repaired.decoded.content))
      const usage = repaired.usage ? { extraUsage: repaired.usage } : {}
      if (again?.valid) return { decoded: repaired.decoded, changed: true, status: set("repaired"), extraCostUsd, ...usage }
      return { decoded, changed, status: set("invalid"), extraCostUsd, ...usage }
    })

  return { conform }
}

/** Usage with a repair attempt's added. */
export const plusUsage = (a: Usage | undefined, b: Usage | undefined): Usage | undefined => {
  if (b === undefined) return a
  if (a === undefined) return b
  const out: Record<string, number> = { ...(a as unknown as Record<string, number>) }
  for (const [k, v] of Object.entries(b)) if (typeof v === "number") out[k] = (out[k] ?? 0) + v
  return out as unknown as Usage
}
