/**
 * The fingerprinted transport (ENABLE_TLS_FINGERPRINT): impit, loaded with the first fingerprinted call, makes a browser's TLS inside
 * a loopback CONNECT relay whose TCP leg is the gateway's own egress; each transport is an undici Dispatcher under UpstreamHttp.
 * Why and how: docs/egress.md, "TLS fingerprint".
 */
import * as crypto from "node:crypto"
import * as net from "node:net"
import type { Dispatcher } from "undici"
import { DispatcherClass, errors as undiciErrors } from "../client/undici.js"
import type { TlsProfile } from "../../domain/connections.js"
import { BODY_IDLE_TIMEOUT_MS } from "../client/UpstreamHttp.js"

/** What the transport needs of impit (its `Impit` class), typed here so the package is only imported lazily. */
interface ImpitLike {
  fetch(
    url: string,
    init: { method: string; headers: Array<[string, string]>; body?: unknown; signal: AbortSignal; redirect: "manual" }
  ): Promise<{
    readonly status: number
    readonly statusText: string
    readonly headers: Headers
    readonly body: ReadableStream<Uint8Array> | null
  }>
}
type ImpitClass = new (options: Record<string, unknown>) => ImpitLike

/** Opens the TCP leg of a tunnel to `host:port` (direct with the guard, or through the connection's proxy). */
export type TunnelOpener = (host: string, port: number) => Promise<net.Socket>

/**
 * The request headers impit adds to impersonate a browser's page load. They are blanked: the
 * upstream gets the gateway's own request headers as before; only the handshake is the browser's.
 */
const BROWSER_HEADERS = [
  "accept",
  "accept-encoding",
  "accept-language",
  "priority",
  "sec-ch-ua",
  "sec-ch-ua-mobile",
  "sec-ch-ua-platform",
  "sec-fetch-dest",
  "sec-fetch-mode",
  "sec-fetch-site",
  "sec-fetch-user",
  "te",
  "upgrade-insecure-requests",
  "user-agent"
].map((h): [string, string] => [h, ""])

/** Headers a client library sets itself (hop-by-hop, the length of the body it encodes). */
const DROPPED = new Set(["host", "connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade"])

/** No timeout of impit's own (its default is 30 s for the whole call, body included): the gateway's timers govern. */
const NO_TIMEOUT_MS = 0xffff_ffff

/** How long a tunnel failure the relay saw explains impit's failure to the same target. */
const FAILURE_MEMORY_MS = 30_000

/** Largest CONNECT request head the relay reads. */
const MAX_HEAD = 16 * 1024

/** Idle impit clients a transport keeps (each with its kept-alive connection) for the next requests. */
const MAX_IDLE_CLIENTS = 16

interface Route {
  readonly open: TunnelOpener
  /** The tunnels open on this route, cut when the route is removed. */
  readonly sockets: Set<net.Socket>
  /** The last tunnel failure per `host:port`, to report the egress's reason instead of impit's "proxy error". */
  readonly failures: Map<string, { readonly error: Error; readonly at: number }>
}

/**
 * The loopback CONNECT relay impit's tunnels go through: 127.0.0.1 on an ephemeral port, each
 * route named by the proxy user name impit presents, with a per-process secret as its password
 * (no other local process can use it as a relay).
 */
class Relay {
  private readonly routes = new Map<string, Route>()
  private readonly secret = crypto.randomBytes(24).toString("hex")
  private readonly sockets = new Set<net.Socket>()
  private constructor(
    private readonly server: net.Server,
    readonly port: number
  ) {
    server.on("connection", (client) => this.accept(client))
  }

  static start(): Promise<Relay> {
    const server = net.createServer()
    return new Promise((resolve, reject) => {
      server.once("error", reject)
      server.listen(0, "127.0.0.1", () => {
        server.off("error", reject)
        server.unref()
        resolve(new Relay(server, (server.address() as net.AddressInfo).port))
      })
    })
  }

  add(open: TunnelOpener): string {
    const id = `r${crypto.randomBytes(6).toString("hex")}`
    this.routes.set(id, { open, sockets: new Set(), failures: new Map() })
    return id
  }

  /** Forgets the route and cuts its tunnels (both legs: the upstream sees its client go). */
  remove(id: string): void {
    const route = this.routes.get(id)
    if (route === undefined) return
    this.routes.delete(id)
    for (const s of route.sockets) s.destroy()
  }

  proxyUrl(id: string): string {
    return `http://${id}:${this.secret}@127.0.0.1:${this.port}`
  }

  /** The tunnel failure the relay saw for `host:port` on this route, if recent. */
  failure(id: string, host: string, port: number): Error | undefined {
    const seen = this.routes.get(id)?.failures.get(`${host}:${port}`)
    return seen && Date.now() - seen.at < FAILURE_MEMORY_MS ? seen.error : undefined
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  private accept(client: net.Socket): void {
    this.sockets.add(client)
    client.once("close", () => this.sockets.delete(client))
    client.on("error", () => client.destroy())
    let head = Buffer.alloc(0)
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk])
      const end = head.indexOf("\r\n\r\n")
      if (end < 0) {
        if (head.length > MAX_HEAD) client.destroy()
        return
      }
      client.off("data", onData)
      client.pause()
      this.tunnel(client, head.subarray(0, end).toString("latin1"), head.subarray(end + 4))
    }
    client.on("data", onData)
  }

  private tunnel(client: net.Socket, head: string, rest: Buffer): void {
    const [line, ...lines] = head.split("\r\n")
    const target = /^CONNECT (\S+) HTTP\/1\.[01]$/.exec(line ?? "")?.[1]
    const auth = lines.find((l) => l.toLowerCase().startsWith("proxy-authorization:"))
    const basic = /basic\s+(\S+)/i.exec(auth ?? "")?.[1]
    const [id, secret] = basic ? Buffer.from(basic, "base64").toString("utf8").split(":") : []
    const route = id === undefined ? undefined : this.routes.get(id)
    const given = Buffer.from(secret ?? "")
    const expected = Buffer.from(this.secret)
    if (route === undefined || given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
      client.end("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
      return
    }
    const hostPort = target === undefined ? undefined : /^\[?([^\]]+?)\]?:(\d+)$/.exec(target)
    if (hostPort === null || hostPort === undefined) {
      client.end("HTTP/1.1 400 Bad Request\r\n\r\n")
      return
    }
    const host = hostPort[1]!
    const port = Number(hostPort[2])
    const key = `${host}:${port}`
    route.open(host, port).then(
      (upstream) => {
        route.failures.delete(key)
        if (client.destroyed || !this.routes.has(id!)) {
          client.destroy()
          return upstream.destroy()
        }
        this.sockets.add(upstream)
        route.sockets.add(client)
        upstream.once("close", () => {
          this.sockets.delete(upstream)
          client.destroy()
        })
        client.once("close", () => route.sockets.delete(client))
        client.once("close", () => upstream.destroy())
        upstream.on("error", () => upstream.destroy())
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
        if (rest.length > 0) upstream.write(rest)
        upstream.pipe(client)
        client.pipe(upstream)
        upstream.resume()
        client.resume()
      },
      (error: Error) => {
        route.failures.set(key, { error, at: Date.now() })
        if (route.failures.size > 256) route.failures.delete(route.failures.keys().next().value!)
        client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n")
      }
    )
  }
}

/** Request headers as impit takes them, without the ones it sets itself. */
const headerPairs = (headers: Dispatcher.DispatchOptions["headers"]): Array<[string, string]> => {
  const out: Array<[string, string]> = []
  const add = (k: string, v: unknown) => {
    if (v === undefined || v === null || DROPPED.has(k.toLowerCase())) return
    if (Array.isArray(v)) for (const x of v) out.push([k, String(x)])
    else out.push([k, String(v)])
  }
  if (headers === undefined || headers === null) return out
  if (Array.isArray(headers) && !Array.isArray(headers[0])) {
    // undici's flat form: name, value, name, value...
    for (let i = 0; i + 1 < headers.length; i += 2) add(String(headers[i]), headers[i + 1])
  } else if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === "function") {
    for (const [k, v] of headers as Iterable<[string, string | Array<string>]>) add(k, v)
  } else for (const [k, v] of Object.entries(headers)) add(k, v)
  return out
}

/** What impit sends for a dispatch body (a stream goes as an async iterable, chunk by chunk). */
const bodyOf = (body: Dispatcher.DispatchOptions["body"]): unknown => {
  if (body === undefined || body === null) return undefined
  if (typeof body === "string") return body.length > 0 ? body : undefined
  if (Buffer.isBuffer(body) || body instanceof Uint8Array) return body.length > 0 ? body : undefined
  return body
}

/** An error with a code UpstreamHttp's classification knows. */
const coded = (message: string, code: string): Error => Object.assign(new Error(message), { code })

/** One impit client and the relay route its tunnels take: used by one request at a time. */
interface Lease {
  readonly impit: ImpitLike
  readonly route: string
}

/**
 * One browser profile through one egress route. Plain-HTTP origins have no TLS to fingerprint:
 * they go through `plain` (the route's own undici dispatcher) exactly as with the flag off.
 *
 * Each request borrows an impit client of its own (an idle one, with its kept-alive connection,
 * or a new one) whose tunnels take a relay route of their own. A request that ends early (the
 * client went away, a timeout) has that route removed, which cuts its tunnel at once: impit lets
 * go of an abandoned response's connection only when the response object is collected, so
 * without the cut the upstream would go on generating for seconds.
 */
export class FingerprintDispatcher extends DispatcherClass {
  private closed = false
  private readonly idle: Array<Lease> = []
  constructor(
    private readonly open: () => Lease,
    private readonly relay: Relay,
    readonly plain: Dispatcher,
    readonly profile: TlsProfile
  ) {
    super()
  }

  /** Takes the request's client back: kept for the next one when the request ended cleanly, its tunnels cut otherwise. */
  private release(lease: Lease, clean: boolean): void {
    if (clean && !this.closed && this.idle.length < MAX_IDLE_CLIENTS) this.idle.push(lease)
    else this.relay.remove(lease.route)
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const origin = typeof opts.origin === "string" ? opts.origin : String(opts.origin ?? "")
    if (!origin.startsWith("https:")) return this.plain.dispatch(opts, handler)
    const legacy = handler as Required<
      Pick<Dispatcher.DispatchHandler, "onConnect" | "onHeaders" | "onData" | "onComplete" | "onError"> & { onResponseStarted?: () => void }
    >
    const url = new URL(opts.path, origin)
    const controller = new AbortController()
    let finished = false
    let lease: Lease | undefined
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined
    let idle: NodeJS.Timeout | undefined
    const end = (clean: boolean) => {
      finished = true
      clearTimeout(idle)
      if (lease !== undefined) this.release(lease, clean)
    }
    const complete = () => {
      end(true)
      legacy.onComplete([])
    }
    const fail = (error: Error) => {
      if (finished) return
      end(false)
      controller.abort(error)
      reader?.cancel(error).catch(() => undefined)
      legacy.onError(error)
    }
    legacy.onConnect((reason?: Error) => fail(reason ?? new undiciErrors.RequestAbortedError()))
    if (finished) return true
    if (this.closed) {
      fail(new undiciErrors.ClientClosedError())
      return true
    }
    const taken = this.idle.pop() ?? this.open()
    lease = taken
    const idleMs = opts.bodyTimeout ?? BODY_IDLE_TIMEOUT_MS
    const port = Number(url.port) || 443
    const host = url.hostname.replace(/^\[|\]$/g, "")
    taken.impit
      .fetch(url.href, {
        method: opts.method,
        headers: headerPairs(opts.headers),
        body: bodyOf(opts.body),
        signal: controller.signal,
        redirect: "manual"
      })
      .then(
        (res) => {
          if (finished) return void res.body?.cancel().catch(() => undefined)
          const raw: Array<Buffer> = []
          res.headers.forEach((v, k) => raw.push(Buffer.from(k), Buffer.from(v)))
          for (const c of res.headers.getSetCookie()) raw.push(Buffer.from("set-cookie"), Buffer.from(c))
          let paused = false
          const arm = () => {
            if (idleMs > 0 && !finished) idle = setTimeout(() => fail(new undiciErrors.BodyTimeoutError()), idleMs)
          }
          const pump = () => {
            if (finished || reader === undefined) return
            arm()
            reader.read().then(
              ({ done, value }) => {
                clearTimeout(idle)
                if (finished) return
                if (done) return complete()
                if (legacy.onData(Buffer.from(value.buffer, value.byteOffset, value.byteLength)) === false) paused = true
                else pump()
              },
              (e: unknown) => fail(e instanceof Error ? e : new Error(String(e)))
            )
          }
          const resume = () => {
            if (!paused) return
            paused = false
            pump()
          }
          legacy.onResponseStarted?.()
          legacy.onHeaders(res.status, raw, resume, res.statusText)
          if (finished) return void res.body?.cancel().catch(() => undefined)
          if (res.body === null) return complete()
          reader = res.body.getReader()
          pump()
        },
        (e: unknown) => fail(this.explain(e, taken.route, host, port))
      )
    return true
  }

  /** impit's failure as the egress would have reported it: the relay's own reason for a tunnel that failed, else TLS or network. */
  private explain(e: unknown, route: string, host: string, port: number): Error {
    if (e instanceof Error && e.name === "AbortError") return e
    const tunnel = this.relay.failure(route, host, port)
    if (tunnel) return tunnel
    const name = e instanceof Error ? e.constructor.name : ""
    const message = e instanceof Error ? e.message : String(e)
    if (/Timeout/.test(name)) return coded(`fingerprinted TLS: ${message}`, "UND_ERR_CONNECT_TIMEOUT")
    // The tunnel opened (no failure recorded): what failed is the TLS session impit ran in it.
    if (name === "ConnectError") return coded(`fingerprinted TLS handshake with ${host}:${port} failed (${message})`, "ERR_TLS_HANDSHAKE")
    return coded(`fingerprinted TLS: ${message}`, "ECONNRESET")
  }

  override close(): Promise<void> {
    this.closed = true
    for (const lease of this.idle.splice(0)) this.relay.remove(lease.route)
    return Promise.resolve()
  }

  override destroy(): Promise<void> {
    return this.close()
  }
}

/** Builds fingerprinted transports: impit and the relay are loaded and started with the first. */
export interface Fingerprinting {
  /** A transport for `profile` over the route `open`; rejects when the TLS stack cannot be loaded. */
  readonly transport: (profile: TlsProfile, open: TunnelOpener, plain: Dispatcher) => Promise<FingerprintDispatcher>
  readonly close: () => Promise<void>
}

export const makeFingerprinting = (load: () => Promise<ImpitClass> = loadImpit): Fingerprinting => {
  let started: Promise<{ readonly Impit: ImpitClass; readonly relay: Relay }> | undefined
  const start = () => {
    started ??= Promise.all([load(), Relay.start()]).then(([Impit, relay]) => ({ Impit, relay }))
    return started
  }
  return {
    transport: (profile, open, plain) =>
      start().then(({ Impit, relay }) => {
        const lease = (): Lease => {
          const route = relay.add(open)
          const impit = new Impit({
            browser: profile,
            proxyUrl: relay.proxyUrl(route),
            followRedirects: false,
            timeout: NO_TIMEOUT_MS,
            headers: BROWSER_HEADERS
          })
          return { impit, route }
        }
        return new FingerprintDispatcher(lease, relay, plain, profile)
      }),
    close: () => (started ? started.then(({ relay }) => relay.close()).catch(() => undefined) : Promise.resolve())
  }
}

/** The lazy import: the package (and its native part) loads with the first fingerprinted call. */
const loadImpit = (): Promise<ImpitClass> => {
  // The same trust as node's TLS: impit embeds the Mozilla roots, and reads extra CAs from
  // SSL_CERT_FILE, which an operator's NODE_EXTRA_CA_CERTS becomes unless it is set already.
  const extra = process.env["NODE_EXTRA_CA_CERTS"]
  if (extra && !process.env["SSL_CERT_FILE"] && !process.env["SSL_CERT_DIR"]) process.env["SSL_CERT_FILE"] = extra
  return import("impit").then(
    (m) => {
      const mod = m as unknown as { Impit?: ImpitClass; default?: { Impit?: ImpitClass } }
      const Impit = mod.Impit ?? mod.default?.Impit
      if (Impit === undefined) throw new Error("the impit package has no Impit class")
      return Impit
    },
    (e: unknown) => {
      throw new Error(
        `ENABLE_TLS_FINGERPRINT is on but its TLS stack (the impit package) could not be loaded: ${e instanceof Error ? e.message.trim() : String(e)}`
      )
    }
  )
}
