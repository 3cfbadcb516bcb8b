import * as Data from "effect/Data"

/**
 * A failure the client should see, in its own wire format. `type` and `code` follow the
 * OpenAI conventions (`invalid_request_error`, `authentication_error`, ...).
 */
export class InferenceError extends Data.TaggedError("InferenceError")<{
  readonly status: number
  readonly type: string
  readonly code: string | null
  readonly message: string
  readonly param?: string | null
  readonly headers?: Readonly<Record<string, string>>
  /** A body to send unchanged (an upstream's own error object), instead of one built from the fields. */
  readonly body?: unknown
}> {}

export const badRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new InferenceError({ status: 400, type: "invalid_request_error", code, message, param })

export const openAiErrorBody = (e: InferenceError): unknown =>
  e.body ?? { error: { message: e.message, type: e.type, code: e.code, param: e.param ?? null } }

const TYPE_BY_STATUS: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  408: "timeout_error",
  409: "invalid_request_error",
  413: "invalid_request_error",
  422: "invalid_request_error",
  429: "rate_limit_error"
}

export const errorTypeForStatus = (status: number): string =>
  TYPE_BY_STATUS[status] ?? (status >= 500 ? "upstream_error" : "invalid_request_error")
