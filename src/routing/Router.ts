import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Connections } from "../providers/Connections.js"
import { Resilience } from "../resilience/Resilience.js"
import { type Blocked, candidateOf, type RoutePlan } from "./plan.js"
import type { Candidate, RequestFeatures } from "./types.js"

/** A model id the router cannot route: 404 (unknown) or 400 (malformed) in the client's format. */
export class RouteError {
  readonly _tag = "RouteError"
  constructor(
    readonly status: 400 | 404,
    readonly message: string,
    readonly code: string
  ) {}
}

export interface PlanInput {
  /** Request features, computed only when a strategy needs them. */
  readonly features: () => RequestFeatures
  /** `X-Gateway-Mode`, `X-Gateway-Budget`, `X-Session-Id` / `x_session_id`. */
  readonly mode?: string
  readonly budget?: string
  readonly sessionId?: string
}

export interface RouterShape {
  readonly plan: (model: string, input: PlanInput) => Effect.Effect<RoutePlan, RouteError>
  /** The candidate that answered (lkgp, relay legs, sticky sessions). */
  readonly served: (plan: RoutePlan, c: Candidate) => Effect.Effect<void>
}

/** Splits candidates into admissible and blocked at `now`. */
export const admit = (
  candidates: ReadonlyArray<Candidate>,
  admission: (c: Candidate, now: number) => { readonly ok: true } | { readonly ok: false; readonly reason: string; readonly retryAfterMs: number | null },
  now: number
): { ok: Array<Candidate>; blocked: Array<Blocked> } => {
  const ok: Array<Candidate> = []
  const blocked: Array<Blocked> = []
  for (const c of candidates) {
    const a = admission(c, now)
    if (a.ok) ok.push(c)
    else blocked.push({ candidate: c, reason: a.reason, retryAfterMs: a.retryAfterMs })
  }
  return { ok, blocked }
}

/** Direct model ids only (`<provider>/<model>`, bare ids): combos and auto come with the routing engine. */
export class Router extends Context.Tag("gateway/Router")<Router, RouterShape>() {
  static readonly layer = Layer.effect(
    Router,
    Effect.gen(function* () {
      const connections = yield* Connections
      const resilience = yield* Resilience
      return {
        plan: (model) =>
          Effect.gen(function* () {
            const targets = yield* connections.targets(model).pipe(Effect.mapError((e) => new RouteError(404, e.message, "model_not_found")))
            const all = targets.map((t) => candidateOf(t))
            const { ok, blocked } = admit(all, resilience.admission, Date.now())
            return { kind: "direct", scope: model, strategy: "direct", candidates: ok, blocked, probes: new Set<string>() } satisfies RoutePlan
          }),
        served: () => Effect.void
      }
    })
  )
}
