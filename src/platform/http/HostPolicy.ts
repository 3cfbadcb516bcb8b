/**
 * DNS-rebinding protection for `/mcp` on a loopback gateway: which `Host` and `Origin` a request may carry (the rules and
 * why: docs/mcp.md#transports, "DNS rebinding").
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as http from "node:http"
import { AppConfig, type AppConfigShape, isLoopbackHost, originAllowed } from "../config/AppConfig.js"
import { trimmedHeader } from "./request.js"

export interface HostRefusal {
  readonly code: "host_not_allowed" | "origin_not_allowed"
  readonly message: string
}

export interface HostPolicyShape {
  /** Why a request's Host or Origin is not this gateway's, or undefined when it may go on. */
  readonly refusal: (req: http.IncomingMessage) => HostRefusal | undefined
  /** A public host name (a running tunnel's) allowed for as long as the scope is open. */
  readonly addPublicHost: (host: string) => Effect.Effect<void, never, Scope.Scope>
  /** The public host names added and still open. */
  readonly publicHosts: () => ReadonlyArray<string>
}

/** The host name of a `Host` header value or an origin's authority, lower-cased, IPv6 without brackets; undefined when it is not one. */
export const hostnameOf = (authority: string): string | undefined => {
  try {
    const url = new URL(`http://${authority}`)
    if (url.username !== "" || url.password !== "" || url.pathname !== "/" || url.search !== "" || url.hash !== "") return undefined
    return url.hostname.toLowerCase().replace(/^\[(.*)\]$/, "$1")
  } catch {
    return undefined
  }
}

const originHost = (origin: string): { readonly host: string; readonly hostname: string } | undefined => {
  try {
    const url = new URL(origin)
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined
    return { host: url.host.toLowerCase(), hostname: url.hostname.toLowerCase().replace(/^\[(.*)\]$/, "$1") }
  } catch {
    return undefined
  }
}

/** What the policy is made of: the process configuration, and the public hosts that come and go. */
export interface HostPolicyInput {
  readonly config: Pick<AppConfigShape, "host" | "allowedOrigins" | "allowedHosts" | "publicBaseUrl">
  readonly publicHosts: ReadonlyMap<string, number>
}

const clip = (text: string) => JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text)

/** The refusal for `host` and `origin` (header values, absent as undefined), or undefined. */
export const hostRefusal = (input: HostPolicyInput, host: string | undefined, origin: string | undefined): HostRefusal | undefined => {
  const { config } = input
  const loopbackBind = isLoopbackHost(config.host)
  const named = new Set<string>()
  for (const h of config.allowedHosts) named.add(h.toLowerCase())
  for (const o of config.allowedOrigins) {
    const h = o === "*" ? undefined : originHost(o)
    if (h) named.add(h.hostname)
  }
  const publicOrigin = config.publicBaseUrl === undefined ? undefined : originHost(config.publicBaseUrl)
  if (publicOrigin) named.add(publicOrigin.hostname)
  const allowedName = (hostname: string) => named.has(hostname) || input.publicHosts.has(hostname)
  const bound = config.host.toLowerCase().replace(/^\[(.*)\]$/, "$1")

  if (loopbackBind && host !== undefined) {
    const hostname = hostnameOf(host)
    if (hostname === undefined || !(isLoopbackHost(hostname) || hostname === bound || allowedName(hostname))) {
      return {
        code: "host_not_allowed",
        message: `Host ${clip(host)} is not a name of this gateway (DNS rebinding protection): it listens on ${config.host}, reachable as localhost or its loopback address. Add a name it is really reached by to GATEWAY_ALLOWED_HOSTS (or NEXT_PUBLIC_BASE_URL).`
      }
    }
  }
  if (origin !== undefined) {
    if (originAllowed(origin, config.allowedOrigins)) return undefined
    const parsed = originHost(origin)
    if (parsed !== undefined) {
      if (allowedName(parsed.hostname)) return undefined
      if (!loopbackBind && host !== undefined && parsed.host === host.toLowerCase()) return undefined
    }
    return {
      code: "origin_not_allowed",
      message: `browser requests from ${clip(origin)} are not allowed here (DNS rebinding protection); add the origin to GATEWAY_ALLOWED_ORIGINS`
    }
  }
  return undefined
}

/** The policy over the process configuration and the public hosts of running tunnels. */
export class HostPolicy extends Context.Tag("gateway/HostPolicy")<HostPolicy, HostPolicyShape>() {
  static readonly make = (config: HostPolicyInput["config"]): HostPolicyShape => {
    // A host may be added by more than one scope (two tunnels to one name): counted.
    const publicHosts = new Map<string, number>()
    const input: HostPolicyInput = { config, publicHosts }
    return {
      refusal: (req) => hostRefusal(input, trimmedHeader(req, "host"), trimmedHeader(req, "origin")),
      addPublicHost: (host) => {
        const name = hostnameOf(host) ?? host.toLowerCase()
        return Effect.acquireRelease(
          Effect.sync(() => void publicHosts.set(name, (publicHosts.get(name) ?? 0) + 1)),
          () =>
            Effect.sync(() => {
              const n = (publicHosts.get(name) ?? 1) - 1
              if (n <= 0) publicHosts.delete(name)
              else publicHosts.set(name, n)
            })
        )
      },
      publicHosts: () => [...publicHosts.keys()]
    }
  }

  static readonly layer = Layer.effect(
    HostPolicy,
    Effect.map(AppConfig, (config) => HostPolicy.make(config))
  )
}
