import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../domain/errors.js"
import { describeParseError } from "../../domain/parse.js"
import {
  applyResiliencePatch,
  DEFAULT_RESILIENCE,
  type PatchResilience,
  resilienceProblems,
  ResilienceSettings
} from "../../domain/resilience.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { KeyValue } from "../../platform/store/KeyValue.js"

export interface ResilienceConfigShape {
  /** The settings in force (read on every request: a plain in-memory read). */
  readonly current: () => ResilienceSettings
  /** Validates and persists a partial update; answers the settings in force afterwards. */
  readonly update: (patch: PatchResilience) => Effect.Effect<ResilienceSettings, BadRequest>
}

const NAMESPACE = "settings"
const KEY = "resilience"

/**
 * Resilience settings: defaults, overridden by the document stored in the kv table (read once
 * at start; PATCH /api/resilience writes it and the new values apply at once, in every gateway
 * process sharing state: the `resilience-settings` channel carries the settings after the change).
 */
export class ResilienceConfig extends Context.Tag("gateway/ResilienceConfig")<ResilienceConfig, ResilienceConfigShape>() {
  static readonly layer = Layer.effect(
    ResilienceConfig,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const stored = yield* kv.get(NAMESPACE, KEY)
      let settings = DEFAULT_RESILIENCE
      if (Option.isSome(stored)) {
        const decoded = Schema.decodeUnknownEither(Schema.parseJson(ResilienceSettings))(stored.value)
        if (decoded._tag === "Right")
          settings = {
            ...decoded.right,
            providerBreaker: { ...decoded.right.providerBreaker, local: DEFAULT_RESILIENCE.providerBreaker.local }
          }
        else yield* Effect.logWarning(`stored resilience settings are invalid and were ignored: ${describeParseError(decoded.left)}`)
      }
      // The settings after a change reach the other gateway processes (SharedState), which apply them as theirs.
      const channel = (yield* SharedState.orLocal).channel<ResilienceSettings>("resilience-settings", (next) => {
        settings = next
      })
      return {
        current: () => settings,
        update: (patch) =>
          Effect.gen(function* () {
            const next = applyResiliencePatch(settings, patch)
            const problems = resilienceProblems(next)
            if (problems.length > 0) return yield* new BadRequest({ message: problems.join("; ") })
            yield* kv.set(NAMESPACE, KEY, JSON.stringify(next))
            settings = next
            if (channel.shared) channel.publish(next)
            return next
          })
      }
    })
  )

  /** Fixed settings for tests (defaults overridden by `overrides`, group by group). */
  static readonly layerTest = (overrides: PatchResilience = {}) =>
    Layer.sync(ResilienceConfig, () => {
      let settings = applyResiliencePatch(DEFAULT_RESILIENCE, overrides)
      return {
        current: () => settings,
        update: (patch) =>
          Effect.suspend(() => {
            const next = applyResiliencePatch(settings, patch)
            const problems = resilienceProblems(next)
            if (problems.length > 0) return Effect.fail(new BadRequest({ message: problems.join("; ") }))
            settings = next
            return Effect.succeed(next)
          })
      }
    })
}
