/**
 * Capture modes 2-4: custom hosts, the HTTP proxy and the system proxy. What they change on the system is recorded first and reverted
 * on stop (SIGTERM included) and at the next start after a crash; the modes that were on come back (docs/inspector.md#capture-modes).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type { BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { CaptureModes, CustomHostSchema, HostList } from "../../domain/inspector.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { removeBlock } from "./capture/hostsFile.js"
import { type AddHost, makeCustomHosts } from "./captureHosts.js"
import { makeHttpProxy } from "./captureHttpProxy.js"
import { forwarded, servedBy } from "./captureRemote.js"
import { listenerSettings, loadCaptureState } from "./captureState.js"
import { captureStatus } from "./captureStatus.js"
import { makeSystemCapture } from "./captureSystemProxy.js"
import { Inspector } from "./Inspector.js"

type Modes = typeof CaptureModes.Type
type CustomHost = typeof CustomHostSchema.Type
type Hosts = typeof HostList.Type

/** Under `--workers` a call may fail with ServiceUnavailable: worker 1, which holds the listeners, did not answer. */
export interface CaptureShape {
  readonly modes: Effect.Effect<Modes, ServiceUnavailable>
  readonly httpProxy: (action: "start" | "stop") => Effect.Effect<Modes, Conflict | BadRequest | ServiceUnavailable>
  readonly systemProxy: (action: "apply" | "revert") => Effect.Effect<Modes, Conflict | BadRequest | ServiceUnavailable>
  readonly tlsIntercept: (enabled: boolean) => Effect.Effect<Modes, BadRequest | ServiceUnavailable>
  readonly hosts: {
    readonly list: Effect.Effect<Hosts, ServiceUnavailable>
    readonly add: (input: AddHost) => Effect.Effect<CustomHost, BadRequest | Conflict | Forbidden | ServiceUnavailable>
    readonly remove: (host: string) => Effect.Effect<CustomHost, NotFound | Forbidden | ServiceUnavailable>
    readonly patch: (host: string, enabled: boolean) => Effect.Effect<CustomHost, NotFound | Forbidden | Conflict | ServiceUnavailable>
  }
  readonly caPem: Effect.Effect<string, ServiceUnavailable>
}

export class Capture extends Context.Tag("gateway/InspectorCapture")<Capture, CaptureShape>() {
  static readonly layer = Layer.scoped(
    Capture,
    Effect.gen(function* () {
      const inspector = yield* Inspector
      // `--workers`: worker 1 holds the listeners; the others forward their calls to it.
      if (inspector.node !== undefined && !inspector.node.holdsCapture) return forwarded(inspector.node)
      const kv = yield* KeyValue
      const flags = yield* FeatureFlags
      const config = inspector.config
      const sink = inspector.core.sink
      const run = Runtime.runPromise(yield* Effect.runtime<never>())
      const listeners = yield* listenerSettings(config, flags)
      const state = yield* loadCaptureState(kv)

      // The parts: the modes 2, 3 and 4, and what GET capture-modes shows of them.
      const proxy = makeHttpProxy({ config, sink, kv, state, listeners })
      const hosts = makeCustomHosts({ config, sink, kv, run, state, listeners })
      const system = makeSystemCapture({ config, kv, run, state, startProxy: proxy.start })
      const modes = captureStatus({ inspector, state, ca: listeners.ca, systemProxy: system.systemProxy })

      // Start: a crash is undone, what was on comes back.
      yield* system.recover
      yield* hosts.restore
      yield* proxy.restore

      // Stop (SIGTERM included): the system proxy reverted, the listeners closed, the hosts file's block removed.
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          if (state.guard) clearTimeout(state.guard)
          await Promise.allSettled([
            state.systemApplied || (await system.systemProxy.status()).applied ? system.systemProxy.revert() : Promise.resolve(),
            proxy.stop(),
            state.mitm?.close(),
            state.hosts.some((h) => h.enabled) ? removeBlock(config.hostsFile) : Promise.resolve()
          ])
        })
      )

      const shape: CaptureShape = {
        modes,
        httpProxy: (action) => Effect.zipRight(proxy.set(action), modes),
        systemProxy: (action) => Effect.zipRight(system.set(action), modes),
        tlsIntercept: (enabled) => Effect.zipRight(proxy.intercept(enabled), modes),
        hosts: { list: hosts.list, add: hosts.add, remove: hosts.remove, patch: hosts.patch },
        caPem: Effect.map(
          Effect.promise(() => listeners.ca()),
          (c) => c.certPem
        )
      }
      inspector.node?.serve(servedBy(shape, run))
      return shape
    })
  )
}
