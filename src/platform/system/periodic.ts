import type * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { StoreHealth } from "../store/StoreHealth.js"

/** A schedule every `seconds`, each wait jittered between 80% and 120%. */
export const every = (seconds: number) => Schedule.spaced(Duration.millis(seconds * 1000)).pipe(Schedule.jittered)

/**
 * Forks `round` into the layer's scope on `every(seconds)`, its first run one interval after start
 * (or at once with `immediately`); a failed round is logged, never fatal to the job.
 */
export const periodic = (
  name: string,
  seconds: number,
  round: Effect.Effect<void>,
  options: { readonly immediately?: boolean } = {}
): Effect.Effect<void, never, Scope.Scope> => {
  return Effect.flatMap(Effect.serviceOption(StoreHealth), (health) => {
    // A round that failed because the store is unavailable is said once per outage, by StoreHealth.
    const warn = (cause: Cause.Cause<unknown>) =>
      health._tag === "Some" ? health.value.warn(`${name}: round failed`, cause) : Effect.logWarning(`${name}: round failed`, cause)
    const guarded = round.pipe(Effect.catchAllCause(warn))
    return Effect.asVoid(
      Effect.forkScoped(options.immediately ? Effect.repeat(guarded, every(seconds)) : Effect.schedule(guarded, every(seconds)))
    )
  })
}
