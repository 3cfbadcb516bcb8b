/**
 * The HTTP proxy capture mode (spec document 3, "Capture modes" 3, and 4, which points the OS proxy
 * settings at this same listener): an explicit proxy on loopback that clients reach through
 * `HTTP_PROXY` / `HTTPS_PROXY` or their proxy setting.
 *
 * Plain HTTP requests (absolute-form) are forwarded and recorded in full. HTTPS arrives as CONNECT:
 * without TLS interception it is a raw tunnel recorded as one entry (host, port, timing, bytes);
 * with interception on, the proxy answers the tunnel's TLS itself with a leaf from the local CA,
 * serves HTTP/1.1 on the decrypted stream, and forwards each request re-encrypted to the host the
 * client asked for, recording each in full. A tunnel whose first bytes are not TLS (a WebSocket or
 * SSH through CONNECT) is relayed raw even with interception on.
 */
import * as http from "node:http"
import * as net from "node:net"
import type * as stream from "node:stream"
import * as tls from "node:tls"
import type { CaptureSource, InspectorSink } from "../types.js"
import type { LocalCa } from "./ca.js"
import {
  type ConnectionEnd,
  closeAll,
  createUpstreams,
  describeUpstreamError,
  forwardRequest,
  forwardUpgrade,
  isLoopbackHost,
  type Live,
  listenOn,
  readLive,
  relay,
  sendJsonError
} from "./forward.js"

export interface HttpProxyOptions {
  /** Loopback only (default 127.0.0.1); anything else is refused. */
  readonly host?: string
  /** 0 picks a free port (tests). */
  readonly port: number
  readonly sink: InspectorSink
  /** `http-proxy`, or `system-proxy` while the OS proxy settings point here; read per request. */
  readonly source: () => CaptureSource
  /** TLS interception (the tls-intercept toggle); read per CONNECT. */
  readonly intercept: () => boolean
  readonly ca: () => Promise<LocalCa>
  /** Extra CA certificates (PEM) trusted for upstreams (INSPECTOR_UPSTREAM_CA_FILE). */
  readonly upstreamCa?: ReadonlyArray<string>
  /** False only with MITM_DISABLE_TLS_VERIFY. */
  readonly verifyUpstream: Live<boolean>
  readonly idleTimeoutMs: number
  /** The client's port for process attribution (default: the socket's remote port). */
  readonly clientPortOf?: (socket: net.Socket) => number | undefined
}

export interface RunningProxy {
  readonly port: number
  readonly host: string
  readonly close: () => Promise<void>
}

/** Where a decrypted tunnel goes, looked up by the TLS socket its requests arrive on. */
interface Tunnel {
  readonly host: string
  readonly port: number
  readonly clientPort: number | undefined
  /** Requests served on it so far. */
  requests: number
}

/**
 * A decrypted tunnel closed this soon after its handshake without a single request is taken for a
 * client that refused the leaf: node and Go clients check the certificate only after the handshake
 * and then just close, with no alert the server could see.
 */
const REFUSED_AFTER_HANDSHAKE_MS = 2_000

/** `host:port` of a CONNECT (`[v6]:port` for IPv6); undefined when it is not one. */
export const parseAuthority = (authority: string): { host: string; port: number } | undefined => {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(authority) ?? /^([^:[\]/\s@]+):(\d{1,5})$/.exec(authority)
  if (m === null) return undefined
  const port = Number(m[2])
  if (port < 1 || port > 65535) return undefined
  if (m[0].startsWith("[") && net.isIPv6(m[1]!) === false) return undefined
  return { host: m[1]!.toLowerCase(), port }
}

const urlHost = (host: string): string => (net.isIPv6(host) ? `[${host}]` : host)

const rawJson = (status: string, code: string, message: string): string => {
  const body = JSON.stringify({ error: { message, code } })
  return `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}

const NOT_A_PROXY_REQUEST =
  "this is the gateway inspector's HTTP proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port, e.g. with HTTP_PROXY/HTTPS_PROXY pointing here"

/** TLS records start with a handshake byte (0x16): what a client sends first in a tunnel it means to encrypt. */
const TLS_HANDSHAKE = 0x16

export const startHttpProxy = async (opts: HttpProxyOptions): Promise<RunningProxy> => {
  const host = opts.host ?? "127.0.0.1"
  const { sink, idleTimeoutMs } = opts
  const upstreams = createUpstreams({ upstreamCa: opts.upstreamCa, idleTimeoutMs })
  const sockets = new Set<stream.Duplex>()
  const track = (socket: stream.Duplex) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
  }
  const clientPortOf = opts.clientPortOf ?? ((socket: net.Socket) => socket.remotePort)
  const tunnels = new WeakMap<net.Socket, Tunnel>()
  let boundPort = opts.port
  let closing = false

  /** A request for this very proxy would loop through it forever. */
  const isSelf = (targetHost: string, targetPort: number) => targetPort === boundPort && (isLoopbackHost(targetHost) || targetHost === host)

  const forwardOptions = (clientPort: number | undefined) => ({
    sink,
    source: opts.source(),
    clientPort,
    upstreams,
    verifyUpstream: readLive(opts.verifyUpstream),
    idleTimeoutMs
  })

  const absoluteTarget = (url: string | undefined): URL | undefined => {
    if (url === undefined || !/^https?:\/\//i.test(url)) return undefined
    try {
      return new URL(url)
    } catch {
      return undefined
    }
  }

  const server = http.createServer({ requestTimeout: 0 })
  server.timeout = idleTimeoutMs
  server.keepAliveTimeout = idleTimeoutMs
  server.on("connection", (socket: net.Socket) => {
    track(socket)
    socket.setNoDelay(true)
  })
  server.on("clientError", (_error, socket) => {
    if (socket.writable && !socket.destroyed) socket.end(rawJson("400 Bad Request", "bad_request", "malformed HTTP request"))
    else socket.destroy()
  })

  server.on("request", (req, res) => {
    const target = absoluteTarget(req.url)
    if (target === undefined) return sendJsonError(res, 400, "not_a_proxy_request", NOT_A_PROXY_REQUEST)
    if (isSelf(target.hostname.replace(/^\[|\]$/g, ""), Number(target.port || (target.protocol === "https:" ? 443 : 80)))) {
      return sendJsonError(res, 400, "proxy_loop", "the request targets this proxy itself")
    }
    void forwardRequest(req, res, target, forwardOptions(clientPortOf(req.socket)))
  })

  server.on("upgrade", (req: http.IncomingMessage, socket: stream.Duplex, head: Buffer) => {
    const target = absoluteTarget(req.url)
    if (target === undefined) return void socket.end(rawJson("400 Bad Request", "not_a_proxy_request", NOT_A_PROXY_REQUEST))
    forwardUpgrade(req, socket, head, target, forwardOptions(clientPortOf(req.socket)))
  })

  // The decrypted side of intercepted tunnels: not listening, fed one TLS socket per tunnel.
  const inner = http.createServer({ requestTimeout: 0 })
  inner.timeout = idleTimeoutMs
  inner.keepAliveTimeout = idleTimeoutMs
  inner.on("clientError", (_error, socket) => socket.destroy())
  const tunnelTarget = (req: http.IncomingMessage): { tunnel: Tunnel; target: URL } | undefined => {
    const tunnel = tunnels.get(req.socket)
    if (tunnel === undefined) return undefined
    tunnel.requests++
    const raw = req.url ?? "/"
    // A client may send absolute-form inside the tunnel too: the path is what counts, the host is the tunnel's.
    const path = raw.startsWith("/") ? raw : (absoluteTarget(raw)?.pathname ?? "/") + (absoluteTarget(raw)?.search ?? "")
    return { tunnel, target: new URL(`https://${urlHost(tunnel.host)}:${tunnel.port}${path}`) }
  }
  inner.on("request", (req, res) => {
    const found = tunnelTarget(req)
    if (found === undefined) return sendJsonError(res, 500, "internal_error", "lost track of this tunnel")
    void forwardRequest(req, res, found.target, forwardOptions(found.tunnel.clientPort))
  })
  inner.on("upgrade", (req: http.IncomingMessage, socket: stream.Duplex, head: Buffer) => {
    const found = tunnelTarget(req)
    if (found === undefined) return void socket.destroy()
    forwardUpgrade(req, socket, head, found.target, forwardOptions(found.tunnel.clientPort))
  })

  /** CONNECT without interception: bytes relayed as they are, one entry for the whole tunnel. */
  const tunnel = (req: http.IncomingMessage, client: net.Socket, head: Buffer, target: { host: string; port: number }, answered: boolean) => {
    const started = Date.now()
    const label = `${urlHost(target.host)}:${target.port}`
    const id = sink.begin({
      source: opts.source(),
      method: "CONNECT",
      url: `https://${label}`,
      headers: req.headers,
      bodySize: 0,
      httpVersion: req.httpVersion,
      clientPort: clientPortOf(client),
      tunnelOnly: true
    })
    const origin = net.connect({ host: target.host, port: target.port })
    track(origin)
    let connected = false
    let over = false
    const onConnectTimeout = () => origin.destroy(Object.assign(new Error(`no connection after ${idleTimeoutMs} ms`), { code: "ETIMEDOUT" }))
    origin.setTimeout(idleTimeoutMs, onConnectTimeout)
    origin.once("connect", () => {
      connected = true
      origin.off("timeout", onConnectTimeout)
      const ttfbMs = Date.now() - started
      if (!answered) client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      if (head.length > 0) origin.write(head)
      relay(client, origin, idleTimeoutMs, (up, down) => {
        over = true
        const end: ConnectionEnd = { status: 200, headers: {}, bodySize: down, ttfbMs, requestBodySize: up + head.length }
        sink.end(id, end)
      })
    })
    origin.once("error", (error) => {
      if (connected || over) return
      over = true
      const { code, message } = describeUpstreamError(error, label)
      // Once the 200 went out (a non-TLS tunnel under interception) there is no status left to answer with.
      if (answered) client.destroy()
      else client.end(rawJson("502 Bad Gateway", code, message))
      sink.fail(id, message)
    })
    client.once("close", () => {
      if (connected || over) return
      over = true
      origin.destroy()
      sink.fail(id, "the client closed the connection before the tunnel was open")
    })
  }

  /** CONNECT with interception: TLS answered here with a leaf for the host, HTTP/1.1 served on the decrypted stream. */
  const intercepted = (req: http.IncomingMessage, client: net.Socket, first: Buffer, target: { host: string; port: number }) => {
    const label = `${urlHost(target.host)}:${target.port}`
    const clientPort = clientPortOf(client)
    const handshakeFailed = (message: string) => {
      const id = sink.begin({ source: opts.source(), method: "CONNECT", url: `https://${label}`, headers: req.headers, bodySize: 0, clientPort, tunnelOnly: true })
      sink.fail(id, message)
      client.destroy()
    }
    client.pause()
    client.unshift(first)
    opts
      .ca()
      .then(async (ca) => {
        const context = await ca.secureContextFor(target.host)
        if (client.destroyed) return
        const secure = new tls.TLSSocket(client, {
          isServer: true,
          secureContext: context,
          ALPNProtocols: ["http/1.1"],
          // The client's server name wins over the CONNECT host: it is the name the client will check.
          SNICallback: (servername, done) => {
            if (servername.toLowerCase() === target.host) return done(null, context)
            ca.secureContextFor(servername).then(
              (c) => done(null, c),
              (error: Error) => done(error)
            )
          }
        })
        track(secure)
        const tunnel: Tunnel = { host: target.host, port: target.port, clientPort, requests: 0 }
        tunnels.set(secure, tunnel)
        let securedAt = 0
        let reported = false
        const refused = (why: string) => {
          // Sockets the proxy itself closes on stop are no refusal.
          if (reported || closing) return
          reported = true
          handshakeFailed(`${why}; the client must trust the inspector CA (SHA-256 fingerprint ${ca.fingerprint256})`)
        }
        secure.once("secure", () => {
          securedAt = Date.now()
          inner.emit("connection", secure)
        })
        secure.on("error", (error) => {
          if (securedAt === 0) refused(`TLS handshake with the client failed: ${error.message}`)
          secure.destroy()
        })
        // A client that fails the certificate check may close before its last handshake message was even sent.
        // (The socket is half-open like the HTTP server's it wraps: an end without the handshake is closed here.)
        const closedEarly = () => {
          if (securedAt !== 0) return false
          refused("the client closed the connection during the TLS handshake: it likely refused the certificate")
          secure.destroy()
          return true
        }
        secure.once("end", closedEarly)
        secure.once("close", () => {
          if (closedEarly()) return
          if (tunnel.requests === 0 && Date.now() - securedAt < REFUSED_AFTER_HANDSHAKE_MS) {
            refused("the client closed the connection right after the TLS handshake, before any request: it likely refused the certificate")
          }
        })
      })
      .catch((error: unknown) => handshakeFailed(`no certificate for ${target.host}: ${(error as Error)?.message ?? String(error)}`))
  }

  server.on("connect", (req: http.IncomingMessage, socket: stream.Duplex, head: Buffer) => {
    const client = socket as net.Socket
    client.on("error", () => client.destroy())
    const target = parseAuthority(req.url ?? "")
    if (target === undefined) return void client.end(rawJson("400 Bad Request", "bad_request", "CONNECT needs host:port"))
    if (isSelf(target.host, target.port)) return void client.end(rawJson("400 Bad Request", "proxy_loop", "the tunnel targets this proxy itself"))
    if (!opts.intercept()) return tunnel(req, client, head, target, false)
    // Interception: the tunnel is accepted at once and its first bytes decide; a client that speaks TLS is decrypted, any other is relayed raw.
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
    const decide = (first: Buffer) => (first[0] === TLS_HANDSHAKE ? intercepted(req, client, first, target) : tunnel(req, client, first, target, true))
    if (head.length > 0) return decide(head)
    // Until the first bytes: bounded here. After them, the relay or the decrypted side's server bounds the idle time.
    const idle = () => client.destroy()
    client.setTimeout(idleTimeoutMs, idle)
    client.once("data", (chunk: Buffer) => {
      client.pause()
      client.setTimeout(0)
      client.off("timeout", idle)
      decide(chunk)
    })
  })

  try {
    boundPort = await listenOn(server, host, opts.port)
  } catch (error) {
    upstreams.destroy()
    throw error
  }
  return {
    host,
    port: boundPort,
    close: () => {
      closing = true
      return closeAll(server, sockets, upstreams)
    }
  }
}
