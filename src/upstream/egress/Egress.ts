import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as net from "node:net"
import * as Option from "effect/Option"
import type { Dispatcher } from "undici"
import { DEFAULT_TLS_PROFILE, type TlsProfile } from "../../domain/connections.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { Connections } from "../providers/Connections.js"
import { Settings } from "../../platform/settings/Settings.js"
import { checkHostLiteral, DnsResolver, guardedLookup } from "../client/egressGuard.js"
import { EgressMark } from "../client/egressMark.js"
import { buildDispatcher, CONNECT_TIMEOUT_MS, connectToProxy, dialDirect, directDispatcher, tunnelThrough } from "./dispatcher.js"
import { type FingerprintDispatcher, makeFingerprinting, type TunnelOpener } from "./fingerprint.js"
import { type LookupFunction, preflight, ProxyFamilyUnavailable, type ProxySpec, proxyUrl, specOfUrl } from "./family.js"
import { type ProxyEntry, ProxyRegistry, SOCKS5_DISABLED } from "./ProxyRegistry.js"

/** Why a call cannot go through its proxy: answered as 503 with `code` (403 for a blocked proxy address). */
export class EgressRefused extends Data.TaggedError("EgressRefused")<{
  readonly code: "PROXY_FAMILY_UNAVAILABLE" | "PROXY_UNAVAILABLE" | "PROXY_DISABLED" | "PROXY_BLOCKED"
  readonly message: string
}> {
  get status(): number {
    return this.code === "PROXY_BLOCKED" ? 403 : 503
  }
}

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
  readonly control: (proxyId: string | null | undefined, url: string, tlsProfile?: TlsProfile | null) => Effect.Effect<Dispatcher | undefined, EgressRefused>
  /** Which proxy a call would use (for the proxy test and the docs' examples); undefined: direct. */
  readonly choose: (proxyId: string | null | undefined, targetHost: string) => Effect.Effect<EgressChoice | undefined, EgressRefused>
  /** The guard's lookup, for a caller that opens its own socket to a proxy (the proxy test). */
  readonly lookup: LookupFunction
}

/** How long an auto-select test result is trusted (pass or fail) before the proxy is tried again. */
export const AUTO_SELECT_TTL_MS = 60_000
/** How long auto-select and the control-plane pre-check wait for a proxy to accept a connection. */
export const REACH_TIMEOUT_MS = 3_000

const noProxyMatch = (host: string, entries: ReadonlyArray<string>): boolean => {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, "$1")
  return entries.some((raw) => {
    const e = raw.toLowerCase().replace(/:\d+$/, "")
    if (e === "*") return true
    if (e.includes("/")) {
      // A CIDR matches an IP-literal host only (a name is not resolved to decide).
      const [base, bits] = e.split("/")
      const kind = net.isIP(base!)
      if (kind === 0 || net.isIP(h) !== kind) return false
      const list = new net.BlockList()
      list.addSubnet(base!, Number(bits), kind === 6 ? "ipv6" : "ipv4")
      return list.check(h, kind === 6 ? "ipv6" : "ipv4")
    }
    if (e.startsWith(".")) return h.endsWith(e) || h === e.slice(1)
    return h === e || h.endsWith(`.${e}`)
  })
}

const specOfEntry = (e: ProxyEntry): ProxySpec => ({
  type: e.type,
  host: e.host,
  port: e.port,
  username: e.username,
  password: e.password === null ? null : Redacted.value(e.password),
  family: e.family
})

/**
 * Upstream egress (docs/egress.md): which proxy a call goes through (the connection's, else the
 * global default of `/api/settings/proxy`, else with PROXY_AUTO_SELECT_ENABLED the first registry
 * proxy that answers), the family policy, and one cached dispatcher per (proxy, family), closed
 * when its proxy changes.
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

      /** Dispatchers by slot (a registry id, or `global`): the key says which proxy and family it was built for. */
      const cache = new Map<string, { readonly key: string; readonly dispatcher: Dispatcher }>()
      /** Fingerprinted transports by profile and route (`<profile>|direct` or `<profile>|<proxy key>`). */
      const fingerprinted = new Map<string, { readonly plain: Dispatcher; readonly transport: Promise<FingerprintDispatcher> }>()
      const retire = (d: Dispatcher) => {
        // In-flight calls (streams) finish; new ones go to the replacement.
        void d.close().catch(() => undefined)
        for (const [key, held] of fingerprinted) {
          if (held.plain !== d) continue
          fingerprinted.delete(key)
          void held.transport.then((t) => t.close()).catch(() => undefined)
        }
      }
      registry.onChange(() => {
        // A changed or removed entry: its dispatcher is closed now; the next call builds anew.
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
      })
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          const all = [...cache.values()]
          cache.clear()
          await Promise.all(all.map((h) => h.dispatcher.destroy().catch(() => undefined)))
          const transports = [...fingerprinted.values()]
          fingerprinted.clear()
          await Promise.all(transports.map((h) => h.plain.destroy().catch(() => undefined)))
          await fingerprinting?.close()
        })
      )

      const keyOf = (e: ProxyEntry) => `${e.id}@${e.updatedAt}|${proxyUrl({ ...specOfEntry(e), password: e.password === null ? null : "****" })}`

      const autoTested = new Map<string, { readonly ok: boolean; readonly at: number }>()

      const usable = (e: ProxyEntry, freeOn: boolean): boolean => !(e.type === "socks5" && !registry.socks5Enabled) && !(e.free && !freeOn) && e.passwordError === null

      /** Auto-select's test of one proxy: the family rules pass and it accepts a TCP connection within REACH_TIMEOUT_MS. */
      const passes = (e: ProxyEntry) =>
        Effect.promise(async () => {
          const key = keyOf(e)
          const known = autoTested.get(key)
          if (known && Date.now() - known.at < AUTO_SELECT_TTL_MS) return known.ok
          const spec = specOfEntry(e)
          const ok = await preflight(resolver, spec.host, spec.family)
            .then(() => connectToProxy(spec, lookup, REACH_TIMEOUT_MS))
            .then((s) => {
              s.destroy()
              return true
            })
            .catch(() => false)
          autoTested.set(key, { ok, at: Date.now() })
          return ok
        })

      const choose: EgressShape["choose"] = (proxyId, targetHost) =>
        Effect.gen(function* () {
          if (proxyId) {
            const s = yield* registry.snapshot
            const e = s.byId.get(proxyId)
            if (!e) return yield* new EgressRefused({ code: "PROXY_UNAVAILABLE", message: `the connection names proxy '${proxyId}', which no longer exists` })
            if (e.passwordError) return yield* new EgressRefused({ code: "PROXY_UNAVAILABLE", message: `proxy '${e.name}': ${e.passwordError}` })
            return { via: "connection", key: keyOf(e), name: e.name, spec: specOfEntry(e), free: e.free } satisfies EgressChoice
          }
          const doc = settings.current()
          if (doc.proxy.url) {
            if (noProxyMatch(targetHost, doc.proxy.noProxy)) return undefined
            const spec = specOfUrl(doc.proxy.url, doc.proxy.family)
            return { via: "global", key: `global|${proxyUrl(spec)}`, name: "global (settings)", spec, free: false } satisfies EgressChoice
          }
          if (!(yield* flags.enabled("PROXY_AUTO_SELECT_ENABLED"))) return undefined
          const freeOn = yield* flags.enabled("FREE_PROXY_ENABLED")
          const s = yield* registry.snapshot
          for (const e of s.all) {
            if (!usable(e, freeOn)) continue
            if (yield* passes(e)) return { via: "auto-select", key: keyOf(e), name: e.name, spec: specOfEntry(e), free: e.free } satisfies EgressChoice
          }
          // No registry proxy answers: the call goes direct, as it would with auto-select off.
          return undefined
        })

      const refuse = (e: unknown): EgressRefused =>
        e instanceof EgressRefused
          ? e
          : e instanceof ProxyFamilyUnavailable
            ? new EgressRefused({ code: "PROXY_FAMILY_UNAVAILABLE", message: e.message })
            : new EgressRefused({ code: "PROXY_UNAVAILABLE", message: e instanceof Error ? e.message : String(e) })

      const dispatcherOf = (choice: EgressChoice, slot: string) =>
        Effect.gen(function* () {
          if (choice.spec.type === "socks5" && !registry.socks5Enabled)
            return yield* new EgressRefused({ code: "PROXY_DISABLED", message: `proxy '${choice.name}': ${SOCKS5_DISABLED}` })
          if (choice.free && !(yield* flags.enabled("FREE_PROXY_ENABLED"))) {
            return yield* new EgressRefused({ code: "PROXY_DISABLED", message: `proxy '${choice.name}' is a free proxy and FREE_PROXY_ENABLED is off` })
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

      /** The proxy a call goes through and its dispatcher; undefined: direct. */
      const route = (proxyId: string | null | undefined, purpose: EgressPurpose, targetHost: string) =>
        Effect.gen(function* () {
          const choice = yield* choose(proxyId, targetHost)
          if (choice === undefined) return undefined
          const slot = choice.via === "global" ? "global" : choice.key.slice(0, choice.key.indexOf("@"))
          const built = yield* Effect.either(dispatcherOf(choice, slot))
          const fallback = purpose === "control" && (yield* flags.enabled("GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK"))
          if (built._tag === "Left") {
            if (!fallback) return yield* built.left
            yield* Effect.logWarning(`control-plane call to ${targetHost} goes direct: proxy '${choice.name}' failed its pre-check (${built.left.message})`)
            return undefined
          }
          if (fallback) {
            // The pre-check of a control-plane call that may fall back: the proxy must accept a connection.
            const reach = yield* Effect.either(Effect.tryPromise({ try: () => connectToProxy(choice.spec, lookup, REACH_TIMEOUT_MS), catch: refuse }))
            if (reach._tag === "Left") {
              yield* Effect.logWarning(`control-plane call to ${targetHost} goes direct: proxy '${choice.name}' is unreachable (${reach.left.message})`)
              return undefined
            }
            reach.right.destroy()
          }
          return { choice, dispatcher: built.right }
        })

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
      const fingerprintedFor = (profile: TlsProfile, via: { readonly choice: EgressChoice; readonly dispatcher: Dispatcher } | undefined) => {
        const key = `${profile}|${via?.choice.key ?? "direct"}`
        let held = fingerprinted.get(key)
        if (held === undefined) {
          const plain = via?.dispatcher ?? (directPlain ??= directDispatcher(lookup))
          const spec = via?.choice.spec
          const open: TunnelOpener = spec === undefined ? openDirect : (host, port) => tunnelThrough(spec, lookup, host, port)
          held = { plain, transport: fingerprinting!.transport(profile, open, plain) }
          fingerprinted.set(key, held)
          // A failed load is not kept: the next call tries again (and is refused again, saying why).
          held.transport.catch(() => fingerprinted.get(key) === held && fingerprinted.delete(key))
        }
        const transport = held.transport
        return Effect.tryPromise({ try: () => transport, catch: (e) => new EgressRefused({ code: "PROXY_UNAVAILABLE", message: e instanceof Error ? e.message : String(e) }) })
      }

      const dispatcherFor: EgressShape["dispatcherFor"] =
        fingerprinting === undefined
          ? (proxyId, purpose, targetHost) => Effect.map(route(proxyId, purpose, targetHost), (via) => via?.dispatcher)
          : (proxyId, purpose, targetHost, tlsProfile) => Effect.flatMap(route(proxyId, purpose, targetHost), (via) => fingerprintedFor(tlsProfile ?? DEFAULT_TLS_PROFILE, via))

      // With the fingerprint on, no call is direct: each goes through the fingerprinted transport.
      const isDirect: EgressShape["isDirect"] =
        fingerprinting === undefined ? (proxyId) => !proxyId && settings.current().proxy.url === null && flags.peekEnabled("PROXY_AUTO_SELECT_ENABLED") === false : () => false

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
