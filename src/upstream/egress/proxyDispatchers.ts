/**
 * The dispatchers of proxied calls: one cached per slot (a registry id, or `global`), built for
 * one proxy and family and closed when its proxy changes; and a call's route, which pairs the
 * chosen proxy with its dispatcher (a control-plane call may go direct when its proxy fails).
 */
import * as Effect from "effect/Effect"
import type { Dispatcher } from "undici"
import type { FeatureFlagsShape } from "../../platform/flags/FeatureFlags.js"
import type { UrlPolicyFlags } from "../providers/urlPolicy.js"
import { checkHostLiteral, type Resolve } from "../client/egressGuard.js"
import { buildDispatcher, connectToProxy } from "./dispatcher.js"
import type { EgressChoice, EgressPurpose, EgressShape } from "./Egress.js"
import { EgressRefused, refuse } from "./egressRefused.js"
import { type LookupFunction, preflight } from "./family.js"
import { keyOf, REACH_TIMEOUT_MS } from "./proxyChoice.js"
import { type ProxyRegistryShape, SOCKS5_DISABLED } from "./ProxyRegistry.js"

/** A call's proxy and its dispatcher; undefined: direct. */
export type Route = { readonly choice: EgressChoice; readonly dispatcher: Dispatcher } | undefined

export interface ProxyDispatchersDeps {
  readonly registry: ProxyRegistryShape
  readonly flags: FeatureFlagsShape
  readonly resolver: Resolve
  readonly lookup: LookupFunction
  /** The URL policy in force (the proxy's own address is judged by it). */
  readonly policyNow: () => UrlPolicyFlags | Promise<UrlPolicyFlags>
  /** Closes a replaced dispatcher (in-flight calls finish) and what was built over it. */
  readonly retire: (d: Dispatcher) => void
}

/** The dispatcher cache: `dispatcherOf` a choice, `dropChanged` for the registry's changes, `destroyAll` at the end. */
export const makeProxyDispatchers = ({ registry, flags, resolver, lookup, policyNow, retire }: ProxyDispatchersDeps) => {
  /** Dispatchers by slot (a registry id, or `global`): the key says which proxy and family it was built for. */
  const cache = new Map<string, { readonly key: string; readonly dispatcher: Dispatcher }>()

  /** A changed or removed entry: its dispatcher is closed now; the next call builds anew. */
  const dropChanged = () => {
    Effect.runFork(
      Effect.map(registry.snapshot, (s) => {
        for (const [slot, held] of cache) {
          if (slot === "global") continue
          const e = s.byId.get(slot)
          if (!e || keyOf(e) !== held.key) {
            cache.delete(slot)
            retire(held.dispatcher)
          }
        }
      })
    )
  }

  /** Every cached dispatcher destroyed (the layer's end). */
  const destroyAll = async () => {
    const all = [...cache.values()]
    cache.clear()
    await Promise.all(all.map((h) => h.dispatcher.destroy().catch(() => undefined)))
  }

  /** The dispatcher of a chosen proxy in its slot, built (after the pre-checks) when the slot holds none for it. */
  const dispatcherOf = (choice: EgressChoice, slot: string) =>
    Effect.gen(function* () {
      if (choice.spec.type === "socks5" && !registry.socks5Enabled)
        return yield* new EgressRefused({ code: "PROXY_DISABLED", message: `proxy '${choice.name}': ${SOCKS5_DISABLED}` })
      if (choice.free && !(yield* flags.enabled("FREE_PROXY_ENABLED"))) {
        return yield* new EgressRefused({
          code: "PROXY_DISABLED",
          message: `proxy '${choice.name}' is a free proxy and FREE_PROXY_ENABLED is off`
        })
      }
      // The proxy's own address is judged like an upstream's (a name, by the guard's lookup when it connects).
      const blocked = checkHostLiteral(choice.spec.host, yield* Effect.promise(async () => policyNow()))
      if (blocked) return yield* new EgressRefused({ code: "PROXY_BLOCKED", message: `proxy '${choice.name}': ${blocked.message}` })
      const held = cache.get(slot)
      if (held && held.key === choice.key) return held.dispatcher
      // Rules 3 and 4 when the dispatcher is built: a contradicting literal throws, a name needs a record of the family.
      const dispatcher = yield* Effect.tryPromise({
        try: async () => {
          await preflight(resolver, choice.spec.host, choice.spec.family)
          return buildDispatcher(choice.spec, lookup)
        },
        catch: refuse
      })
      const old = cache.get(slot)
      cache.set(slot, { key: choice.key, dispatcher })
      if (old) retire(old.dispatcher)
      return dispatcher
    })

  return { dispatcherOf, dropChanged, destroyAll }
}

export interface RouteDeps {
  readonly choose: EgressShape["choose"]
  readonly dispatcherOf: ReturnType<typeof makeProxyDispatchers>["dispatcherOf"]
  readonly flags: FeatureFlagsShape
  readonly lookup: LookupFunction
}

/**
 * `route`: the proxy a call goes through and its dispatcher; undefined: direct. A control-plane
 * call with GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK goes direct (with a warning) when its
 * proxy fails its pre-check or does not accept a connection.
 */
export const makeRoute =
  ({ choose, dispatcherOf, flags, lookup }: RouteDeps) =>
  (proxyId: string | null | undefined, purpose: EgressPurpose, targetHost: string): Effect.Effect<Route, EgressRefused> =>
    Effect.gen(function* () {
      const choice = yield* choose(proxyId, targetHost)
      if (choice === undefined) return undefined
      const slot = choice.via === "global" ? "global" : choice.key.slice(0, choice.key.indexOf("@"))
      const built = yield* Effect.either(dispatcherOf(choice, slot))
      const fallback = purpose === "control" && (yield* flags.enabled("GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK"))
      if (built._tag === "Left") {
        if (!fallback) return yield* built.left
        yield* Effect.logWarning(
          `control-plane call to ${targetHost} goes direct: proxy '${choice.name}' failed its pre-check (${built.left.message})`
        )
        return undefined
      }
      if (fallback) {
        // The pre-check of a control-plane call that may fall back: the proxy must accept a connection.
        const reach = yield* Effect.either(
          Effect.tryPromise({ try: () => connectToProxy(choice.spec, lookup, REACH_TIMEOUT_MS), catch: refuse })
        )
        if (reach._tag === "Left") {
          yield* Effect.logWarning(
            `control-plane call to ${targetHost} goes direct: proxy '${choice.name}' is unreachable (${reach.left.message})`
          )
          return undefined
        }
        reach.right.destroy()
      }
      return { choice, dispatcher: built.right }
    })
