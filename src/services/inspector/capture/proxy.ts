/**
 * The HTTP proxy capture mode (mode 3; mode 4 points the OS proxy settings here): plain HTTP forwarded and recorded, CONNECT relayed
 * as a tunnel or, with interception on and a TLS start, decrypted (docs/inspector.md#3-http-proxy).
 */
import * as http from "node:http"
import * as net from "node:net"
import type * as stream from "node:stream"
import type { CaptureSource, InspectorSink } from "../types.js"
import type { LocalCa } from "./ca.js"
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
import { makeInterceptor, onFirstBytes, rawJson, TLS_HANDSHAKE } from "./intercept.js"

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
  /** How origins are dialled while the transparent capture runs (a socket with its bypass mark); undefined: the usual connect. */
  readonly dial?: () => Dial | undefined
}

export interface RunningProxy {
  readonly port: number
  readonly host: string
  readonly close: () => Promise<void>
}

/** `host:port` of a CONNECT (`[v6]:port` for IPv6); undefined when it is not one. */
export const parseAuthority = (authority: string): { host: string; port: number } | undefined => {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(authority) ?? /^([^:[\]/\s@]+):(\d{1,5})$/.exec(authority)
  if (m === null) return undefined
  const port = Number(m[2])
  if (port < 1 || port > 65535) return undefined
  if (m[0].startsWith("[") && net.isIPv6(m[1]!) === false) return undefined
  return { host: m[1]!.toLowerCase(), port }
}

const NOT_A_PROXY_REQUEST =
  "this is the gateway inspector's HTTP proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port, e.g. with HTTP_PROXY/HTTPS_PROXY pointing here"

export const startHttpProxy = async (opts: HttpProxyOptions): Promise<RunningProxy> => {
  const host = opts.host ?? "127.0.0.1"
  const { sink, idleTimeoutMs } = opts
  const upstreams = createUpstreams({ upstreamCa: opts.upstreamCa, idleTimeoutMs, dial: opts.dial })
  const sockets = new Set<stream.Duplex>()
  const track = (socket: stream.Duplex) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
  }
  const clientPortOf = opts.clientPortOf ?? ((socket: net.Socket) => socket.remotePort)
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
    const port = clientPortOf(socket)
    if (port !== undefined) sink.accepted?.(port)
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

  const interceptor = makeInterceptor({
    sink,
    source: opts.source,
    ca: opts.ca,
    upstreams,
    verifyUpstream: opts.verifyUpstream,
    idleTimeoutMs,
    track,
    closing: () => closing
  })
  const metaOf = (req: http.IncomingMessage, client: net.Socket) => ({
    clientPort: clientPortOf(client),
    headers: req.headers,
    httpVersion: req.httpVersion,
    method: "CONNECT"
  })
  /** CONNECT without interception (or a non-TLS tunnel under it): bytes relayed as they are, one entry for the whole tunnel. */
  const tunnel = (req: http.IncomingMessage, client: net.Socket, head: Buffer, target: { host: string; port: number }, answered: boolean) =>
    interceptor.tunnel(client, head, target, metaOf(req, client), {
      answered,
      onOpen: () => {
        if (!answered) client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      },
      refuse: (code, message) => client.end(rawJson("502 Bad Gateway", code, message))
    })

  server.on("connect", (req: http.IncomingMessage, socket: stream.Duplex, head: Buffer) => {
    const client = socket as net.Socket
    client.on("error", () => client.destroy())
    const target = parseAuthority(req.url ?? "")
    if (target === undefined) return void client.end(rawJson("400 Bad Request", "bad_request", "CONNECT needs host:port"))
    if (isSelf(target.host, target.port))
      return void client.end(rawJson("400 Bad Request", "proxy_loop", "the tunnel targets this proxy itself"))
    if (!opts.intercept()) return tunnel(req, client, head, target, false)
    // Interception: the tunnel is accepted at once and its first bytes decide; a client that speaks TLS is decrypted, any other is relayed
    // raw.
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
    const decide = (first: Buffer) =>
      first[0] === TLS_HANDSHAKE
        ? interceptor.decrypt(client, first, target, metaOf(req, client))
        : tunnel(req, client, first, target, true)
    if (head.length > 0) return decide(head)
    onFirstBytes(client, idleTimeoutMs, decide)
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
