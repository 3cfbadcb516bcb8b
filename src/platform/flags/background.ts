import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { FeatureFlags } from "./FeatureFlags.js"

/**
 * Whether the scheduled background jobs may start (GATEWAY_DISABLE_BACKGROUND_SERVICES, a restart
 * flag: read once, when the job's layer is built). The jobs it stops: scheduled backups, the OAuth
 * refresh schedule, usage and audit log retention pruning (docs/feature-flags.md). A layer built without
 * FeatureFlags runs its job. When off, the job logs once why it does not run.
 */
export const backgroundJob = (name: string): Effect.Effect<boolean> =>
  Effect.flatMap(Effect.serviceOption(FeatureFlags), (flags) =>
    Option.isNone(flags)
      ? Effect.succeed(true)
      : Effect.flatMap(flags.value.enabled("GATEWAY_DISABLE_BACKGROUND_SERVICES"), (off) =>
          off ? Effect.as(Effect.logInfo(`${name} off: GATEWAY_DISABLE_BACKGROUND_SERVICES is on`), false) : Effect.succeed(true)
        )
  )
