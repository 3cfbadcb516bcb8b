import createClient, { type Middleware } from "openapi-fetch"
import type { paths } from "./schema"

/**
 * The management API client, typed from the gateway's own OpenAPI document (schema.d.ts is
 * generated at build time). Same origin: the session cookie goes with every call; requests that
 * change something carry the session's CSRF token as the API requires.
 */
let csrfToken: string | null = null
export const setCsrfToken = (token: string | null) => {
  csrfToken = token
}

/** Called when a call answers 401: the session ended (the shell shows the login page). */
let onUnauthorized: () => void = () => {}
export const setOnUnauthorized = (f: () => void) => {
  onUnauthorized = f
}

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"])

const auth: Middleware = {
  onRequest({ request }) {
    if (csrfToken && UNSAFE.has(request.method)) request.headers.set("x-csrf-token", csrfToken)
    return request
  },
  onResponse({ response, request }) {
    if (response.status === 401 && !new URL(request.url).pathname.startsWith("/api/auth/")) onUnauthorized()
    return response
  }
}

export const api = createClient<paths>({ baseUrl: location.origin, credentials: "same-origin" })
api.use(auth)

/** The one-line message of a management error body (`{ _tag, message }`), or of a failed fetch. */
export const errorMessage = (error: unknown, status?: number): string => {
  if (error && typeof error === "object" && "message" in error && typeof (error as { message: unknown }).message === "string") {
    return (error as { message: string }).message
  }
  if (error instanceof Error) return error.message
  if (typeof error === "string" && error) return error
  return status ? `request failed (HTTP ${status})` : "request failed"
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message)
  }
}

/**
 * Unwraps an openapi-fetch result: the data, or an ApiError with the API's own message.
 * `const keys = await ok(api.GET("/api/keys"))`
 */
export const ok = async <T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> => {
  let result: { data?: T; error?: unknown; response: Response }
  try {
    result = await call
  } catch (e) {
    throw new ApiError(`the gateway did not answer: ${e instanceof Error ? e.message : String(e)}`, 0)
  }
  if (result.error !== undefined || !result.response.ok)
    throw new ApiError(errorMessage(result.error, result.response.status), result.response.status)
  return result.data as T
}
