/**
 * The fingerprinted transports of ENABLE_TLS_FINGERPRINT (docs/egress.md): one per TLS profile
 * and route (`<profile>|direct` or `<profile>|<proxy key>`), built over the route's plain
 * dispatcher and dropped with it.
 */
import * as Effect from "effect/Effect"
import type { Dispatcher } from "undici"
import type { TlsProfile } from "../../domain/connections.js"
import type { EgressMarkShape } from "../client/EgressMark.js"
import { CONNECT_TIMEOUT_MS, dialDirect, directDispatcher, tunnelThrough } from "./dispatcher.js"
import { EgressRefused } from "./egressRefused.js"
import type { LookupFunction } from "./family.js"
import type { FingerprintDispatcher, Fingerprinting, TunnelOpener } from "./fingerprint.js"
import type { Route } from "./proxyDispatchers.js"

export interface FingerprintedTransportsDeps {
  readonly fingerprinting: Fingerprinting
  readonly lookup: LookupFunction
  /** The transparent capture's bypass mark, when the capture is part of the gateway. */
  readonly mark: EgressMarkShape | undefined
}

/** The transports: `transportFor` a profile and route, `forget` those over a retired dispatcher, `destroyAll` at the end. */
export const makeFingerprintedTransports = ({ fingerprinting, lookup, mark }: FingerprintedTransportsDeps) => {
  /** Fingerprinted transports by profile and route (`<profile>|direct` or `<profile>|<proxy key>`). */
  const fingerprinted = new Map<string, { readonly plain: Dispatcher; readonly transport: Promise<FingerprintDispatcher> }>()

  /** The TCP leg of a direct fingerprinted call: the guard's lookup, and the capture's bypass mark while it runs. */
  const openDirect: TunnelOpener = (host, port) => {
    const dial = mark?.current()
    if (dial === undefined) return dialDirect(host, port, lookup)
    return new Promise((resolve, reject) =>
      lookup(host, {}, (error, address) => (error ? reject(error) : dial(String(address), port, CONNECT_TIMEOUT_MS).then(resolve, reject)))
    )
  }
  let directPlain: Dispatcher | undefined

  /** The fingerprinted transport for `profile` over a route (built once per profile and route). */
  const transportFor = (profile: TlsProfile, via: Route) => {
    const key = `${profile}|${via?.choice.key ?? "direct"}`
    let held = fingerprinted.get(key)
    if (held === undefined) {
      const plain = via?.dispatcher ?? (directPlain ??= directDispatcher(lookup))
      const spec = via?.choice.spec
      const open: TunnelOpener = spec === undefined ? openDirect : (host, port) => tunnelThrough(spec, lookup, host, port)
      held = { plain, transport: fingerprinting.transport(profile, open, plain) }
      fingerprinted.set(key, held)
      // A failed load is not kept: the next call tries again (and is refused again, saying why).
      held.transport.catch(() => fingerprinted.get(key) === held && fingerprinted.delete(key))
    }
    const transport = held.transport
    return Effect.tryPromise({
      try: () => transport,
      catch: (e) => new EgressRefused({ code: "PROXY_UNAVAILABLE", message: e instanceof Error ? e.message : String(e) })
    })
  }

  /** The transports built over `plain` (a dispatcher just retired) are dropped and closed. */
  const forget = (plain: Dispatcher) => {
    for (const [key, held] of fingerprinted) {
      if (held.plain !== plain) continue
      fingerprinted.delete(key)
      void held.transport.then((t) => t.close()).catch(() => undefined)
    }
  }

  /** Every transport's dispatcher destroyed, then the TLS stack closed (the layer's end). */
  const destroyAll = async () => {
    const transports = [...fingerprinted.values()]
    fingerprinted.clear()
    await Promise.all(transports.map((h) => h.plain.destroy().catch(() => undefined)))
    await fingerprinting.close()
  }

  return { transportFor, forget, destroyAll }
}
