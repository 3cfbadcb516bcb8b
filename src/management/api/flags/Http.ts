import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { FeatureFlags } from "../../../platform/flags/FeatureFlags.js"
import { ManagementApi } from "../Api.js"

export const layer = HttpApiBuilder.group(ManagementApi, "featureFlags", (handlers) =>
  Effect.gen(function* () {
    const flags = yield* FeatureFlags
    return handlers
      .handle("list", () => flags.list)
      .handle("set", ({ payload }) => flags.set(payload.key, payload.value))
      .handle("clear", () =>
        Effect.map(flags.clear, (cleared) => ({
          cleared,
          message:
            cleared === 0
              ? "no database overrides were set"
              : `cleared ${cleared} database override${cleared === 1 ? "" : "s"}; flags now resolve from the environment or their defaults`
        }))
      )
  })
)
