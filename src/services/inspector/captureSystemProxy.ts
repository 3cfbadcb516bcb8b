/**
 * The system-wide proxy (capture mode 4, docs/inspector.md): the OS proxy settings pointed at the
 * HTTP proxy's listener, reverted by the guard timer after INSPECTOR_SYSTEM_PROXY_GUARD_MINUTES.
 * What is changed is saved in the database before it is changed (capture/systemProxy.ts), so it
 * is reverted at stop and, after a crash, at the next start.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { BadRequest, Conflict } from "../../domain/errors.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import { makeSystemProxy, type SavedState } from "./capture/systemProxy.js"
import { type CaptureState, describe, STATE_NS } from "./captureState.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"

const SYSTEM_PROXY_KEY = "system-proxy"

export interface SystemCaptureDeps {
  readonly config: InspectorConfigShape
  readonly kv: KeyValueShape
  /** Runs an effect of the layer's runtime from a promise. */
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  readonly state: CaptureState
  /** Starts the HTTP proxy's listener, which the system proxy points at (captureHttpProxy.ts). */
  readonly startProxy: () => Promise<void>
}

/** The system proxy (`systemProxy`, its saved state in the database), its guarded apply and its revert. */
export const makeSystemCapture = ({ config, kv, run, state, startProxy }: SystemCaptureDeps) => {
  const systemProxy = makeSystemProxy({
    home: config.systemProxyHome,
    store: {
      load: () =>
        run(Effect.map(kv.get(STATE_NS, SYSTEM_PROXY_KEY), (o) => (Option.isSome(o) ? (JSON.parse(o.value) as SavedState) : undefined))),
      save: (s) => run(kv.set(STATE_NS, SYSTEM_PROXY_KEY, JSON.stringify(s))),
      clear: () => run(Effect.asVoid(kv.remove(STATE_NS, SYSTEM_PROXY_KEY)))
    }
  })
  const revert = async () => {
    if (state.guard) clearTimeout(state.guard)
    state.guard = undefined
    const result = await systemProxy.revert()
    state.systemApplied = undefined
    return result
  }

  /** At start: what a previous run left applied (a crash, a kill) is reverted. */
  const recover = Effect.gen(function* () {
    const recovered = yield* Effect.promise(() =>
      systemProxy.recover().catch((e) => (state.systemError = `revert after a crash failed: ${describe(e)}`))
    )
    if (recovered === true) yield* Effect.logWarning("inspector: the system proxy settings left applied by a previous run were reverted")
  })

  /** `capture-modes/system-proxy`: applied (the HTTP proxy started first, the guard timer set) or reverted. */
  const set = (action: "apply" | "revert"): Effect.Effect<void, Conflict | BadRequest> =>
    Effect.gen(function* () {
      if (action === "apply") {
        if ((yield* Effect.promise(() => systemProxy.status())).applied)
          return yield* Effect.fail(new Conflict({ message: "the system proxy is already applied" }))
        const started = yield* Effect.promise(() =>
          startProxy().then(
            () => undefined,
            (e: unknown) => e
          )
        )
        if (started !== undefined)
          return yield* Effect.fail(
            new Conflict({ message: `the HTTP proxy listener is needed and could not start: ${describe(started)}` })
          )
        const applied = yield* Effect.promise(() =>
          systemProxy.apply({ host: "127.0.0.1", port: state.proxy!.port }).then(
            (a) => a,
            (e: unknown) => new Error(describe(e))
          )
        )
        if (applied instanceof Error) {
          state.systemError = applied.message
          return yield* Effect.fail(
            new BadRequest({ message: `the system proxy could not be applied (nothing was left changed): ${applied.message}` })
          )
        }
        state.systemError = null
        state.systemApplied = { appliedAt: applied.appliedAt, changes: applied.changes, notes: applied.notes }
        state.guard = setTimeout(() => {
          void revert().catch(() => undefined)
        }, config.systemProxyGuardMinutes * 60_000)
        state.guard.unref()
      } else {
        yield* Effect.promise(() => revert().catch((e) => (state.systemError = describe(e))))
      }
    })

  return { systemProxy, recover, set }
}
