import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { Dispatcher } from "undici"
import { DEFAULT_TLS_PROFILE, type TlsProfile } from "../../domain/connections.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { Connections } from "../providers/Connections.js"
import { Settings } from "../../platform/settings/Settings.js"
import { DnsResolver, guardedLookup } from "../client/egressGuard.js"
import { EgressMark } from "../client/EgressMark.js"
import type { EgressRefused } from "./egressRefused.js"
import type { LookupFunction, ProxySpec } from "./family.js"
import { makeFingerprinting } from "./fingerprint.js"
import { makeFingerprintedTransports } from "./fingerprintedTransports.js"
import { makeChoose } from "./proxyChoice.js"
import { makeProxyDispatchers, makeRoute } from "./proxyDispatchers.js"
import { ProxyRegistry } from "./ProxyRegistry.js"

export { EgressRefused } from "./egressRefused.js"
export { AUTO_SELECT_TTL_MS, REACH_TIMEOUT_MS } from "./proxyChoice.js"

/** `inference`: never goes direct when the proxy fails; `control`: may, with GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK. */
export type EgressPurpose = "inference" | "control"

/** The proxy a call goes through, and how it was chosen. */
export interface EgressChoice {
  readonly via: "connection" | "global" | "auto-select"
  readonly key: string
  readonly name: string
  readonly spec: ProxySpec
  readonly free: boolean
}

export interface EgressShape {
  /**
   * True when a connection naming `proxyId` goes direct with nothing to decide: no proxy of its
   * own, no global default, auto-select off. Synchronous and allocation-free: the request path
   * asks it first, so a connection without a proxy costs nothing more than before.
   */
  readonly isDirect: (proxyId: string | null | undefined) => boolean
  /**
   * The dispatcher for a call to `targetHost` (undefined: direct). With ENABLE_TLS_FINGERPRINT
   * (read at start) every call gets one: the fingerprinted transport for `tlsProfile` (the
   * connection's; unset: the default) over the same route.
   */
  readonly dispatcherFor: (
    proxyId: string | null | undefined,
    purpose: EgressPurpose,
    targetHost: string,
    tlsProfile?: TlsProfile | null
  ) => Effect.Effect<Dispatcher | undefined, EgressRefused>
  /**
   * A control-plane call to `url` (provider checks, OAuth token endpoints, provider-node probes,
   * the sync server): `dispatcherFor(proxyId, "control", host, tlsProfile)`, skipped when `isDirect`.
   */
  readonly control: (
    proxyId: string | null | undefined,
    url: string,
    tlsProfile?: TlsProfile | null
  ) => Effect.Effect<Dispatcher | undefined, EgressRefused>
  /** Which proxy a call would use (for the proxy test and the docs' examples); undefined: direct. */
  readonly choose: (proxyId: string | null | undefined, targetHost: string) => Effect.Effect<EgressChoice | undefined, EgressRefused>
  /** The guard's lookup, for a caller that opens its own socket to a proxy (the proxy test). */
  readonly lookup: LookupFunction
}

/**
 * Upstream egress (docs/egress.md): which proxy a call goes through (the connection's, else the
 * global default of `/api/settings/proxy`, else with PROXY_AUTO_SELECT_ENABLED the first registry
 * proxy that answers; proxyChoice.ts), the family policy, and one cached dispatcher per (proxy,
 * family), closed when its proxy changes (proxyDispatchers.ts); with ENABLE_TLS_FINGERPRINT, the
 * fingerprinted transports over them (fingerprintedTransports.ts).
 */
export class Egress extends Context.Tag("gateway/Egress")<Egress, EgressShape>() {
  static readonly layer = Layer.scoped(
    Egress,
    Effect.gen(function* () {
      const registry = yield* ProxyRegistry
      const settings = yield* Settings
      const flags = yield* FeatureFlags
      const connections = yield* Connections
      const resolver = yield* DnsResolver
      const policyNow = () => connections.peekUrlPolicy() ?? Effect.runPromise(connections.urlPolicy)
      const lookup = guardedLookup(() => resolver, policyNow) as unknown as LookupFunction
      // Read once at start (requiresRestart): off, nothing below it is built and impit is never imported.
      const fingerprinting = (yield* flags.enabled("ENABLE_TLS_FINGERPRINT")) ? makeFingerprinting() : undefined
      const mark = Option.getOrUndefined(yield* Effect.serviceOption(EgressMark))

      const transports = fingerprinting === undefined ? undefined : makeFingerprintedTransports({ fingerprinting, lookup, mark })
      const retire = (d: Dispatcher) => {
        // In-flight calls (streams) finish; new ones go to the replacement.
        void d.close().catch(() => undefined)
        transports?.forget(d)
      }
      const dispatchers = makeProxyDispatchers({ registry, flags, resolver, lookup, policyNow, retire })
      registry.onChange(dispatchers.dropChanged)
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          await dispatchers.destroyAll()
          await transports?.destroyAll()
        })
      )

      const choose = makeChoose({ registry, settings, flags, resolver, lookup })
      const route = makeRoute({ choose, dispatcherOf: dispatchers.dispatcherOf, flags, lookup })

      const dispatcherFor: EgressShape["dispatcherFor"] =
        transports === undefined
          ? (proxyId, purpose, targetHost) => Effect.map(route(proxyId, purpose, targetHost), (via) => via?.dispatcher)
          : (proxyId, purpose, targetHost, tlsProfile) =>
              Effect.flatMap(route(proxyId, purpose, targetHost), (via) => transports.transportFor(tlsProfile ?? DEFAULT_TLS_PROFILE, via))

      // With the fingerprint on, no call is direct: each goes through the fingerprinted transport.
      const isDirect: EgressShape["isDirect"] =
        transports === undefined
          ? (proxyId) => !proxyId && settings.current().proxy.url === null && flags.peekEnabled("PROXY_AUTO_SELECT_ENABLED") === false
          : () => false

      return {
        isDirect,
        dispatcherFor,
        control: (proxyId, url, tlsProfile) => {
          if (isDirect(proxyId)) return Effect.succeed(undefined)
          // An unparsable URL is refused by the caller's own URL check; here it simply has no host to choose for.
          const host = URL.canParse(url) ? new URL(url).hostname : ""
          return dispatcherFor(proxyId, "control", host, tlsProfile)
        },
        choose,
        lookup
      } satisfies EgressShape
    })
  )
}
