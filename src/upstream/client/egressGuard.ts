import * as Context from "effect/Context"
import * as dns from "node:dns"
import * as net from "node:net"
import { classifyHost, type HostClass, type UrlPolicyFlags } from "../providers/urlPolicy.js"

/** One resolved address, as `dns.lookup(name, { all: true })` answers it. */
export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

/** Resolves a host name to every address it has. */
export type Resolve = (hostname: string) => Promise<ReadonlyArray<ResolvedAddress>>

/** The system's resolver (the hosts file, then DNS): DnsResolver's default. */
export const systemResolve: Resolve = (hostname) =>
  dns.promises
    .lookup(hostname, { all: true, verbatim: true })
    .then((list) => list.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 })))

/**
 * How outbound connections resolve host names: the system resolver, or a test's own (which is
 * how the tests make a name resolve to loopback, or change its answer between two lookups,
 * without any packet leaving the machine).
 */
export class DnsResolver extends Context.Reference<DnsResolver>()("gateway/DnsResolver", { defaultValue: (): Resolve => systemResolve }) {}

/** The policy's defaults (the flags' catalogue defaults), for a client built without FeatureFlags. */
export const DEFAULT_URL_POLICY: UrlPolicyFlags = { guard: true, allowLocal: true, allowPrivate: false }

/** Which flag lets an address class through: undefined for `public`; `metadata` never passes. */
const blockedBy = (kind: HostClass, policy: UrlPolicyFlags): string | undefined => {
  if (!policy.guard || kind === "public") return undefined
  if (kind === "metadata") return "cloud metadata addresses are always blocked"
  if (kind === "loopback" || kind === "lan")
    return policy.allowLocal || policy.allowPrivate ? undefined : "GATEWAY_ALLOW_LOCAL_PROVIDER_URLS is off"
  return policy.allowPrivate ? undefined : "GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS is off"
}

/**
 * An outbound connection the policy refused. `code` is what the transport error carries; the
 * message names the host and the address class, never the address a name resolved to.
 */
export class EgressBlocked extends Error {
  readonly code = "ESSRF_BLOCKED"
  constructor(
    readonly host: string,
    readonly addressClass: HostClass,
    readonly reason: string
  ) {
    super(
      `${host} ${net.isIP(host.replace(/^\[|\]$/g, "")) ? "is" : "resolves to"} a ${addressClass === "metadata" ? "cloud metadata" : addressClass} address; ${reason}`
    )
    this.name = "EgressBlocked"
  }
}

/** The refusal for a host as written (an IP literal, `localhost`, a metadata name), or undefined. */
export const checkHostLiteral = (host: string, policy: UrlPolicyFlags): EgressBlocked | undefined => {
  const kind = classifyHost(host)
  const reason = blockedBy(kind, policy)
  return reason === undefined ? undefined : new EgressBlocked(host, kind, reason)
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | Array<dns.LookupAddress>, family?: number) => void

/**
 * A `lookup` for `net.connect`/`tls.connect` (undici passes its connector options through): it
 * resolves the name once, checks EVERY address against the policy, and hands exactly the checked
 * addresses to the socket, which connects to one of them. There is no second resolution between
 * the check and the connect, so a name that answers a public address to a check and a private one
 * to the connect (DNS rebinding) cannot get through. TLS SNI and the Host header stay the name.
 */
export const guardedLookup =
  (resolve: () => Resolve, policy: () => UrlPolicyFlags | Promise<UrlPolicyFlags>) =>
  (hostname: string, options: dns.LookupOptions | number | LookupCallback, callback?: LookupCallback): void => {
    const cb = (typeof options === "function" ? options : callback) as LookupCallback
    const opts: dns.LookupOptions =
      typeof options === "object" && options !== null ? options : typeof options === "number" ? { family: options } : {}
    void (async () => {
      const rules = await policy()
      const named = checkHostLiteral(hostname, rules)
      if (named) return cb(named, opts.all ? [] : "", 0)
      const all = await resolve()(hostname)
      const wanted = opts.family === 4 || opts.family === 6 ? all.filter((a) => a.family === opts.family) : all
      if (wanted.length === 0) {
        const e: NodeJS.ErrnoException = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", hostname })
        return cb(e, opts.all ? [] : "", 0)
      }
      // Every address is checked, not only the one the socket would try first.
      for (const a of all) {
        const kind = classifyHost(a.address)
        const reason = blockedBy(kind, rules)
        if (reason !== undefined) return cb(new EgressBlocked(hostname, kind, reason), opts.all ? [] : "", 0)
      }
      if (opts.all)
        return cb(
          null,
          wanted.map((a) => ({ address: a.address, family: a.family }))
        )
      return cb(null, wanted[0]!.address, wanted[0]!.family)
    })().catch((e: unknown) => cb(e as NodeJS.ErrnoException, opts.all ? [] : "", 0))
  }
