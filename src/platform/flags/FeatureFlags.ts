import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { BadRequest } from "../../domain/errors.js"
import type { FeatureFlagList, FeatureFlagView, SetFeatureFlagResult } from "../../domain/flags.js"
import { KeyValue } from "../store/KeyValue.js"
import { makeCachedLoad, StoreVersion } from "../store/StoreVersion.js"
import {
  type BooleanFlagKey,
  FLAG_DEFINITIONS,
  type FlagDefinition,
  type FlagKey,
  FLAGS_BY_KEY,
  isActiveValue,
  isTruthy,
  validateFlagValue
} from "./catalog.js"

export const FLAG_NAMESPACE = "feature_flags"

type Source = "db" | "env" | "default"

export interface FeatureFlagsShape {
  /** Value the running process uses. Restart flags keep the value they had at start. */
  readonly value: (key: FlagKey) => Effect.Effect<string>
  readonly enabled: (key: BooleanFlagKey) => Effect.Effect<boolean>
  /** The flag now when that needs no database read (the usual case), else undefined: use `enabled`. */
  readonly peekEnabled: (key: BooleanFlagKey) => boolean | undefined
  /** Any flag's value now when that needs no database read, else undefined: use `value`. */
  readonly peekValue: (key: FlagKey) => string | undefined
  readonly list: Effect.Effect<FeatureFlagList>
  /** Sets a database override; `undefined` removes it. */
  readonly set: (key: string, value: string | undefined) => Effect.Effect<SetFeatureFlagResult, BadRequest>
  /** Removes every database override; returns how many there were. */
  readonly clear: Effect.Effect<number>
}

/** db override > environment (set and non-empty) > default. */
export const resolveFlag = (
  def: FlagDefinition,
  overrides: ReadonlyMap<string, string>,
  env: ReadonlyMap<string, string>
): { readonly value: string; readonly source: Source } => {
  const db = overrides.get(def.key)
  if (db !== undefined) return { value: db, source: "db" }
  const e = env.get(def.key)
  if (e !== undefined) return { value: e, source: "env" }
  return { value: def.defaultValue, source: "default" }
}

/** resolveFlag's value alone: read several times by every request, so no object is made for it. */
const flagValue = (def: FlagDefinition, overrides: ReadonlyMap<string, string>, env: ReadonlyMap<string, string>): string =>
  overrides.get(def.key) ?? env.get(def.key) ?? def.defaultValue

/**
 * isTruthy for a flag's value, without its trim and lower-casing for the two values nearly every
 * flag has ("true", "false": the definitions' defaults): each made a new string, and a request reads
 * about ten flags. Any other value is read by isTruthy as before.
 */
const truthy = (value: string): boolean => (value === "true" ? true : value === "false" ? false : isTruthy(value))

/**
 * Feature flags resolved as database override > environment variable (set and non-empty) >
 * definition default. Overrides live in the `kv` table under namespace `feature_flags` and
 * are cached in memory; changes from another process are seen within a second.
 */
export class FeatureFlags extends Context.Tag("gateway/FeatureFlags")<FeatureFlags, FeatureFlagsShape>() {
  static readonly layer = Layer.effect(
    FeatureFlags,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const version = yield* StoreVersion
      // The environment is read once, through Config, so tests can supply their own.
      const env = new Map<string, string>()
      for (const def of FLAG_DEFINITIONS) {
        const v = yield* Config.string(def.key).pipe(Config.option, Effect.orDie)
        if (Option.isNone(v) || v.value.trim() === "") continue
        if (def.type === "enum" && !def.enumValues?.includes(v.value.trim())) {
          yield* Effect.logWarning(
            `ignoring ${def.key}=${v.value}: expected one of ${def.enumValues?.join(", ")}; using ${def.defaultValue}`
          )
          continue
        }
        if (def.type === "boolean" && !validateFlagValue(def, v.value).ok) {
          yield* Effect.logWarning(`${def.key}=${v.value} is not a boolean value (true, false, 1, 0, yes, no): it counts as off`)
        }
        env.set(def.key, v.value.trim())
      }
      const overrides = makeCachedLoad(
        version,
        Effect.map(kv.entries(FLAG_NAMESPACE), (rows) => new Map(rows.filter(([k]) => FLAGS_BY_KEY.has(k))))
      )
      // Restart flags are frozen at their start-up value.
      const atStart = new Map<string, string>()
      const startOverrides = yield* overrides.get
      for (const def of FLAG_DEFINITIONS) {
        if (def.requiresRestart) atStart.set(def.key, resolveFlag(def, startOverrides, env).value)
      }

      const resolveNow = (key: FlagKey, o: ReadonlyMap<string, string>) => {
        const frozen = atStart.get(key)
        if (frozen !== undefined) return frozen
        return flagValue(FLAGS_BY_KEY.get(key)!, o, env)
      }
      // Every request reads flags: a fresh cache answers without a chain of effects.
      const value = (key: FlagKey) =>
        Effect.suspend(() => {
          const o = overrides.peek()
          return o !== undefined ? Effect.succeed(resolveNow(key, o)) : Effect.map(overrides.get, (fresh) => resolveNow(key, fresh))
        })
      const peekEnabled = (key: BooleanFlagKey): boolean | undefined => {
        const o = overrides.peek()
        return o === undefined ? undefined : truthy(resolveNow(key, o))
      }

      const peekValue = (key: FlagKey): string | undefined => {
        const o = overrides.peek()
        return o === undefined ? undefined : resolveNow(key, o)
      }

      const view = (def: FlagDefinition, o: ReadonlyMap<string, string>): FeatureFlagView => {
        const r = resolveFlag(def, o, env)
        const frozen = atStart.get(def.key)
        return {
          key: def.key,
          label: def.label,
          description: def.description,
          category: def.category,
          type: def.type,
          enumValues: def.enumValues,
          defaultValue: def.defaultValue,
          effectiveValue: r.value,
          source: r.source,
          requiresRestart: def.requiresRestart,
          pendingRestart: frozen !== undefined && frozen !== r.value,
          warningLevel: def.warningLevel
        }
      }

      const list = Effect.map(overrides.get, (o): FeatureFlagList => {
        const flags = FLAG_DEFINITIONS.map((d) => view(d, o))
        const active = flags.filter((f) => isActiveValue(FLAGS_BY_KEY.get(f.key)!, f.effectiveValue)).length
        return {
          flags,
          summary: {
            total: flags.length,
            active,
            inactive: flags.length - active,
            overriddenByDb: flags.filter((f) => f.source === "db").length,
            overriddenByEnv: flags.filter((f) => f.source === "env").length
          }
        }
      })

      const set = (key: string, next: string | undefined) =>
        Effect.gen(function* () {
          const def = FLAGS_BY_KEY.get(key)
          if (!def) return yield* new BadRequest({ message: `unknown feature flag: ${key}` })
          const before = resolveFlag(def, yield* overrides.get, env)
          if (next === undefined) {
            yield* kv.remove(FLAG_NAMESPACE, key)
          } else {
            const checked = validateFlagValue(def, next)
            if (!checked.ok) return yield* new BadRequest({ message: checked.reason })
            yield* kv.set(FLAG_NAMESPACE, key, checked.value)
          }
          yield* overrides.invalidate
          const after = resolveFlag(def, yield* overrides.get, env)
          yield* Effect.logInfo(
            `feature flag ${key}: ${before.value} (${before.source}) -> ${after.value} (${after.source})` +
              (def.requiresRestart ? " (takes effect after restart)" : "")
          )
          return {
            key,
            effectiveValue: after.value,
            source: after.source,
            previousValue: before.value,
            previousSource: before.source,
            requiresRestart: def.requiresRestart
          }
        })

      const clear = Effect.gen(function* () {
        const n = yield* kv.clear(FLAG_NAMESPACE)
        yield* overrides.invalidate
        return n
      })

      return {
        value,
        enabled: (key) =>
          Effect.suspend(() => {
            const v = peekEnabled(key)
            return v !== undefined ? Effect.succeed(v) : Effect.map(value(key), truthy)
          }),
        peekEnabled,
        peekValue,
        list,
        set,
        clear
      }
    })
  )
}
