import type * as Effect from "effect/Effect"
import type { WireFormat } from "../../upstream/formats/format.js"
import type { InferenceError } from "../../kernel/errors.js"
import type { InferenceCall } from "../call.js"
import type { CommonPathRefusal } from "../commonPath.js"
import type { HttpRequestContext } from "../io.js"

export type Handler = (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) => Effect.Effect<void, InferenceError>

/** One client-facing route: its method and path (`:name` segments, a trailing `*rest`), its format, its handler. */
export interface RouteDef {
  readonly method: "GET" | "POST" | "HEAD" | "DELETE"
  readonly path: string | RegExp
  /** Errors on this route are rendered in this format. */
  readonly format: WireFormat
  readonly handle: Handler
  /** Routes without gateway-key authentication (health probes). */
  readonly public?: boolean
  /** One line for the agent-skill files, where the wire format alone does not say what the route does. */
  readonly summary?: string
  /**
   * A route the common path may serve (docs/ARCHITECTURE.md, "The common path"): the call its
   * handler would hand the pipeline for this JSON body, made without an effect, or the error it
   * would answer, or why the handler needs an effect for it (the common path then leaves the
   * request to `handle`).
   */
  readonly common?: (ctx: HttpRequestContext, body: Record<string, unknown>) => InferenceCall | InferenceError | CommonPathRefusal
}

/**
 * A route's `decode` for `Inference.run`: the request it already decoded, or, when a hook
 * replaced the body (onRequest, onModelSelect), that body decoded by `decoder`.
 */
export const decodedAs =
  <A>(body: Record<string, unknown>, canonical: A, decoder: (body: Record<string, unknown>) => A) =>
  (b: Record<string, unknown>): A =>
    b === body ? canonical : decoder(b)
