import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { storeUnavailable } from "./dialect.js"
import { dataVersion } from "./sqlite.js"
import { SqliteWriterThread } from "./SqliteWriterThread.js"
import { StoreKind } from "./StoreKind.js"

/**
 * How in-memory caches learn that another process committed: a number that only grows, which `peek()` answers without I/O
 * while fresh (the contract and each store's layer: docs/internals.md#seam-3-the-store-dialect, "StoreVersion").
 */
export interface StoreVersionShape {
  /** The version, checked against the database at most once per interval. */
  readonly current: Effect.Effect<number>
  /** The version when no check is due (so `current` would answer it without reading), else undefined. */
  readonly peek: () => number | undefined
  /**
   * The version read from the database now, whenever the last check was: the background rounds
   * (`followVersion`) renew it before `peek` would stop answering, so a request that comes after
   * a quiet second still finds the caches fresh (the common path takes only those).
   */
  readonly renew: Effect.Effect<number>
  /**
   * This process has just replaced data behind every cache (a restore, an imported bundle): the
   * version moves now, so every cache loads again on its next read. Waiting for `current` to
   * move instead is a race: a check made after other commits but before the replacement moves
   * it too, and a cache loaded then holds the data from before.
   */
  readonly changed: Effect.Effect<void>
}

/**
 * A version over `probe`, a counter the database changes when another process commits, read
 * at most once per `intervalMs`: in-memory caches stay cheap on the request path yet see
 * `gateway keys add` within a second.
 */
export const polledVersion = (probe: Effect.Effect<number>, intervalMs: number): StoreVersionShape => {
  let version = 0
  let lastValue: number | undefined
  let lastCheck = 0
  // Whether the last check is less than `intervalMs` old, for `peek`: set by the check and cleared
  // by a timer, so that `peek`, which every request calls several times (each flag and cache it
  // reads), reads no clock: each Date.now() there was a number allocated on the heap. The timer
  // fires no sooner than the interval's end, so `peek` answers the version no longer than the
  // check's own interval allows (a little later at most, by the timer's lateness).
  let fresh = false
  let expiry: ReturnType<typeof setTimeout> | undefined
  const expire = () => {
    fresh = false
  }
  const checkedNow = (t: number) => {
    lastCheck = t
    // No interval: a check is always due, and `peek` never answers.
    if (intervalMs <= 0) return
    fresh = true
    // One timer for the life of the version, moved to each check's interval; it does not keep the process alive.
    if (expiry === undefined) expiry = setTimeout(expire, intervalMs).unref()
    else expiry.refresh()
  }
  /** Reads the probe, the check made at `t`. */
  const check = (t: number) => {
    checkedNow(t)
    return Effect.map(probe, (v) => {
      if (lastValue !== undefined && v !== lastValue) version++
      lastValue = v
      return version
    })
  }
  return {
    changed: Effect.sync(() => {
      version++
      // What the probe reads now already includes the replacement: no second reload for it.
      lastCheck = 0
      fresh = false
    }),
    peek: () => (fresh ? version : undefined),
    current: Effect.suspend(() => {
      const t = Date.now()
      return t - lastCheck < intervalMs ? Effect.succeed(version) : check(t)
    }),
    renew: Effect.suspend(() => check(Date.now()))
  }
}

export class StoreVersion extends Context.Tag("gateway/StoreVersion")<StoreVersion, StoreVersionShape>() {
  /**
   * SQLite: the cached tables' change counter (`store_changes`; `PRAGMA data_version` without it), polled at most once per
   * `intervalMs`. PostgreSQL (`StoreKind` says which): LISTEN on the tables' change notifications (src/platform/store/postgres.ts).
   */
  static readonly layer = (intervalMs = 1000) =>
    Layer.scoped(
      StoreVersion,
      Effect.gen(function* () {
        const kind = yield* Effect.serviceOption(StoreKind)
        if (Option.isSome(kind) && kind.value._tag === "postgres") {
          const pg = yield* Effect.promise(() => import("./postgres.js"))
          return yield* pg.listenedVersion(kind.value.url)
        }
        const sql = yield* SqlClient.SqlClient
        // The counter the cached tables' triggers move (migration 0021): usage rows, audit rows and
        // the like, which no cache is loaded from, leave it alone, whoever writes them.
        const changes = sql<{ n: number }>`SELECT n FROM store_changes WHERE id = 1`.pipe(Effect.map((rows) => rows[0]?.n ?? 0))
        // Without it (a database this build has not migrated): PRAGMA data_version, on the batch
        // writer's thread when it runs (the main connection's moves with every batch the thread commits).
        const thread = Option.getOrUndefined(yield* Effect.serviceOption(SqliteWriterThread))?.writer
        const versionProbe =
          thread === undefined
            ? dataVersion(sql)
            : Effect.suspend(() =>
                thread.alive()
                  ? Effect.catchAll(
                      Effect.tryPromise(() => thread.dataVersion()),
                      () => dataVersion(sql)
                    )
                  : dataVersion(sql)
              )
        const probe = Effect.catchAll(changes, () => versionProbe)
        return polledVersion(probe, intervalMs)
      })
    )
}

/**
 * After a load the store could not serve (unreachable, down, its disk failed), the value last
 * loaded is served this long before the store is tried again.
 */
const RETRY_UNAVAILABLE_MS = 1_000

/**
 * A value loaded from the database and kept in memory until this process changes it
 * (`invalidate`) or another process commits (`StoreVersion`). A load the store cannot serve
 * while a value is in memory serves that value, and tries again a second later: a change
 * notice that arrived just before the database went away does not fail the requests that read
 * the cache (docs/resilience.md#when-the-store-fails).
 */
export const makeCachedLoad = <A>(version: StoreVersionShape, load: Effect.Effect<A>) => {
  let cached: { readonly value: A; readonly version: number; readonly generation: number } | undefined
  let generation = 0
  let retryAt = 0
  const load_ = (v: number) => {
    const gen = generation
    return Effect.matchCauseEffect(load, {
      onSuccess: (value) => {
        cached = { value, version: v, generation: gen }
        retryAt = 0
        return Effect.succeed(value)
      },
      onFailure: (cause) => {
        if (cached === undefined || storeUnavailable(cause) === undefined) return Effect.failCause(cause)
        retryAt = Date.now() + RETRY_UNAVAILABLE_MS
        return Effect.succeed(cached.value)
      }
    })
  }
  const fresh = (v: number | undefined) =>
    v !== undefined && cached !== undefined && cached.version === v && cached.generation === generation
  // The request path reads these on every call: a fresh cache answers in one step.
  const get = Effect.suspend(() => {
    if (fresh(version.peek())) return Effect.succeed(cached!.value)
    if (cached !== undefined && retryAt > Date.now()) return Effect.succeed(cached.value)
    return Effect.flatMap(version.current, (v) => (fresh(v) ? Effect.succeed(cached!.value) : load_(v)))
  })
  return {
    get,
    /** The value when it is known fresh without reading anything, else undefined (use `get`). */
    peek: (): A | undefined => (fresh(version.peek()) ? cached!.value : undefined),
    /** The value last loaded, fresh or not (undefined before the first load): for what may lag a moment. */
    last: (): A | undefined => cached?.value,
    invalidate: Effect.sync(() => {
      generation++
    })
  }
}

/**
 * For state kept in memory and loaded whole (budgets, token limits): runs `load` now and answers
 * the `refresh` to call before reading, which loads again only when another process committed
 * (a `makeCachedLoad` of nothing, so a store outage keeps what is in memory the same way).
 * Without a StoreVersion (tests of a service alone) `refresh` does nothing. A fresh check costs
 * one step: it is on the request path.
 */
export const makeVersionedReload = (version: Option.Option<StoreVersionShape>, load: Effect.Effect<void>) => {
  if (Option.isNone(version)) return Effect.as(load, Effect.void)
  // `true` once loaded: `peek` answers it while fresh, undefined when a load is due.
  const loaded = makeCachedLoad(version.value, Effect.as(load, true))
  const refresh = Effect.suspend(() => (loaded.peek() === undefined ? Effect.asVoid(loaded.get) : Effect.void))
  return Effect.as(loaded.get, refresh)
}

/** How often the rounds of `followVersion` run without a version: the interval `StoreVersion.layer` checks the database at. */
const FOLLOW_EVERY_MS = 1_000

/**
 * How often the rounds following a version start, each after renewing it (`renew`): on a fixed
 * interval from one start to the next (rounds that run long do not push the next renewal back),
 * sooner than the interval a polled version's freshness lasts (`StoreVersion.layer`'s, a second)
 * by more than a timer's lateness. Rounds spaced a whole interval after the last one ended left a
 * gap in every cycle (the round's own time and the timer's lateness) in which `peek` answered
 * nothing: a request that came then went to the pipeline as "cold" (docs/performance.md, "A cold
 * gap every second").
 */
export const FOLLOW_RENEW_EVERY_MS = 850

/** The rounds following one StoreVersion, and the one fiber that runs them while there are any. */
interface Followers {
  readonly rounds: Set<Effect.Effect<void>>
  fiber: Fiber.RuntimeFiber<unknown> | undefined
}
const followersOf = new WeakMap<StoreVersionShape, Followers>()

/**
 * Runs `round` every FOLLOW_RENEW_EVERY_MS for as long as the calling scope is open: the caches
 * that look at the StoreVersion in the background (settings, policies, the directory, plugins,
 * MCP servers, shadow targets) each had a timer of their own, waking an idle gateway several
 * times a second for what one wake-up does: the rounds following the same version share one
 * timer, whose tick renews the version first (so the rounds find it fresh, and so does the
 * request path's `peek` until the next tick). Without a version (a service tested alone), `round`
 * gets its own timer, every second. A failed round is said at debug level and does not stop the
 * others; a renewal that fails is a warning once, until one succeeds again.
 */
export const followVersion = (
  version: Option.Option<StoreVersionShape>,
  round: Effect.Effect<void>
): Effect.Effect<void, never, Scope.Scope> => {
  const guarded = Effect.catchAllCause(round, (cause) => Effect.logDebug("store version follower: round failed", cause))
  if (Option.isNone(version)) return Effect.asVoid(Effect.forkScoped(Effect.repeat(guarded, Schedule.spaced(FOLLOW_EVERY_MS))))
  return Effect.gen(function* () {
    let followers = followersOf.get(version.value)
    if (followers === undefined) {
      followers = { rounds: new Set(), fiber: undefined }
      followersOf.set(version.value, followers)
    }
    const group = followers
    group.rounds.add(guarded)
    if (group.fiber === undefined) {
      // A daemon: it outlives the scope of whichever follower started it, and stops with the last one.
      // Each tick reads the version once (`renew`), then the rounds find it fresh.
      let failing = false
      const renew = Effect.matchCauseEffect(version.value.renew, {
        onSuccess: () =>
          Effect.sync(() => {
            failing = false
          }),
        onFailure: (cause) => {
          const first = !failing
          failing = true
          return first
            ? Effect.logWarning("store version: could not read the store's change counter", cause)
            : Effect.logDebug("store version: the change counter is still unreadable", cause)
        }
      })
      const tick = Effect.zipRight(
        renew,
        Effect.suspend(() => Effect.forEach([...group.rounds], (r) => r, { discard: true }))
      )
      group.fiber = yield* Effect.forkDaemon(Effect.schedule(tick, Schedule.fixed(FOLLOW_RENEW_EVERY_MS)))
    }
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        group.rounds.delete(guarded)
        if (group.rounds.size > 0 || group.fiber === undefined) return Effect.void
        const fiber = group.fiber
        group.fiber = undefined
        return Fiber.interrupt(fiber)
      })
    )
  })
}
