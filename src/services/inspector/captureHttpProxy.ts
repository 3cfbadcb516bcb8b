/**
 * The explicit HTTP proxy (capture mode 3, docs/inspector.md): plain HTTP and CONNECT on
 * 127.0.0.1, TLS interception opt-in. Whether it is on, and whether it intercepts TLS, is saved,
 * so a restart brings it back.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { BadRequest, Conflict } from "../../domain/errors.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import { startHttpProxy } from "./capture/proxy.js"
import { type CaptureState, describe, type ListenerSettings, STATE_NS } from "./captureState.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"
import type { InspectorSink } from "./types.js"

export interface HttpProxyDeps {
  readonly config: InspectorConfigShape
  readonly sink: InspectorSink
  readonly kv: KeyValueShape
  readonly state: CaptureState
  readonly listeners: ListenerSettings
}

/** The HTTP proxy's listener (started, stopped, brought back at start) and its two settings (on, TLS interception). */
export const makeHttpProxy = ({ config, sink, kv, state, listeners }: HttpProxyDeps) => {
  const { ca, upstreamCa, verifyUpstream, dial } = listeners

  const start = async (): Promise<void> => {
    if (state.proxy) return
    state.proxy = await startHttpProxy({
      host: "127.0.0.1",
      port: config.httpProxyPort,
      sink,
      source: () => (state.systemApplied ? "system-proxy" : "http-proxy"),
      intercept: () => state.intercept,
      ca,
      ...(upstreamCa ? { upstreamCa } : {}),
      verifyUpstream,
      idleTimeoutMs: config.idleTimeoutMs,
      dial
    })
    state.proxyError = null
  }
  const stop = async () => {
    const p = state.proxy
    state.proxy = undefined
    if (p) await p.close()
  }

  /** At start: the listener comes back if it was on; a port in use is a warning. */
  const restore = Effect.gen(function* () {
    if (Option.getOrUndefined(yield* kv.get(STATE_NS, "http-proxy")) === "on") {
      yield* Effect.promise(() =>
        start().catch((e) => {
          state.proxyError = `the HTTP proxy could not listen on 127.0.0.1:${config.httpProxyPort}: ${describe(e)}`
        })
      )
      if (state.proxyError) yield* Effect.logWarning(`inspector: ${state.proxyError}`)
    }
  })

  /** `capture-modes/http-proxy`: started or stopped, and saved; not stopped while the system proxy points at it. */
  const set = (action: "start" | "stop"): Effect.Effect<void, Conflict | BadRequest> =>
    Effect.gen(function* () {
      if (action === "start") {
        const error = yield* Effect.promise(() =>
          start().then(
            () => undefined,
            (e: unknown) => e
          )
        )
        if (error !== undefined) {
          const code = (error as { code?: string }).code
          if (code === "EADDRINUSE") {
            return yield* Effect.fail(
              new Conflict({
                message: `port ${config.httpProxyPort} is already in use (http_proxy_port_in_use): stop what listens there or set INSPECTOR_HTTP_PROXY_PORT`
              })
            )
          }
          return yield* Effect.fail(new BadRequest({ message: `the HTTP proxy could not start: ${describe(error)}` }))
        }
        yield* kv.set(STATE_NS, "http-proxy", "on")
      } else {
        if (state.systemApplied)
          return yield* Effect.fail(
            new Conflict({ message: "the system proxy points at this listener: revert it first (capture-modes/system-proxy)" })
          )
        yield* Effect.promise(stop)
        yield* kv.set(STATE_NS, "http-proxy", "off")
      }
    })

  /** `capture-modes/tls-intercept`: the proxy decrypts CONNECT tunnels (the CA made first) or relays them; saved. */
  const intercept = (enabled: boolean): Effect.Effect<void> =>
    Effect.gen(function* () {
      state.intercept = enabled
      if (enabled) yield* Effect.promise(() => ca())
      yield* kv.set(STATE_NS, "tls-intercept", String(enabled))
    })

  return { start, stop, restore, set, intercept }
}
