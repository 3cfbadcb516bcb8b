/**
 * What the HTTP proxy's CONNECT and the transparent listener do with a client connection: decrypt it (a leaf from the local CA, each
 * request forwarded and recorded) or relay it raw as one entry. They differ only in how they learn the destination and dial the origin.
 */
import * as http from "node:http"
import * as net from "node:net"
import type * as stream from "node:stream"
import * as tls from "node:tls"
import type { CaptureSource, InspectorSink } from "../types.js"
import type { LocalCa } from "./ca.js"
import {
  type ConnectionEnd,
  describeUpstreamError,
  forwardRequest,
  forwardUpgrade,
  type Live,
  readLive,
  relay,
  sendJsonError,
  type Upstreams
} from "./forward.js"

/** TLS records start with a handshake byte (0x16): what a client sends first on a connection it means to encrypt. */
export const TLS_HANDSHAKE = 0x16

/**
 * A decrypted connection closed this soon after its handshake without a single request is taken
 * for a client that refused the leaf: node and Go clients check the certificate only after the
 * handshake and then just close, with no alert the server could see.
 */
const REFUSED_AFTER_HANDSHAKE_MS = 2_000

export const urlHost = (host: string): string => (net.isIPv6(host) ? `[${host}]` : host)

/** A raw HTTP/1.1 JSON error answer, for a socket that has no `ServerResponse`. */
export const rawJson = (status: string, code: string, message: string): string => {
  const body = JSON.stringify({ error: { message, code } })
  return `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}

/**
 * Calls `decide` with the client's first bytes (the socket paused), or destroys the connection
 * after `idleTimeoutMs` without any: until then the idle time is bounded here; after them, by the
 * relay or the decrypted side's server.
 */
export const onFirstBytes = (client: net.Socket, idleTimeoutMs: number, decide: (first: Buffer) => void): void => {
  const idle = () => client.destroy()
  client.setTimeout(idleTimeoutMs, idle)
  client.once("data", (first: Buffer) => {
    client.pause()
    client.setTimeout(0)
    client.off("timeout", idle)
    decide(first)
  })
}

/** Where a client connection was going. */
export interface InterceptTarget {
  /** The host name (or IP literal) the client meant: the URL's host and the name the upstream certificate must carry. */
  readonly host: string
  readonly port: number
  /** The address to connect to when it is not `host` (TPROXY: the original destination). */
  readonly address?: string | undefined
  /** Take the host from the client's SNI once the handshake is done (TPROXY: the original destination is an IP). */
  readonly hostFromSni?: boolean
}

/** What the recorded entry says of the connection besides its target. */
export interface InterceptMeta {
  readonly clientPort: number | undefined
  /** Headers of the request that opened it (a CONNECT's); none for TPROXY. */
  readonly headers: http.IncomingHttpHeaders
  readonly httpVersion?: string
  /** The entry's method: `CONNECT` for the proxy; TPROXY says what it saw (`TLS`, `TCP`). */
  readonly method: string
}

export interface InterceptorOptions {
  readonly sink: InspectorSink
  readonly source: () => CaptureSource
  readonly ca: () => Promise<LocalCa>
  readonly upstreams: Upstreams
  readonly verifyUpstream: Live<boolean>
  readonly idleTimeoutMs: number
  /** Every socket opened here, so that the listener's close destroys it. */
  readonly track: (socket: stream.Duplex) => void
  /** The listener is closing: sockets it destroys are no client refusing a certificate. */
  readonly closing: () => boolean
}

export interface RawTunnelOptions {
  /** The client was told the tunnel is open before it was (a CONNECT under interception): an upstream failure can only cut it. */
  readonly answered: boolean
  /** Called once the origin is connected, before any byte is relayed (the proxy's `200 Connection Established`). */
  readonly onOpen?: () => void
  /** Tells the client the origin could not be reached, when it can still be told (the proxy's 502). */
  readonly refuse?: (code: string, message: string) => void
}

export interface Interceptor {
  /** TLS answered here, HTTP/1.1 on the decrypted stream, each request forwarded and recorded. `first` is the client's first bytes (its
   * ClientHello). */
  readonly decrypt: (client: net.Socket, first: Buffer, target: InterceptTarget, meta: InterceptMeta) => void
  /** Bytes relayed as they are, recorded as one metadata entry. `head` goes first to the origin. */
  readonly tunnel: (client: net.Socket, head: Buffer, target: InterceptTarget, meta: InterceptMeta, options: RawTunnelOptions) => void
}

/** Where a decrypted connection goes, looked up by the TLS socket its requests arrive on. */
interface Decrypted {
  host: string
  readonly port: number
  readonly address: string | undefined
  readonly clientPort: number | undefined
  /** Requests served on it so far. */
  requests: number
}

/** A request's target on a decrypted connection: the path is what counts, the host is the connection's. */
const pathOf = (raw: string): string => {
  if (raw.startsWith("/")) return raw
  try {
    const u = new URL(raw)
    return `${u.pathname}${u.search}`
  } catch {
    return "/"
  }
}

export const makeInterceptor = (opts: InterceptorOptions): Interceptor => {
  const { sink, idleTimeoutMs, upstreams, track } = opts
  const decrypted = new WeakMap<net.Socket, Decrypted>()

  const forwardOptions = (d: Decrypted) => ({
    sink,
    source: opts.source(),
    clientPort: d.clientPort,
    upstreams,
    verifyUpstream: readLive(opts.verifyUpstream),
    idleTimeoutMs,
    ...(d.address !== undefined ? { connect: () => Promise.resolve({ address: d.address as string, port: d.port }) } : {})
  })

  // The decrypted side: not listening, fed one TLS socket per connection.
  const inner = http.createServer({ requestTimeout: 0 })
  inner.timeout = idleTimeoutMs
  inner.keepAliveTimeout = idleTimeoutMs
  inner.on("clientError", (_error, socket) => socket.destroy())
  const targetOf = (req: http.IncomingMessage): { d: Decrypted; target: URL } | undefined => {
    const d = decrypted.get(req.socket)
    if (d === undefined) return undefined
    d.requests++
    return { d, target: new URL(`https://${urlHost(d.host)}:${d.port}${pathOf(req.url ?? "/")}`) }
  }
  inner.on("request", (req, res) => {
    const found = targetOf(req)
    if (found === undefined) return sendJsonError(res, 500, "internal_error", "lost track of this connection")
    void forwardRequest(req, res, found.target, forwardOptions(found.d))
  })
  inner.on("upgrade", (req: http.IncomingMessage, socket: stream.Duplex, head: Buffer) => {
    const found = targetOf(req)
    if (found === undefined) return void socket.destroy()
    forwardUpgrade(req, socket, head, found.target, forwardOptions(found.d))
  })

  /** The origin, connected: through the upstreams' dialler (a marked socket) or a plain one. */
  const openOrigin = (address: string, port: number): Promise<net.Socket> => {
    const dial = upstreams.dial()
    if (dial !== undefined) return dial(address, port, idleTimeoutMs)
    return new Promise((resolve, reject) => {
      const origin = net.connect({ host: address, port })
      const onTimeout = () => origin.destroy(Object.assign(new Error(`no connection after ${idleTimeoutMs} ms`), { code: "ETIMEDOUT" }))
      origin.setTimeout(idleTimeoutMs, onTimeout)
      origin.once("error", reject)
      origin.once("connect", () => {
        origin.off("timeout", onTimeout)
        origin.setTimeout(0)
        origin.off("error", reject)
        resolve(origin)
      })
    })
  }

  const tunnel: Interceptor["tunnel"] = (client, head, target, meta, options) => {
    const started = Date.now()
    const label = `${urlHost(target.host)}:${target.port}`
    const id = sink.begin({
      source: opts.source(),
      method: meta.method,
      url: `https://${label}`,
      headers: meta.headers,
      bodySize: 0,
      ...(meta.httpVersion !== undefined ? { httpVersion: meta.httpVersion } : {}),
      clientPort: meta.clientPort,
      tunnelOnly: true
    })
    let over = false
    client.once("close", () => {
      if (over) return
      over = true
      sink.fail(id, "the client closed the connection before the tunnel was open")
    })
    openOrigin(target.address ?? target.host, target.port).then(
      (origin) => {
        track(origin)
        if (over || client.destroyed) {
          origin.destroy()
          return
        }
        const ttfbMs = Date.now() - started
        options.onOpen?.()
        if (head.length > 0) origin.write(head)
        over = true
        relay(client, origin, idleTimeoutMs, (up, down) => {
          const end: ConnectionEnd = { status: 200, headers: {}, bodySize: down, ttfbMs, requestBodySize: up + head.length }
          sink.end(id, end)
        })
        client.resume()
      },
      (error: unknown) => {
        if (over) return
        over = true
        const { code, message } = describeUpstreamError(error, label)
        // Once the client was told the tunnel is open there is no status left to answer with.
        if (options.answered || options.refuse === undefined) client.destroy()
        else options.refuse(code, message)
        sink.fail(id, message)
      }
    )
  }

  const decrypt: Interceptor["decrypt"] = (client, first, target, meta) => {
    const label = `${urlHost(target.host)}:${target.port}`
    const handshakeFailed = (message: string, host = label) => {
      const id = sink.begin({
        source: opts.source(),
        method: meta.method,
        url: `https://${host}`,
        headers: meta.headers,
        bodySize: 0,
        clientPort: meta.clientPort,
        tunnelOnly: true
      })
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
          // HTTP/2 is not offered: a client that asks for h2 falls back to HTTP/1.1 (docs/capture.md).
          ALPNProtocols: ["http/1.1"],
          // The client's server name wins over the target host: it is the name the client will check.
          SNICallback: (servername, done) => {
            if (servername.toLowerCase() === target.host) return done(null, context)
            ca.secureContextFor(servername).then(
              (c) => done(null, c),
              (error: Error) => done(error)
            )
          }
        })
        track(secure)
        const d: Decrypted = { host: target.host, port: target.port, address: target.address, clientPort: meta.clientPort, requests: 0 }
        decrypted.set(secure, d)
        let securedAt = 0
        let reported = false
        const refused = (why: string) => {
          // Sockets the listener itself closes on stop are no refusal.
          if (reported || opts.closing()) return
          reported = true
          handshakeFailed(
            `${why}; the client must trust the inspector CA (SHA-256 fingerprint ${ca.fingerprint256})`,
            `${urlHost(d.host)}:${d.port}`
          )
        }
        secure.once("secure", () => {
          securedAt = Date.now()
          const sni = (secure as tls.TLSSocket & { servername?: string | false }).servername
          if (target.hostFromSni && typeof sni === "string" && sni !== "") d.host = sni.toLowerCase()
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
          if (d.requests === 0 && Date.now() - securedAt < REFUSED_AFTER_HANDSHAKE_MS) {
            refused("the client closed the connection right after the TLS handshake, before any request: it likely refused the certificate")
          }
        })
      })
      .catch((error: unknown) => handshakeFailed(`no certificate for ${target.host}: ${(error as Error)?.message ?? String(error)}`))
  }

  return { decrypt, tunnel }
}
