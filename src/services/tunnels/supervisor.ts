/**
 * One supervisor for every tunnel backend: keeps the status object honest (address shown only once registered) and
 * restarts a life that ends while wanted (docs/tunnels.md#status-and-phases).
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import type { TunnelStatus } from "../../domain/tunnels.js"
import type { HostPolicyShape } from "../../platform/http/HostPolicy.js"
import type { HelperRecord } from "./process.js"

export class HelperError extends Error {
  override readonly name = "HelperError"
  constructor(
    message: string,
    /** Trying again cannot help (a checksum mismatch, a refused authtoken, no binary for this platform). */
    readonly permanent: boolean,
    /** The phase it leaves: `needs_auth` when the user has to act (an authtoken, a login). */
    readonly phase: "error" | "needs_auth" = "error"
  ) {
    super(message)
  }
}

/** What a running life tells the supervisor. */
export interface Life {
  /**
   * The helper process (or SDK session) was started: the registration time limit counts from
   * here; a process is recorded (HelperRecord) until the life has ended, for the next start after a crash.
   */
  readonly spawned: (helper?: { readonly pid: number | undefined; readonly command: string }) => void
  /** The public address the helper printed: kept, not shown, until it is registered. */
  readonly address: (url: string) => void
  /** Requests through the address now reach the gateway: `running`, the address shown. */
  readonly registered: (url?: string) => void
  /** Connected no more (the helper reconnects by itself): `starting` again, the address hidden. */
  readonly reconnecting: (reason: string) => void
  /** The helper waits for the user (log in, allow the funnel): `needs_auth` with the reason. */
  readonly needsAuth: (reason: string, extra?: Record<string, unknown>) => void
}

/** One life of a helper: runs until it ends, which is always a failure (HelperError). */
export type RunLife = (life: Life, target: string) => Effect.Effect<never, HelperError, Scope.Scope>

export interface Backend {
  readonly status: (target: string | undefined) => TunnelStatus & Record<string, unknown>
  /** Starts (or keeps) the helper for `target`; nothing when it runs already. */
  readonly start: (target: string) => Effect.Effect<void>
  readonly stop: Effect.Effect<void>
  /** A phase set from outside a life (`needs_auth` before any helper runs, an error found before starting). */
  readonly set: (phase: TunnelStatus["phase"], lastError: string | null, extra?: Record<string, unknown>) => void
  /** Waits (at most `ms`) until the phase is no longer `starting`, or an extra field appears. */
  readonly settle: (ms: number) => Effect.Effect<void>
  readonly running: () => boolean
}

const restarts = Schedule.exponential(Duration.seconds(1), 2).pipe(Schedule.union(Schedule.spaced(Duration.seconds(30))))

export const makeBackend = (options: {
  readonly label: string
  readonly run: RunLife
  readonly runtime: Runtime.Runtime<never>
  readonly hostPolicy: HostPolicyShape
  /** Masks secrets (an authtoken) in anything a helper printed before it becomes `lastError`. */
  readonly mask?: (text: string) => string
  /** Told after every change of the status (the workers of one gateway follow it: workers.ts). */
  readonly onChange?: () => void
  /** How long a life may run without registering or asking for the user before it counts as hung (TUNNEL_REGISTER_TIMEOUT_SECONDS, default
   * 60 s). */
  readonly registerTimeout?: Duration.Duration
  /** Where running helpers are recorded (process.ts): stopped at the next start after a crash. */
  readonly record?: HelperRecord
}): Backend => {
  const mask = options.mask ?? ((t: string) => t)
  const state = {
    phase: "stopped" as TunnelStatus["phase"],
    publicUrl: null as string | null,
    pending: null as string | null,
    lastError: null as string | null,
    extra: {} as Record<string, unknown>,
    fiber: undefined as Fiber.RuntimeFiber<void, never> | undefined,
    /** Which start the fiber is: a supervision that gave up clears `fiber` only if no newer one began. */
    generation: 0,
    /** The current life has registered or is waiting for the user: the registration timeout no longer applies. */
    answered: false,
    /** When the current life's helper was started (undefined while it is being fetched). */
    spawnedAt: undefined as number | undefined,
    /** The current life's helper process, while it runs. */
    pid: undefined as number | undefined,
    hostScope: undefined as Scope.CloseableScope | undefined
  }
  const waiters = new Set<() => void>()
  const changed = () => {
    for (const w of [...waiters]) w()
    options.onChange?.()
  }
  const runSync = Runtime.runSync(options.runtime)

  const forgetHost = () => {
    const scope = state.hostScope
    state.hostScope = undefined
    if (scope) runSync(Scope.close(scope, Exit.void))
  }
  const shown = (url: string | null) => {
    forgetHost()
    state.publicUrl = url
    if (url === null) return
    try {
      const host = new URL(url).host
      const scope = runSync(Scope.make())
      state.hostScope = scope
      runSync(Scope.extend(options.hostPolicy.addPublicHost(host), scope))
    } catch {
      // not a URL: shown, but no host to allow
    }
  }

  /**
   * The callbacks of the life of generation `generation`: a late word from a life that was
   * stopped or replaced (its output after exit, an SDK callback) changes nothing.
   */
  const lifeOf = (generation: number): Life => {
    const current = () => state.generation === generation
    return {
      spawned: (helper) => {
        if (!current()) return
        state.spawnedAt = Date.now()
        if (helper?.pid !== undefined) {
          state.pid = helper.pid
          options.record?.add(helper.pid, helper.command)
        }
      },
      address: (url) => {
        if (!current()) return
        state.pending = url
        changed()
      },
      registered: (url) => {
        if (!current()) return
        const address = url ?? state.pending
        if (address === null) return
        state.pending = address
        state.phase = "running"
        state.answered = true
        state.lastError = null
        state.extra = {}
        shown(address)
        changed()
      },
      reconnecting: (reason) => {
        if (!current()) return
        state.phase = "starting"
        state.lastError = mask(reason)
        shown(null)
        changed()
      },
      needsAuth: (reason, extra) => {
        if (!current()) return
        state.phase = "needs_auth"
        state.answered = true
        state.lastError = mask(reason)
        state.extra = extra ?? {}
        shown(null)
        changed()
      }
    }
  }

  /**
   * A helper that neither registers nor asks for the user within the limit after it was started
   * is hung: ended, and started again. The time before the spawn (a download) does not count.
   */
  const registerTimeout = options.registerTimeout ?? Duration.seconds(60)
  const watchdog: Effect.Effect<never, HelperError> = Effect.suspend(() => {
    if (state.answered) return Effect.never
    const at = state.spawnedAt
    if (at === undefined) return Effect.sleep(Duration.millis(250)).pipe(Effect.zipRight(watchdog))
    const left = at + Duration.toMillis(registerTimeout) - Date.now()
    return left > 0
      ? Effect.sleep(Duration.millis(left)).pipe(Effect.zipRight(watchdog))
      : Effect.fail(
          new HelperError(`the helper registered no connection within ${Duration.format(registerTimeout)}; starting it again`, false)
        )
  })
  const oneLife = (target: string, generation: number) =>
    Effect.suspend(() => {
      state.answered = false
      state.spawnedAt = undefined
      // Once the life's scope has closed its helper has exited: no longer recorded.
      const forget = Effect.sync(() => {
        if (state.pid !== undefined) options.record?.remove(state.pid)
        state.pid = undefined
      })
      return Effect.raceFirst(Effect.scoped(options.run(lifeOf(generation), target)).pipe(Effect.ensuring(forget)), watchdog)
    })

  const supervise = (target: string, generation: number) =>
    oneLife(target, generation).pipe(
      Effect.tapError((e) =>
        Effect.sync(() => {
          if (state.generation !== generation) return
          state.lastError = mask(e.message)
          state.pending = null
          shown(null)
          state.phase = e.permanent ? e.phase : "starting"
          changed()
        }).pipe(
          Effect.zipRight(
            e.permanent
              ? Effect.logError(`${options.label}: ${mask(e.message)}`)
              : Effect.logWarning(`${options.label}: ${mask(e.message)}; starting it again`)
          )
        )
      ),
      Effect.retry({ schedule: restarts, while: (e) => !e.permanent }),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.void
          : Effect.sync(() => {
              if (state.generation !== generation) return
              if (state.phase !== "needs_auth") state.phase = "error"
              state.fiber = undefined
              changed()
            })
      ),
      Effect.asVoid
    )

  // Starts and stops one at a time: a start while a stop still waits for its helper to exit
  // begins after it, never beside it (and is never overwritten by it).
  const lock = Effect.unsafeMakeSemaphore(1)

  return {
    status: (target) => ({
      phase: state.phase,
      running: state.phase === "running",
      publicUrl: state.publicUrl,
      apiUrl: state.publicUrl ? `${state.publicUrl.replace(/\/$/, "")}/v1` : null,
      targetUrl: target ?? null,
      lastError: state.lastError,
      ...state.extra
    }),
    start: (target) =>
      lock.withPermits(1)(
        Effect.sync(() => {
          if (state.fiber !== undefined) return
          state.phase = "starting"
          state.lastError = null
          state.extra = {}
          state.pending = null
          state.generation += 1
          state.fiber = Runtime.runFork(options.runtime)(supervise(target, state.generation))
          changed()
        })
      ),
    stop: lock.withPermits(1)(
      Effect.gen(function* () {
        const fiber = state.fiber
        state.fiber = undefined
        // The stopped life's late words are ignored from here on.
        state.generation += 1
        if (fiber !== undefined) yield* Fiber.interrupt(fiber)
        state.phase = "stopped"
        state.pending = null
        state.extra = {}
        shown(null)
        changed()
      })
    ),
    set: (phase, lastError, extra) => {
      state.phase = phase
      state.lastError = lastError === null ? null : mask(lastError)
      state.extra = extra ?? {}
      changed()
    },
    settle: (ms) =>
      Effect.async<void>((resume) => {
        const done = () => state.phase !== "starting" || Object.keys(state.extra).length > 0
        if (done()) return resume(Effect.void)
        const check = () => {
          if (!done()) return
          waiters.delete(check)
          resume(Effect.void)
        }
        waiters.add(check)
        return Effect.sync(() => waiters.delete(check))
      }).pipe(Effect.timeout(Duration.millis(ms)), Effect.ignore),
    running: () => state.fiber !== undefined
  }
}
