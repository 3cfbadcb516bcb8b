/**
 * The custom-host mode's TLS server: answers for enabled custom hosts only (any other name is refused), records each request and
 * forwards it to the real host, resolved past the hosts file (docs/inspector.md#2-custom-hosts).
 */
import * as dns from "node:dns"
import type * as http from "node:http"
import * as https from "node:https"
import type * as net from "node:net"
import type * as stream from "node:stream"
import type * as tls from "node:tls"
import { BoundedMap } from "../../../kernel/BoundedMap.js"
import type { DetectedKind, InspectorSink } from "../types.js"
import { type LocalCa, normalizeCertHost } from "./ca.js"
import {
  closeAll,
  createUpstreams,
  type Dial,
  forwardRequest,
  forwardUpgrade,
  isLoopbackHost,
  type Live,
  listenOn,
  readLive,
  sendJsonError
} from "./forward.js"

/** A custom host as the host form keeps it. */
export interface MitmHostEntry {
  readonly host: string
  readonly enabled: boolean
  /** The entries' kind (default `custom`). */
  readonly kind?: DetectedKind | undefined
}

export type ResolveUpstream = (host: string) => Promise<{ readonly address: string; readonly port: number }>

export interface MitmServerOptions {
  /** Loopback only (default 127.0.0.1). */
  readonly host?: string
  /** INSPECTOR_MITM_PORT (443); 0 picks a free port (tests). */
  readonly port: number
  readonly sink: InspectorSink
  /** The custom hosts (a list, or a map by host name), read at every handshake and request: a host disabled later stops being served at
   * once. */
  readonly hosts: () => ReadonlyArray<MitmHostEntry> | ReadonlyMap<string, Omit<MitmHostEntry, "host">>
  readonly ca: () => Promise<LocalCa>
  readonly upstreamCa?: ReadonlyArray<string>
  /** False only with MITM_DISABLE_TLS_VERIFY. */
  readonly verifyUpstream: Live<boolean>
  readonly idleTimeoutMs: number
  /** The real address of a custom host (default: `resolvePastHostsFile`, port 443). */
  readonly resolve?: ResolveUpstream
  /** How origins are dialled while the transparent capture runs (a socket with its bypass mark); undefined: the usual connect. */
  readonly dial?: () => Dial | undefined
}

export interface RunningMitm {
  readonly port: number
  readonly host: string
  readonly close: () => Promise<void>
}

/**
 * A host's address from the system's name servers, not from the hosts file (node's `dns.lookup`
 * reads the hosts file; `Resolver` does not): IPv4 first, then IPv6, cached for the record's TTL
 * (5 s to 5 min). Port 443.
 */
export const resolvePastHostsFile = (): ResolveUpstream => {
  const resolver = new dns.promises.Resolver({ timeout: 5_000, tries: 2 })
  const cache = new BoundedMap<string, { address: string; expires: number }>({ maxEntries: 1_000 })
  return async (host) => {
    const now = Date.now()
    const hit = cache.get(host)
    if (hit !== undefined && hit.expires > now) return { address: hit.address, port: 443 }
    const records = await resolver.resolve4(host, { ttl: true }).catch(() => [] as Array<dns.RecordWithTtl>)
    const found = records.length > 0 ? records : await resolver.resolve6(host, { ttl: true }).catch(() => [] as Array<dns.RecordWithTtl>)
    const first = found[0]
    if (first === undefined)
      throw Object.assign(new Error(`${host} has no address in DNS (the hosts file is bypassed on purpose)`), { code: "ENOTFOUND" })
    cache.set(host, { address: first.address, expires: now + Math.min(300, Math.max(5, first.ttl)) * 1000 })
    return { address: first.address, port: 443 }
  }
}

export const startMitmServer = async (opts: MitmServerOptions): Promise<RunningMitm> => {
  const host = opts.host ?? "127.0.0.1"
  const { sink, idleTimeoutMs } = opts
  const resolve = opts.resolve ?? resolvePastHostsFile()
  const upstreams = createUpstreams({ upstreamCa: opts.upstreamCa, idleTimeoutMs, dial: opts.dial })
  const sockets = new Set<stream.Duplex>()
  const track = (socket: stream.Duplex) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
  }
  let boundPort = opts.port

  const entryFor = (name: string | false | null | undefined): MitmHostEntry | undefined => {
    if (typeof name !== "string" || name === "") return undefined
    let wanted: string
    try {
      wanted = normalizeCertHost(name)
    } catch {
      return undefined
    }
    const hosts = opts.hosts()
    const same = (h: string) => h.toLowerCase().replace(/\.$/, "") === wanted
    if (Array.isArray(hosts)) return (hosts as ReadonlyArray<MitmHostEntry>).find((e) => e.enabled && same(e.host))
    for (const [h, e] of hosts as ReadonlyMap<string, Omit<MitmHostEntry, "host">>) if (e.enabled && same(h)) return { host: h, ...e }
    return undefined
  }

  const server = https.createServer({
    ALPNProtocols: ["http/1.1"],
    requestTimeout: 0,
    SNICallback: (servername, done) => {
      // No certificate for a name that is not an enabled custom host: the handshake is refused.
      if (entryFor(servername) === undefined) return done(new Error(`${servername} is not an enabled custom host`))
      opts
        .ca()
        .then((ca) => ca.secureContextFor(servername))
        .then(
          (context) => done(null, context),
          (error: Error) => done(error)
        )
    }
  })
  server.timeout = idleTimeoutMs
  server.keepAliveTimeout = idleTimeoutMs
  server.on("connection", (socket: net.Socket) => {
    track(socket)
    socket.setNoDelay(true)
  })
  server.on("secureConnection", track)
  server.on("tlsClientError", (_error, socket) => socket.destroy())

  /** The request's target as the client asked for it, and where the real host is. */
  const route = (req: http.IncomingMessage) => {
    const socket = req.socket as tls.TLSSocket
    const entry = entryFor(socket.servername)
    if (entry === undefined) return undefined
    const name = normalizeCertHost(socket.servername as string)
    const hostPort = /:(\d+)$/.exec(req.headers.host ?? "")?.[1]
    const path = (req.url ?? "/").startsWith("/") ? (req.url ?? "/") : "/"
    const target = new URL(`https://${name}${hostPort !== undefined && hostPort !== "443" ? `:${hostPort}` : ""}${path}`)
    const connect = async () => {
      const to = await resolve(name)
      // The hosts file (or DNS) sending the host back here would forward the request to itself forever.
      // The client reached this server on its own port (443, or INSPECTOR_MITM_PORT): the real host is on the resolver's
      // port (443). A different port named in Host is the one the client's URL meant: the real host is reached there.
      const named = target.port !== "" ? Number(target.port) : undefined
      const port = named !== undefined && named !== boundPort ? named : to.port
      if (isLoopbackHost(to.address) && port === boundPort)
        throw Object.assign(new Error(`${name} resolves to this server`), { code: "ELOOP" })
      return { address: to.address, port }
    }
    return { entry, target, connect, clientPort: socket.remotePort }
  }

  const forwardOptions = (r: NonNullable<ReturnType<typeof route>>) => ({
    sink,
    source: "custom-host" as const,
    kind: r.entry.kind ?? ("custom" as const),
    clientPort: r.clientPort,
    upstreams,
    verifyUpstream: readLive(opts.verifyUpstream),
    idleTimeoutMs,
    connect: r.connect
  })

  server.on("request", (req, res) => {
    const r = route(req)
    // The host was disabled after this connection's handshake.
    if (r === undefined)
      return sendJsonError(res, 421, "misdirected_request", "this host is no longer an enabled custom host of the inspector")
    void forwardRequest(req, res, r.target, forwardOptions(r))
  })
  server.on("upgrade", (req: http.IncomingMessage, socket: stream.Duplex, head: Buffer) => {
    const r = route(req)
    if (r === undefined) return void socket.destroy()
    forwardUpgrade(req, socket, head, r.target, forwardOptions(r))
  })

  try {
    boundPort = await listenOn(server, host, opts.port)
  } catch (error) {
    upstreams.destroy()
    throw error
  }
  return { host, port: boundPort, close: () => closeAll(server, sockets, upstreams) }
}
