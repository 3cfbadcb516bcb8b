import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

export interface StoreVersionShape {
  /**
   * A number that changes when another process (the CLI, a second gateway) committed to the
   * database. Checked with `PRAGMA data_version` at most once per interval, so in-memory
   * caches stay cheap on the request path yet see `gateway keys add` within a second.
   */
  readonly current: Effect.Effect<number>
  /** The version when no check is due (so `current` would answer it without reading), else undefined. */
  readonly peek: () => number | undefined
}

export class StoreVersion extends Context.Tag("gateway/StoreVersion")<StoreVersion, StoreVersionShape>() {
  static readonly layer = (intervalMs = 1000) =>
    Layer.effect(
      StoreVersion,
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        let version = 0
        let lastValue: number | undefined
        let lastCheck = 0
        const read = sql<{ data_version: number }>`PRAGMA data_version`.pipe(
          Effect.map((rows) => rows[0]?.data_version ?? 0),
          Effect.orDie
        )
        return {
          peek: () => (Date.now() - lastCheck < intervalMs ? version : undefined),
          current: Effect.suspend(() => {
            const t = Date.now()
            if (t - lastCheck < intervalMs) return Effect.succeed(version)
            lastCheck = t
            return Effect.map(read, (v) => {
              if (lastValue !== undefined && v !== lastValue) version++
              lastValue = v
              return version
            })
          })
        }
      })
    )
}

/**
 * A value loaded from the database and kept in memory until this process changes it
 * (`invalidate`) or another process commits (`StoreVersion`).
 */
export const makeCachedLoad = <A>(version: StoreVersionShape, load: Effect.Effect<A>) => {
  let cached: { readonly value: A; readonly version: number; readonly generation: number } | undefined
  let generation = 0
  const load_ = (v: number) => {
    const gen = generation
    return Effect.map(load, (value) => {
      cached = { value, version: v, generation: gen }
      return value
    })
  }
  // The request path reads these on every call: a fresh cache answers in one step.
  const get = Effect.suspend(() => {
    const known = version.peek()
    if (known !== undefined && cached && cached.version === known && cached.generation === generation) return Effect.succeed(cached.value)
    return Effect.flatMap(version.current, (v) => (cached && cached.version === v && cached.generation === generation ? Effect.succeed(cached.value) : load_(v)))
  })
  return {
    get,
    /** The value when it is known fresh without reading anything, else undefined (use `get`). */
    peek: (): A | undefined => {
      const known = version.peek()
      return known !== undefined && cached && cached.version === known && cached.generation === generation ? cached.value : undefined
    },
    invalidate: Effect.sync(() => {
      generation++
    })
  }
}

/**
 * For state kept in memory and loaded whole (budgets, token limits): runs `load` now and answers
 * the `refresh` to call before reading, which loads again only when another process committed.
 * Without a StoreVersion (tests of a service alone) `refresh` does nothing. A fresh check costs
 * one step: it is on the request path.
 */
export const makeVersionedReload = (version: Option.Option<StoreVersionShape>, load: Effect.Effect<void>) =>
  Effect.gen(function* () {
    yield* load
    if (Option.isNone(version)) return Effect.void
    const v = version.value
    let seen = yield* v.current
    const reload = Effect.flatMap(v.current, (n) =>
      n === seen
        ? Effect.void
        : Effect.tap(load, () => {
            seen = n
          })
    )
    return Effect.suspend(() => (v.peek() === seen ? Effect.void : reload))
  })
