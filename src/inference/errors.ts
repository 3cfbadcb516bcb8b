import * as Data from "effect/Data"
import type { CanonicalError, ErrorKind } from "../formats/canonical.js"
import type { WireFormat } from "../formats/format.js"

/**
 * A failure the client should see, in its own wire format: `body` when it is already rendered
 * (an upstream's own error object, or one encoded by the pipeline), else rendered from the
 * canonical fields by the route's format.
 */
export class InferenceError extends Data.TaggedError("InferenceError")<{
  readonly status: number
  readonly kind: ErrorKind
  readonly code: string | null
  readonly message: string
  readonly param?: string | null
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: unknown
}> {}

export const badRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new InferenceError({ status: 400, kind: "invalid_request", code, message, param })

export const toCanonical = (e: InferenceError): CanonicalError => ({ status: e.status, kind: e.kind, message: e.message, code: e.code, param: e.param ?? null })

/** The error body for a client of `format`. */
export const errorBody = (e: InferenceError, format: WireFormat): unknown => e.body ?? format.encodeError(toCanonical(e))

export const clientError = (format: WireFormat, e: CanonicalError, headers?: Readonly<Record<string, string>>): InferenceError =>
  new InferenceError({
    status: e.status,
    kind: e.kind,
    code: e.code ?? null,
    message: e.message,
    param: e.param ?? null,
    ...(headers ? { headers } : {}),
    body: format.encodeError(e)
  })
