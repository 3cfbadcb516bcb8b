import type * as Effect from "effect/Effect"
import type { WireFormat } from "../../formats/format.js"
import type { InferenceError } from "../errors.js"
import type { RequestContext } from "../io.js"

export type Handler = (ctx: RequestContext, params: Readonly<Record<string, string>>) => Effect.Effect<void, InferenceError>

/** One client-facing route: its method and path (`:name` segments, a trailing `*rest`), its format, its handler. */
export interface RouteDef {
  readonly method: "GET" | "POST" | "HEAD"
  readonly path: string | RegExp
  /** Errors on this route are rendered in this format. */
  readonly format: WireFormat
  readonly handle: Handler
  /** Routes without gateway-key authentication (health probes). */
  readonly public?: boolean
}
