/**
 * Forwards one decrypted (or plain) HTTP request to its origin while recording it, unnoticed by the client: streamed, every byte
 * relayed, bodies recorded as on the wire and bounded per request (docs/inspector.md#forwarding).
 */
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import type * as stream from "node:stream"
import type * as tls from "node:tls"
import { mayBeLlm } from "../detect.js"
import type { Upstreams } from "./upstreams.js"

export { createUpstreams, type Dial, type Upstreams } from "./upstreams.js"
import type { CaptureEnd, CaptureSource, DetectedKind, InspectorSink } from "../types.js"

/** Headers of one hop, never forwarded (RFC 9110 §7.6.1, plus the proxy ones clients still send). */
const HOP_BY_HOP = new Set([
  "connection",
  "proxy-connection",
  "keep-alive",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade"
])
const NONE: ReadonlySet<string> = new Set()
/** `Expect: 100-continue` was answered by this server already (node does it before the request handler runs). */
const REQUEST_DROP: ReadonlySet<string> = new Set(["expect"])
/** An upgrade request keeps the two headers that ask for it. */
const UPGRADE_KEEP: ReadonlySet<string> = new Set(["connection", "upgrade"])

/**
 * The end of a tunnel or an upgraded connection: the answer's bytes in `bodySize` and the client's in
 * `requestBodySize`. `CaptureStart` is sent before any byte went through, so the client's count can
 * only come with the end; a sink that reads `requestBodySize` shows it as the request size.
 */
export interface ConnectionEnd extends CaptureEnd {
  readonly requestBodySize: number
}

export interface ForwardOptions {
  readonly sink: InspectorSink
  readonly source: CaptureSource
  /** A custom host's kind. */
  readonly kind?: DetectedKind | undefined
  /** The client's port, for process attribution. */
  readonly clientPort?: number | undefined
  readonly upstreams: Upstreams
  /** Verify the upstream's certificate (false only with MITM_DISABLE_TLS_VERIFY). */
  readonly verifyUpstream: boolean
  readonly idleTimeoutMs: number
  /**
   * Where to connect instead of the URL's host: the custom-host MITM resolves the real address past
   * the hosts file. The TLS server name and the certificate check stay the URL's host.
   */
  readonly connect?: (() => Promise<{ readonly address: string; readonly port: number }>) | undefined
}

/** What a failed upstream call is called in the client's 502 and in the entry. */
export type ForwardErrorCode = "upstream_unreachable" | "upstream_tls_error" | "upstream_timeout" | "upstream_reset"

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|EPROTO$)/

/** Classifies an upstream error for the client's 502 and the entry, with a message that says what to do. */
export const describeUpstreamError = (error: unknown, target: string): { code: ForwardErrorCode; message: string } => {
  const code = String((error as NodeJS.ErrnoException)?.code ?? "")
  const detail = (error as Error)?.message ?? String(error)
  if (TLS_CODES.test(code)) {
    return {
      code: "upstream_tls_error",
      message: `the certificate of ${target} was refused: ${detail} (${code}); trust its CA with INSPECTOR_UPSTREAM_CA_FILE, or turn off verification with the flag MITM_DISABLE_TLS_VERIFY at your own risk`
    }
  }
  if (code === "ETIMEDOUT" || code === "UPSTREAM_IDLE")
    return { code: "upstream_timeout", message: `${target} did not answer in time: ${detail}` }
  if (code === "ECONNRESET" || code === "EPIPE") return { code: "upstream_reset", message: `${target} closed the connection: ${detail}` }
  return {
    code: "upstream_unreachable",
    message: `${target} is unreachable: ${detail}${code !== "" && !detail.includes(code) ? ` (${code})` : ""}`
  }
}

/** A JSON error answer, unless the answer has started (then the connection is cut: the client sees a truncated answer, as from the origin).
 * */
export const sendJsonError = (res: http.ServerResponse, status: number, code: string, message: string): void => {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = JSON.stringify({ error: { message, code } })
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), "cache-control": "no-store" })
  res.end(body)
}

/** `rawHeaders` without the hop-by-hop ones and those the `Connection` header names (but those in `keep`), and without those in `drop`. */
const endToEnd = (raw: ReadonlyArray<string>, keep: ReadonlySet<string> = NONE, drop: ReadonlySet<string> = NONE): Array<string> => {
  const named = new Set<string>()
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") for (const token of raw[i + 1]!.split(",")) named.add(token.trim().toLowerCase())
  }
  const out: Array<string> = []
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase()
    if (drop.has(name)) continue
    if (keep.has(name) || (!HOP_BY_HOP.has(name) && !named.has(name))) out.push(raw[i]!, raw[i + 1]!)
  }
  return out
}

/** Keeps the first `cap` bytes of what goes through, when asked to. */
class BoundedCopy {
  private readonly parts: Array<Buffer> = []
  private kept = 0
  total = 0
  constructor(
    private readonly cap: number,
    private readonly keep: boolean
  ) {}
  add(chunk: Buffer): void {
    this.total += chunk.length
    if (!this.keep || this.kept >= this.cap) return
    const part = chunk.length <= this.cap - this.kept ? chunk : Buffer.from(chunk.subarray(0, this.cap - this.kept))
    this.parts.push(part)
    this.kept += part.length
  }
  body(): Buffer | undefined {
    return this.keep ? Buffer.concat(this.parts, this.kept) : undefined
  }
}

const bareHost = (url: URL): string => url.hostname.replace(/^\[|\]$/g, "")

const defaultPort = (url: URL): number => (url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80)

type UpstreamRequestOptions = https.RequestOptions & Pick<tls.ConnectionOptions, "secureContext" | "ALPNProtocols">

interface UpstreamCall {
  readonly options: UpstreamRequestOptions
  readonly request: typeof http.request
}

/** The request options for `target` (through `connect` when given), over the server's pooled agents. */
const upstreamCall = async (
  target: URL,
  method: string,
  headers: Array<string>,
  opts: ForwardOptions,
  pooled: boolean
): Promise<UpstreamCall> => {
  const host = bareHost(target)
  const to = opts.connect !== undefined ? await opts.connect() : { address: host, port: defaultPort(target) }
  const tlsTarget = target.protocol === "https:"
  const options: UpstreamRequestOptions = {
    host: to.address,
    port: to.port,
    method,
    path: `${target.pathname}${target.search}`,
    headers: headers as unknown as http.OutgoingHttpHeaders,
    setHost: false,
    agent: pooled ? (tlsTarget ? opts.upstreams.https : opts.upstreams.http) : opts.upstreams.oneShot(tlsTarget)
  }
  if (tlsTarget) {
    options.rejectUnauthorized = opts.verifyUpstream
    // An IP literal is no server name (RFC 6066 §3); node then checks the certificate's IP SAN against `host`.
    if (net.isIP(host) === 0) options.servername = host
    if (opts.upstreams.secureContext !== undefined) options.secureContext = opts.upstreams.secureContext
    options.ALPNProtocols = ["http/1.1"]
  }
  return { options, request: tlsTarget ? https.request : http.request }
}

/** A request's `Host` header as forwarded: the client's, or the target's when the client sent none (HTTP/1.0). */
const withHost = (headers: Array<string>, target: URL): Array<string> => {
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === "host") return headers
  return ["Host", target.host, ...headers]
}

/**
 * Forwards `req` to `target` and streams the answer into `res`, recording the exchange: `begin`
 * once the request head and the first `maxBodyBytes + 1` bytes of its body are in (a bigger body
 * then streams on and is recorded cut), `end` when the answer ended, `fail` when the upstream
 * could not be reached, broke off, or the client left first. A failure before the answer started
 * is answered 502 with a JSON error. Resolves when the exchange is over; never rejects.
 */
export const forwardRequest = (req: http.IncomingMessage, res: http.ServerResponse, target: URL, opts: ForwardOptions): Promise<void> =>
  new Promise<void>((resolve) => {
    const { sink } = opts
    const started = Date.now()
    const cap = sink.maxBodyBytes + 1
    const keep = sink.wantsBodies() || mayBeLlm(bareHost(target), target.pathname, opts.kind)
    const requestCopy = new BoundedCopy(cap, keep)
    const pending: Array<Buffer> = []
    let id: string | undefined
    let settled = false
    let upReq: http.ClientRequest | undefined
    const label = `${bareHost(target)}:${defaultPort(target)}`

    const finish = (outcome: { end: CaptureEnd } | { error: string }) => {
      if (settled) return
      settled = true
      if (id !== undefined) "end" in outcome ? sink.end(id, outcome.end) : sink.fail(id, outcome.error)
      resolve()
    }

    const begin = (complete: boolean) => {
      const declared = Number(req.headers["content-length"])
      id = sink.begin({
        source: opts.source,
        method: req.method ?? "GET",
        url: target.href,
        headers: req.headers,
        body: requestCopy.body(),
        // A body still arriving is known by its declared length, or by what came so far.
        bodySize: complete || !Number.isFinite(declared) ? requestCopy.total : declared,
        httpVersion: req.httpVersion,
        clientPort: opts.clientPort,
        kind: opts.kind
      })
    }

    // The client leaving first ends the exchange: the upstream call is dropped.
    res.once("close", () => {
      if (settled) return
      upReq?.destroy()
      if (id === undefined) begin(false)
      finish({ error: "the client closed the connection before the answer ended" })
    })

    const fail = (error: unknown) => {
      if (settled) return
      const { code, message } = describeUpstreamError(error, label)
      if (id === undefined) begin(false)
      sendJsonError(res, code === "upstream_timeout" ? 504 : 502, code, message)
      finish({ error: message })
    }

    const send = async (complete: boolean) => {
      const headers = withHost(endToEnd(req.rawHeaders, NONE, REQUEST_DROP), target)
      let call: UpstreamCall
      try {
        call = await upstreamCall(target, req.method ?? "GET", headers, opts, true)
      } catch (error) {
        return fail(error)
      }
      if (settled) return
      const up = call.request(call.options)
      upReq = up
      up.setTimeout(opts.idleTimeoutMs, () =>
        up.destroy(Object.assign(new Error(`no data for ${opts.idleTimeoutMs} ms`), { code: "UPSTREAM_IDLE" }))
      )
      up.on("error", (error) => {
        if (!res.headersSent) return fail(error)
        // Broken off mid-answer: the client sees the cut, as it would from the origin.
        res.destroy()
        finish({ error: describeUpstreamError(error, label).message })
      })
      up.on("response", (upRes) => onResponse(upRes))
      for (const chunk of pending) up.write(chunk)
      pending.length = 0
      if (complete) up.end()
      else {
        req.pipe(up)
        req.resume()
      }
    }

    const onResponse = (upRes: http.IncomingMessage) => {
      const ttfbMs = Date.now() - started
      const status = upRes.statusCode ?? 502
      const answerCopy = new BoundedCopy(cap, keep)
      res.sendDate = false
      try {
        res.writeHead(status, upRes.statusMessage, endToEnd(upRes.rawHeaders))
      } catch (error) {
        // A header node parsed but will not send (an invalid character): nothing went out yet, the client gets a 502.
        upRes.destroy()
        upReq?.destroy()
        const message = `${label} answered with a head that cannot be relayed: ${(error as Error).message}`
        sendJsonError(res, 502, "upstream_bad_response", message)
        return finish({ error: message })
      }
      // Each chunk goes out as it comes (no buffering: an SSE client sees every event at once).
      res.flushHeaders()
      upRes.on("data", (chunk: Buffer) => {
        answerCopy.add(chunk)
        if (!res.write(chunk)) {
          upRes.pause()
          res.once("drain", () => upRes.resume())
        }
      })
      upRes.once("end", () => {
        res.end()
        finish({ end: { status, headers: upRes.headers, body: answerCopy.body(), bodySize: answerCopy.total, ttfbMs } })
      })
      upRes.once("close", () => {
        if (upRes.complete || settled) return
        res.destroy()
        finish({ error: `${label} closed the connection before the answer ended (${answerCopy.total} bytes relayed)` })
      })
    }

    // The body is read up to the cap before anything goes upstream: the entry then starts with it.
    let over = false
    const onData = (chunk: Buffer) => {
      requestCopy.add(chunk)
      pending.push(chunk)
      if (requestCopy.total > cap && !over) {
        over = true
        req.pause()
        req.off("data", onData)
        req.off("end", onEnd)
        begin(false)
        void send(false)
      }
    }
    const onEnd = () => {
      req.off("data", onData)
      begin(true)
      void send(true)
    }
    req.on("data", onData)
    req.once("end", onEnd)
    req.once("error", () => {
      if (id === undefined) begin(false)
      upReq?.destroy()
      finish({ error: "the client's request broke off" })
    })
  })

/**
 * Forwards an upgrade request (a WebSocket) and then relays both directions raw, recorded as one
 * entry: status 101 and the bytes each way once the connection closes. An upstream that refuses the
 * upgrade gets its answer relayed, and the connection closed after it.
 */
export const forwardUpgrade = (req: http.IncomingMessage, client: stream.Duplex, head: Buffer, target: URL, opts: ForwardOptions): void => {
  const { sink } = opts
  const started = Date.now()
  const label = `${bareHost(target)}:${defaultPort(target)}`
  opts.upstreams.track(client)
  const id = sink.begin({
    source: opts.source,
    method: req.method ?? "GET",
    url: target.href,
    headers: req.headers,
    bodySize: 0,
    httpVersion: req.httpVersion,
    clientPort: opts.clientPort,
    kind: opts.kind
  })
  let settled = false
  let upgraded = false
  const fail = (message: string) => {
    if (settled) return
    settled = true
    sink.fail(id, message)
  }
  client.on("error", () => client.destroy())
  client.once("close", () => upgraded || fail("the client closed the connection before the upstream answered"))
  const headers = withHost(endToEnd(req.rawHeaders, UPGRADE_KEEP), target)
  void upstreamCall(target, req.method ?? "GET", headers, opts, false)
    .then((call) => {
      if (settled || client.destroyed) return
      const up = call.request(call.options)
      up.setTimeout(opts.idleTimeoutMs, () =>
        up.destroy(Object.assign(new Error(`no answer for ${opts.idleTimeoutMs} ms`), { code: "UPSTREAM_IDLE" }))
      )
      up.on("error", (error) => {
        const { code, message } = describeUpstreamError(error, label)
        const body = JSON.stringify({ error: { message, code } })
        client.end(
          `HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
        )
        fail(message)
      })
      up.on("upgrade", (upRes, upSocket, upHead) => {
        const ttfbMs = Date.now() - started
        upgraded = true
        opts.upstreams.track(upSocket)
        up.setTimeout(0)
        client.write(rawHead(upRes, upRes.rawHeaders))
        if (upHead.length > 0) client.write(upHead)
        if (head.length > 0) upSocket.write(head)
        relay(client, upSocket, opts.idleTimeoutMs, (up, down) => {
          if (settled) return
          settled = true
          const end: ConnectionEnd = {
            status: upRes.statusCode ?? 101,
            headers: upRes.headers,
            bodySize: down + upHead.length,
            ttfbMs,
            requestBodySize: up + head.length
          }
          sink.end(id, end)
        })
      })
      up.on("response", (upRes) => {
        const ttfbMs = Date.now() - started
        const copy = new BoundedCopy(sink.maxBodyBytes + 1, sink.wantsBodies())
        client.write(rawHead(upRes, [...endToEnd(upRes.rawHeaders), "connection", "close"]))
        upRes.on("data", (chunk: Buffer) => {
          copy.add(chunk)
          client.write(chunk)
        })
        upRes.once("end", () => {
          client.end()
          if (settled) return
          settled = true
          sink.end(id, { status: upRes.statusCode ?? 502, headers: upRes.headers, body: copy.body(), bodySize: copy.total, ttfbMs })
        })
      })
      up.end()
    })
    .catch((error: unknown) => {
      const { message } = describeUpstreamError(error, label)
      client.destroy()
      fail(message)
    })
}

const rawHead = (res: http.IncomingMessage, headers: ReadonlyArray<string>): string => {
  let head = `HTTP/1.1 ${res.statusCode ?? 502} ${res.statusMessage ?? ""}\r\n`
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`
  return `${head}\r\n`
}

/**
 * Relays two connections both ways until both are closed, counting bytes (`up`: client to origin),
 * with half-close passed on and the idle time bounded. `done` is called once.
 */
export const relay = (
  client: stream.Duplex,
  origin: stream.Duplex,
  idleTimeoutMs: number,
  done: (up: number, down: number) => void
): void => {
  let up = 0
  let down = 0
  let open = 2
  client.on("data", (chunk: Buffer) => (up += chunk.length))
  origin.on("data", (chunk: Buffer) => (down += chunk.length))
  client.pipe(origin)
  origin.pipe(client)
  const idle = () => {
    client.destroy()
    origin.destroy()
  }
  for (const socket of [client, origin]) {
    if (socket instanceof net.Socket) {
      socket.setTimeout(idleTimeoutMs, idle)
      socket.setNoDelay(true)
    }
    socket.on("error", () => {
      client.destroy()
      origin.destroy()
    })
  }
  // A side that closed without a FIN (reset, destroyed) takes the other one down; a clean end was passed on by `pipe`.
  client.once("close", () => {
    if (!origin.writableEnded) origin.destroy()
    if (--open === 0) done(up, down)
  })
  origin.once("close", () => {
    if (!client.writableEnded) client.destroy()
    if (--open === 0) done(up, down)
  })
}

/** A capture listener that could not start. `code` is the system's (`EADDRINUSE`: the caller answers 409; `EACCES`: a port below 1024
 * without rights). */
export class CaptureListenError extends Error {
  override readonly name = "CaptureListenError"
  constructor(
    message: string,
    readonly code: string,
    readonly host: string,
    readonly port: number
  ) {
    super(message)
  }
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "::1", "localhost"])

/**
 * Listens on `host:port`, which must be loopback: a capture listener relays to anywhere and decrypts
 * with a CA the machine trusts, so on another interface it would be an open proxy.
 */
export const listenOn = (server: net.Server, host: string, port: number): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    if (!LOOPBACK_HOSTS.has(host)) {
      reject(new CaptureListenError(`capture listeners bind to loopback only (127.0.0.1 or ::1), not ${host}`, "EINVAL", host, port))
      return
    }
    const onError = (error: NodeJS.ErrnoException) => {
      const code = error.code ?? "EUNKNOWN"
      const message =
        code === "EADDRINUSE"
          ? `port ${port} on ${host} is already in use`
          : code === "EACCES"
            ? `port ${port} on ${host} needs elevated rights (ports below 1024)`
            : `cannot listen on ${host}:${port}: ${error.message}`
      reject(new CaptureListenError(message, code, host, port))
    }
    server.once("error", onError)
    // Exclusive: under `--workers` the listener is worker 1's own, never a handle the cluster shares (docs/inspector.md).
    server.listen({ host, port, exclusive: true }, () => {
      server.off("error", onError)
      // Later errors (none are expected once listening) must not crash the gateway.
      server.on("error", () => undefined)
      resolve((server.address() as net.AddressInfo).port)
    })
  })

/**
 * Closes `server` and destroys every socket it and its forwards hold. Resolves when the server has
 * closed, or after `graceMs` at the latest: stopping a capture mode must never hang.
 */
export const closeAll = (server: net.Server, sockets: Set<stream.Duplex>, upstreams: Upstreams, graceMs = 2_000): Promise<void> =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, graceMs)
    timer.unref()
    server.close(() => {
      clearTimeout(timer)
      resolve()
    })
    for (const socket of sockets) socket.destroy()
    sockets.clear()
    upstreams.destroy()
  })

/** Whether `host` names this machine's loopback. */
export const isLoopbackHost = (host: string): boolean => {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase()
  if (h === "localhost" || h.endsWith(".localhost")) return true
  if (net.isIPv4(h)) return h.startsWith("127.")
  return h === "::1" || h === "0:0:0:0:0:0:0:1" || /^::ffff:127\./.test(h)
}

/** A value fixed at start, or read each time (a flag that may change while the listener runs). */
export type Live<A> = A | (() => A)

export const readLive = <A>(value: Live<A>): A => (typeof value === "function" ? (value as () => A)() : value)
