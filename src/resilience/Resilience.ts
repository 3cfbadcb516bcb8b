import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BreakerState, Candidate } from "../routing/types.js"
import type { Classification, FailureInfo } from "./types.js"

/** Whether a candidate may be tried now, and if not why and for how long. */
export type Admission = { readonly ok: true } | { readonly ok: false; readonly reason: string; readonly retryAfterMs: number | null }

/**
 * The resilience gate as the dispatcher sees it: the provider breaker, the connection cooldown
 * and the model lockout behind one interface.
 */
export interface ResilienceShape {
  /** Synchronous admission at `now`: breaker OPEN, connection cooling down or terminal, model locked. */
  readonly admission: (c: Candidate, now: number) => Admission
  readonly breakerState: (c: Candidate, now: number) => BreakerState
  /** Claims the right to send now (a HALF_OPEN breaker lets one probe through at a time). */
  readonly acquire: (c: Candidate) => Effect.Effect<{ readonly allowed: boolean; readonly probe: boolean }>
  readonly succeeded: (c: Candidate) => Effect.Effect<void>
  /** Classifies a failure and updates breaker, cooldown and lockout; answers the classification. */
  readonly failed: (c: Candidate, f: FailureInfo) => Effect.Effect<Classification>
  /** An attempt ended without a verdict (the client left): frees a probe slot. */
  readonly release: (c: Candidate) => Effect.Effect<void>
}

/** Until the resilience services are wired: everything admitted, failures classified by status only. */
const provisionalClassify = (f: FailureInfo): Classification => {
  const provider = f.kind !== "http" || [408, 500, 502, 503, 504].includes(f.status)
  return {
    scope: provider ? "provider" : f.status === 429 || f.status === 401 ? "connection" : f.status === 404 || f.status === 403 ? "model" : "client",
    retryable: provider || [401, 402, 403, 404, 429].includes(f.status) || f.status >= 500,
    tripsBreaker: provider,
    cooldown: f.status === 429,
    quotaExhausted: false,
    reason: provider ? "server_error" : "client_error"
  }
}

export class Resilience extends Context.Tag("gateway/Resilience")<Resilience, ResilienceShape>() {
  static readonly layer = Layer.succeed(Resilience, {
    admission: () => ({ ok: true }),
    breakerState: () => "CLOSED",
    acquire: () => Effect.succeed({ allowed: true, probe: false }),
    succeeded: () => Effect.void,
    failed: (_c, f) => Effect.succeed(provisionalClassify(f)),
    release: () => Effect.void
  })
}
