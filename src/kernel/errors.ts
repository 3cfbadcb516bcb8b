import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type { CanonicalError, ErrorKind } from "../domain/canonical.js"
import type { WireFormat } from "../upstream/formats/format.js"

/** A client request that cannot be understood: answered 400 in the client's format. */
export class RequestDecodeError extends Error {
  constructor(
    message: string,
    readonly param: string | null = null
  ) {
    super(message)
  }
}

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
  /** The level whose limit refused the request (docs/accounting.md, "Limits at every level"), answered as `error.level`. */
  readonly level?: string | null
}> {}

/**
 * `body` with `error.level` added when a level refused the request: inside the format's error
 * object (OpenAI, Anthropic, Gemini), beside a string `error` (Ollama) at the top.
 */
export const withLevel = (body: unknown, level: string | null | undefined): unknown => {
  if (!level || typeof body !== "object" || body === null) return body
  const b = body as Record<string, unknown>
  const inner = b["error"]
  return typeof inner === "object" && inner !== null ? { ...b, error: { ...(inner as object), level } } : { ...b, level }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new InferenceError({ status: 400, kind: "invalid_request", code, message, param })

export const toCanonical = (e: InferenceError): CanonicalError => ({
  status: e.status,
  kind: e.kind,
  message: e.message,
  code: e.code,
  param: e.param ?? null,
  ...(e.level ? { level: e.level } : {})
})

/** The error body for a client of `format`. */
export const errorBody = (e: InferenceError, format: WireFormat): unknown =>
  e.body ?? withLevel(format.encodeError(toCanonical(e)), e.level)

export const clientError = (format: WireFormat, e: CanonicalError, headers?: Readonly<Record<string, string>>): InferenceError =>
  new InferenceError({
    status: e.status,
    kind: e.kind,
    code: e.code ?? null,
    message: e.message,
    param: e.param ?? null,
    ...(headers ? { headers } : {}),
    ...(e.level ? { level: e.level } : {}),
    body: withLevel(format.encodeError(e), e.level)
  })

/**
 * The inference plane's one rendering of a request its format could not decode: a 400 in the
 * client's format. A RequestDecodeError names the field; anything else a decoder threw says
 * the request could not be read.
 */
export const decodeFailure = (format: WireFormat, e: unknown): InferenceError =>
  clientError(
    format,
    e instanceof RequestDecodeError
      ? { status: 400, kind: "invalid_request", message: e.message, param: e.param }
      : {
          status: 400,
          kind: "invalid_request",
          message: `the request could not be read: ${e instanceof Error ? e.message : String(e)}`,
          param: null
        }
  )

/** Runs a decoder of `format`'s requests; what it throws fails as `decodeFailure`. */
export const tryDecode = <A>(format: WireFormat, decode: () => A): Effect.Effect<A, InferenceError> =>
  Effect.try({ try: decode, catch: (e) => decodeFailure(format, e) })
