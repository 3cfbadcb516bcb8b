import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Runtime from "effect/Runtime"
import { DEFAULT_PRIORITY, HOOK_EVENTS, type HookEvent, type LifecycleListener, type RequestHook } from "./hookEvents.js"
import { emptyTable, type HookTable, nextSequence, validated, withHook } from "./hooks.js"

const NONE: ReadonlyArray<never> = Object.freeze([])

export interface RegisteredHook {
  readonly name: string
  readonly priority: number
  readonly events: ReadonlyArray<HookEvent>
}

export interface RequestHooksShape {
  /** Adds a hook for every request from now on; answers the function that removes it (calling it twice is harmless). */
  readonly register: (hook: RequestHook) => () => void
  /** Adds a listener for every request from now on; answers the function that removes it. */
  readonly listen: (listener: LifecycleListener) => () => void
  /** The handlers now registered, one array per event (a request takes this once, when it begins). */
  readonly current: () => HookTable
  /** The registered hooks in run order (ties: registration order). */
  readonly registered: () => ReadonlyArray<RegisteredHook>
}

/** A registry; `runtime` logs failures and runs write-path Effects (the layer passes its own). */
export const makeRequestHooks = (runtime?: Runtime.Runtime<never>): RequestHooksShape => {
  let hooks: ReadonlyArray<{ readonly hook: RequestHook; readonly seq: number }> = []
  let listeners: ReadonlyArray<LifecycleListener> = NONE
  let table = emptyTable(runtime)
  const rebuild = () => {
    let t = emptyTable(runtime, listeners)
    for (const h of hooks) t = withHook(t, h.hook, h.seq, false)
    table = t
  }
  return {
    listen: (listener) => {
      listeners = [...listeners, listener]
      rebuild()
      let removed = false
      return () => {
        if (removed) return
        removed = true
        listeners = listeners.filter((l) => l !== listener)
        rebuild()
      }
    },
    register: (hook) => {
      validated(hook)
      const item = { hook, seq: nextSequence() }
      hooks = [...hooks, item]
      table = withHook(table, hook, item.seq, false)
      let removed = false
      return () => {
        if (removed) return
        removed = true
        hooks = hooks.filter((h) => h !== item)
        rebuild()
      }
    },
    current: () => table,
    registered: () =>
      [...hooks]
        .sort((a, b) => (a.hook.priority ?? DEFAULT_PRIORITY) - (b.hook.priority ?? DEFAULT_PRIORITY) || a.seq - b.seq)
        .map(({ hook }) => ({
          name: hook.name,
          priority: hook.priority ?? DEFAULT_PRIORITY,
          events: HOOK_EVENTS.filter((e) => hook[e] !== undefined)
        }))
  }
}

/**
 * The request lifecycle's registry (docs/ARCHITECTURE.md, "Seam 2"): hooks (guardrails,
 * policies, compression, plugins) register with `register`; listeners (observability, the
 * webhooks' request events, the traffic inspector) with `listen`.
 */
export class RequestHooks extends Context.Tag("gateway/RequestHooks")<RequestHooks, RequestHooksShape>() {
  static readonly layer = Layer.effect(RequestHooks, Effect.map(Effect.runtime<never>(), makeRequestHooks))
}
