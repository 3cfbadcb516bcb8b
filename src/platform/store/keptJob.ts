/**
 * A background job whose state is kept in the database as it goes (KeyValue `namespace`/`key`):
 * written when it starts, at most once a second while it changes, and when it ends. Any gateway
 * on the database reads its progress; a job still marked running whose writes stopped (its
 * process ended) reads as `interrupted`. Replay's jobs and the compatibility matrix's runs are
 * such jobs.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { KeyValueShape } from "./KeyValue.js"

/** What every kept job's state has. */
export interface KeptState {
  readonly state: "running" | "done" | "interrupted"
  readonly finishedAt: string | null
  /** When it was last written (ms). */
  readonly savedAt: number
}

/** A running job's state is written at most this often (and at its end). */
export const KEPT_SAVE_EVERY_MS = 1_000
/** A running job not written for this long belongs to a process that stopped. */
export const KEPT_STALE_MS = 30_000

export interface KeptJob<S extends KeptState> {
  /** Its state now, in this process. */
  readonly current: () => S
  /** Changes its state; written within a second. */
  readonly update: (f: (s: S) => S) => void
  /**
   * Runs `work` in `scope` (in the background), writing the state while it changes; at its end
   * the state is `done` (`interrupted` when the gateway stops first) and written. A failure of
   * `work` is logged; the job ends `done` with what it did. `onEnd` runs once the end is written.
   */
  readonly launch: (work: Effect.Effect<void>, scope: Scope.Scope, onEnd?: () => void) => Effect.Effect<void>
}

/** Writes `initial` (running) and answers the job. */
export const startKept = <S extends KeptState>(kv: KeyValueShape, namespace: string, key: string, initial: S): Effect.Effect<KeptJob<S>> =>
  Effect.map(kv.set(namespace, key, JSON.stringify(initial)), () => {
    let state = initial
    let dirty = false
    const save = (s: S) => kv.set(namespace, key, JSON.stringify(s))
    const flush = Effect.suspend(() => {
      if (!dirty) return Effect.void
      dirty = false
      state = { ...state, savedAt: Date.now() }
      return save(state)
    })
    return {
      current: () => state,
      update: (f) => {
        state = f(state)
        dirty = true
      },
      launch: (work, scope, onEnd) =>
        Effect.asVoid(
          Effect.forkIn(
            work.pipe(
              Effect.raceFirst(Effect.forever(Effect.zipRight(Effect.sleep(KEPT_SAVE_EVERY_MS), flush)).pipe(Effect.as(undefined))),
              Effect.catchAllCause((cause) => Effect.logWarning(`${namespace} ${key} stopped on an error`, cause)),
              Effect.onExit((exit) =>
                Effect.suspend(() => {
                  state = {
                    ...state,
                    state: Exit.isInterrupted(exit) ? "interrupted" : "done",
                    finishedAt: new Date().toISOString(),
                    savedAt: Date.now()
                  }
                  return Effect.ensuring(
                    save(state),
                    Effect.sync(() => onEnd?.())
                  )
                })
              )
            ),
            scope
          )
        )
    }
  })

/** A kept job's state as written; one still running that nobody wrote for KEPT_STALE_MS reads `interrupted`. */
export const readKept = <S extends KeptState>(kv: KeyValueShape, namespace: string, key: string): Effect.Effect<Option.Option<S>> =>
  Effect.map(
    kv.get(namespace, key),
    Option.map((raw) => {
      const stored = JSON.parse(raw) as S
      return stored.state === "running" && Date.now() - stored.savedAt > KEPT_STALE_MS ? { ...stored, state: "interrupted" } : stored
    })
  )
