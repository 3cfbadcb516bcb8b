/**
 * What the capture modes (Capture.ts) hold and share while the gateway runs: each mode's state
 * (its listener, its last error), what is saved of them in the database, and what both capture
 * listeners (the HTTP proxy and the MITM server) are given.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as dns from "node:dns"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import type { CustomHostSchema } from "../../domain/inspector.js"
import type { FeatureFlagsShape } from "../../platform/flags/FeatureFlags.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import { DnsResolver, systemResolve } from "../../upstream/client/egressGuard.js"
import { EgressMark } from "../../upstream/client/EgressMark.js"
import { type LocalCa, loadOrCreateCa } from "./capture/ca.js"
import type { Dial } from "./capture/forward.js"
import type { ResolveUpstream } from "./capture/mitm.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"

export type CustomHost = typeof CustomHostSchema.Type

/** Where the modes that were on are kept (the HTTP proxy, TLS interception, the system proxy's saved state). */
export const STATE_NS = "inspector.capture"
/** The custom hosts, one row each. */
export const HOSTS_NS = "inspector.hosts"

/** A capture listener that runs: its port, and how to close it. */
export interface Running {
  readonly port: number
  readonly close: () => Promise<void>
}

/** The modes' state, read and changed by their parts (captureHosts.ts, captureHttpProxy.ts, captureSystemProxy.ts). */
export interface CaptureState {
  /** The HTTP proxy's listener (mode 3; mode 4 points the system at it). */
  proxy: Running | undefined
  proxyError: string | null
  /** The custom hosts' MITM server (mode 2). */
  mitm: Running | undefined
  mitmError: string | null
  /** TLS interception by the HTTP proxy. */
  intercept: boolean
  /** The system proxy as this process applied it (mode 4). */
  systemApplied: { appliedAt: number; changes: ReadonlyArray<unknown>; notes: ReadonlyArray<string> } | undefined
  systemError: string | null
  /** The guard timer that reverts the system proxy. */
  guard: ReturnType<typeof setTimeout> | undefined
  /** The saved custom hosts, as last read. */
  hosts: ReadonlyArray<CustomHost>
}

/** The saved custom hosts. */
export const loadHosts = (kv: KeyValueShape) => Effect.map(kv.entries(HOSTS_NS), (rows) => rows.map(([, v]) => JSON.parse(v) as CustomHost))

/** The modes' state at start: nothing listens yet; TLS interception and the custom hosts as saved. */
export const loadCaptureState = Effect.fnUntraced(function* (kv: KeyValueShape) {
  const intercept = Option.getOrUndefined(yield* kv.get(STATE_NS, "tls-intercept")) === "true"
  const hosts = yield* loadHosts(kv)
  const state: CaptureState = {
    proxy: undefined,
    proxyError: null,
    mitm: undefined,
    mitmError: null,
    intercept,
    systemApplied: undefined,
    systemError: null,
    guard: undefined,
    hosts
  }
  return state
})

/** What both capture listeners are given, once per layer. */
export interface ListenerSettings {
  /** The local CA, made on first use under DATA_DIR. */
  readonly ca: () => Promise<LocalCa>
  /** INSPECTOR_UPSTREAM_CA_FILE's certificates. */
  readonly upstreamCa: Array<string> | undefined
  readonly verifyUpstream: () => boolean
  /** How origins are dialled while the transparent capture runs. */
  readonly dial: () => Dial | undefined
  /** A custom host's real address, when the gateway was given its own resolver (tests). */
  readonly resolveHost: ResolveUpstream | undefined
}

/**
 * The listeners' settings: the local CA (made on first use), the upstream CA file, TLS
 * verification as MITM_DISABLE_TLS_VERIFY said at start, the dial that carries the transparent
 * capture's bypass mark, and the resolver past the hosts file.
 */
export const listenerSettings = Effect.fnUntraced(function* (config: InspectorConfigShape, flags: FeatureFlagsShape) {
  // A custom host's real address: past the hosts file (mitm.ts), unless the gateway was given its own resolver (tests).
  const resolver = yield* DnsResolver
  const resolveHost =
    resolver === systemResolve
      ? undefined
      : async (name: string) => {
          const first = (await resolver(name))[0]
          if (first === undefined) throw Object.assign(new Error(`${name} has no address`), { code: "ENOTFOUND" })
          return { address: first.address, port: 443 }
        }

  // While the transparent capture runs, the forwarders' own connections carry its bypass mark (a name looked up first).
  const egressMark = Option.getOrUndefined(yield* Effect.serviceOption(EgressMark))
  const dial = (): Dial | undefined => {
    const marked = egressMark?.current()
    if (marked === undefined) return undefined
    return async (host, port, timeoutMs) => marked(net.isIP(host) !== 0 ? host : (await dns.promises.lookup(host)).address, port, timeoutMs)
  }

  let caPromise: Promise<LocalCa> | undefined
  const ca = () => (caPromise ??= loadOrCreateCa(config.caDir))
  const upstreamCa = config.upstreamCaFile ? [yield* Effect.promise(() => fs.readFile(config.upstreamCaFile!, "utf8"))] : undefined
  // A restart flag: its value at start holds until the next one (docs/feature-flags.md).
  const verifyAtStart = !(yield* flags.enabled("MITM_DISABLE_TLS_VERIFY"))
  const verifyUpstream = () => verifyAtStart
  const settings: ListenerSettings = { ca, upstreamCa, verifyUpstream, dial, resolveHost }
  return settings
})

/** An error as the modes report it: its message. */
export const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))
