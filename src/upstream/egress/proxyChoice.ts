/**
 * Which proxy an upstream call goes through (docs/egress.md): the connection's, else the global
 * default of `/api/settings/proxy` (unless NO_PROXY matches the host), else with
 * PROXY_AUTO_SELECT_ENABLED the first registry proxy that answers; none of them: direct.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as net from "node:net"
import type { FeatureFlagsShape } from "../../platform/flags/FeatureFlags.js"
import type { SettingsShape } from "../../platform/settings/Settings.js"
import type { Resolve } from "../client/egressGuard.js"
import { connectToProxy } from "./dispatcher.js"
import type { EgressChoice, EgressShape } from "./Egress.js"
import { EgressRefused } from "./egressRefused.js"
import { type LookupFunction, preflight, type ProxySpec, proxyUrl, specOfUrl } from "./family.js"
import type { ProxyEntry, ProxyRegistryShape } from "./ProxyRegistry.js"

/** How long an auto-select test result is trusted (pass or fail) before the proxy is tried again. */
export const AUTO_SELECT_TTL_MS = 60_000
/** How long auto-select and the control-plane pre-check wait for a proxy to accept a connection. */
export const REACH_TIMEOUT_MS = 3_000

/** Whether NO_PROXY's entries (`*`, a CIDR for an IP literal, a domain and its subdomains) exempt `host` from the global proxy. */
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

/** A registry entry as the spec a dispatcher is built from (password decrypted). */
const specOfEntry = (e: ProxyEntry): ProxySpec => ({
  type: e.type,
  host: e.host,
  port: e.port,
  username: e.username,
  password: e.password === null ? null : Redacted.value(e.password),
  family: e.family
})

/** What a registry entry's dispatcher was built for (its id, version and URL, password masked): a changed key means a new dispatcher. */
export const keyOf = (e: ProxyEntry) =>
  `${e.id}@${e.updatedAt}|${proxyUrl({ ...specOfEntry(e), password: e.password === null ? null : "****" })}`

export interface ProxyChoiceDeps {
  readonly registry: ProxyRegistryShape
  readonly settings: SettingsShape
  readonly flags: FeatureFlagsShape
  readonly resolver: Resolve
  /** The guard's lookup, which auto-select's test connects with. */
  readonly lookup: LookupFunction
}

/** `choose`: the proxy a call to a host goes through, with auto-select's test results kept AUTO_SELECT_TTL_MS. */
export const makeChoose = ({ registry, settings, flags, resolver, lookup }: ProxyChoiceDeps): EgressShape["choose"] => {
  const autoTested = new Map<string, { readonly ok: boolean; readonly at: number }>()

  const usable = (e: ProxyEntry, freeOn: boolean): boolean =>
    !(e.type === "socks5" && !registry.socks5Enabled) && !(e.free && !freeOn) && e.passwordError === null

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

  return (proxyId, targetHost) =>
    Effect.gen(function* () {
      if (proxyId) {
        const s = yield* registry.snapshot
        const e = s.byId.get(proxyId)
        if (!e)
          return yield* new EgressRefused({
            code: "PROXY_UNAVAILABLE",
            message: `the connection names proxy '${proxyId}', which no longer exists`
          })
        if (e.passwordError)
          return yield* new EgressRefused({ code: "PROXY_UNAVAILABLE", message: `proxy '${e.name}': ${e.passwordError}` })
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
        if (yield* passes(e))
          return { via: "auto-select", key: keyOf(e), name: e.name, spec: specOfEntry(e), free: e.free } satisfies EgressChoice
      }
      // No registry proxy answers: the call goes direct, as it would with auto-select off.
      return undefined
    })
}
