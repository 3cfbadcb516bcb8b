import * as net from "node:net"
import * as tls from "node:tls"
// socks is loaded with the first SOCKS connection (docs/performance.md, "Memory at rest").
const loadSocks = () => import("socks").then((m) => m.SocksClient)
import type { buildConnector as Connector, Dispatcher } from "undici"
import { Agent, buildConnector, ProxyAgent } from "../client/undici.js"
import { BODY_IDLE_TIMEOUT_MS } from "../client/UpstreamHttp.js"
import { familyNumber, literalContradiction, type LookupFunction, pinnedLookup, ProxyFamilyUnavailable, type ProxySpec } from "./family.js"

/** The same connect timeout as the direct agent's. */
export const CONNECT_TIMEOUT_MS = 10_000

/** The pool settings of the direct agent (src/upstream/client/UpstreamHttp.ts): a proxied call waits and idles alike. */
const POOL = { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, bodyTimeout: BODY_IDLE_TIMEOUT_MS, headersTimeout: 0 } as const

const bare = (host: string) => host.replace(/^\[(.*)\]$/, "$1")

/**
 * The socket options that reach the proxy: the SSRF guard's lookup, and for a pinned family
 * that family only with automatic family selection off (rule 2). `auto` keeps node's ordinary
 * dual-stack behaviour (rule 1).
 */
export const proxySocketOptions = (spec: ProxySpec, lookup: LookupFunction) => {
  const family = familyNumber(spec.family)
  return family === 0
    ? { lookup: lookup as never }
    : { lookup: pinnedLookup(lookup, spec.family) as never, family, autoSelectFamily: false }
}

/** Opens a TCP connection to the proxy (the guard's lookup, the pinned family), for SOCKS5 and reachability tests. */
export const connectToProxy = (spec: ProxySpec, lookup: LookupFunction, timeoutMs = CONNECT_TIMEOUT_MS): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ host: bare(spec.host), port: spec.port, ...proxySocketOptions(spec, lookup) })
    const timer = setTimeout(() => {
      socket.destroy()
      reject(
        Object.assign(new Error(`proxy ${spec.host}:${spec.port} did not accept a connection within ${timeoutMs} ms`), {
          code: "UND_ERR_CONNECT_TIMEOUT"
        })
      )
    }, timeoutMs)
    socket.once("connect", () => {
      clearTimeout(timer)
      socket.off("error", onError)
      resolve(socket)
    })
    const onError = (e: Error) => {
      clearTimeout(timer)
      reject(e)
    }
    socket.once("error", onError)
  })

/**
 * A dispatcher that sends every request through `spec`: a CONNECT tunnel (ProxyAgent) or a SOCKS5 connector
 * (docs/egress.md#how-a-call-goes-through). Family rule 3: a contradicting IP-literal proxy host throws ProxyFamilyUnavailable here.
 */
export const buildDispatcher = (spec: ProxySpec, lookup: LookupFunction): Dispatcher => {
  const contradiction = literalContradiction(spec.host, spec.family)
  if (contradiction) throw new ProxyFamilyUnavailable(contradiction)
  const socketOptions = proxySocketOptions(spec, lookup)
  if (spec.type !== "socks5") {
    const host = net.isIPv6(bare(spec.host)) ? `[${bare(spec.host)}]` : spec.host
    return new ProxyAgent({
      ...POOL,
      uri: `${spec.type}://${host}:${spec.port}`,
      ...(spec.username ? { token: `Basic ${Buffer.from(`${spec.username}:${spec.password ?? ""}`).toString("base64")}` } : {}),
      proxyTls: { timeout: CONNECT_TIMEOUT_MS, ...socketOptions },
      requestTls: { timeout: CONNECT_TIMEOUT_MS }
    })
  }
  const tlsUpgrade = buildConnector({ timeout: CONNECT_TIMEOUT_MS })
  const connect: Connector.connector = (opts, callback) => {
    socksTunnel(spec, lookup, bare(opts.hostname), Number(opts.port) || (opts.protocol === "https:" ? 443 : 80))
      .then((socket) => {
        if (opts.protocol !== "https:") return callback(null, socket)
        tlsUpgrade({ ...opts, httpSocket: socket } as never, callback)
      })
      .catch((e: unknown) => callback(e as Error, null))
  }
  return new Agent({ ...POOL, connect })
}

/**
 * A direct dispatcher over the guard's lookup with the direct agent's pool settings: plain-HTTP
 * origins of the fingerprinted transport's direct route (src/upstream/egress/fingerprint.ts).
 */
export const directDispatcher = (lookup: LookupFunction): Dispatcher =>
  new Agent({ ...POOL, connect: buildConnector({ timeout: CONNECT_TIMEOUT_MS, lookup: lookup as never }) })

/**
 * A TCP connection to an upstream itself (the fingerprinted transport's direct route): a name is
 * resolved and judged by the guard's lookup; an address was judged before the call was sent.
 */
export const dialDirect = (host: string, port: number, lookup: LookupFunction): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ host, port, lookup: lookup as never })
    const timer = setTimeout(() => {
      socket.destroy()
      reject(
        Object.assign(new Error(`${host}:${port} did not accept a connection within ${CONNECT_TIMEOUT_MS} ms`), {
          code: "UND_ERR_CONNECT_TIMEOUT"
        })
      )
    }, CONNECT_TIMEOUT_MS)
    const onError = (e: Error) => {
      clearTimeout(timer)
      reject(e)
    }
    socket.once("error", onError)
    socket.once("connect", () => {
      clearTimeout(timer)
      socket.off("error", onError)
      resolve(socket)
    })
  })

/** A TCP stream to `host:port` through a SOCKS5 proxy (the proxy resolves the name). */
const socksTunnel = (spec: ProxySpec, lookup: LookupFunction, host: string, port: number): Promise<net.Socket> =>
  connectToProxy(spec, lookup).then((existing) =>
    loadSocks()
      .then((SocksClient) =>
        SocksClient.createConnection({
          proxy: {
            host: bare(spec.host),
            port: spec.port,
            type: 5,
            ...(spec.username ? { userId: spec.username, password: spec.password ?? "" } : {})
          },
          command: "connect",
          destination: { host, port },
          existing_socket: existing,
          timeout: CONNECT_TIMEOUT_MS
        })
      )
      .then(({ socket }) => socket)
      .catch((e: unknown) => {
        existing.destroy()
        throw e
      })
  )

/** Largest CONNECT answer head read from an HTTP proxy. */
const MAX_CONNECT_HEAD = 16 * 1024

/**
 * A TCP stream to `host:port` through an HTTP or HTTPS proxy's `CONNECT` (for HTTPS the proxy is
 * reached over TLS and verified against node's trust store, as ProxyAgent does), with
 * `Proxy-Authorization: Basic` when the entry has credentials.
 */
const connectTunnel = (spec: ProxySpec, lookup: LookupFunction, host: string, port: number): Promise<net.Socket | tls.TLSSocket> =>
  connectToProxy(spec, lookup).then(
    (raw) =>
      new Promise((resolve, reject) => {
        const fail = (e: Error) => {
          clearTimeout(timer)
          socket.destroy()
          reject(e)
        }
        const timer = setTimeout(
          () =>
            fail(
              Object.assign(new Error(`proxy ${spec.host}:${spec.port} did not open a tunnel within ${CONNECT_TIMEOUT_MS} ms`), {
                code: "UND_ERR_CONNECT_TIMEOUT"
              })
            ),
          CONNECT_TIMEOUT_MS
        )
        const name = bare(spec.host)
        const socket: net.Socket =
          spec.type === "https" ? tls.connect({ socket: raw, ...(net.isIP(name) ? {} : { servername: name }) }) : raw
        const target = net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`
        const auth = spec.username
          ? `Proxy-Authorization: Basic ${Buffer.from(`${spec.username}:${spec.password ?? ""}`).toString("base64")}\r\n`
          : ""
        socket.once("error", fail)
        socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`)
        let head = Buffer.alloc(0)
        const onData = (chunk: Buffer) => {
          head = Buffer.concat([head, chunk])
          const end = head.indexOf("\r\n\r\n")
          if (end < 0) {
            if (head.length > MAX_CONNECT_HEAD) fail(new Error(`proxy ${spec.host}:${spec.port} sent an oversized CONNECT answer`))
            return
          }
          socket.off("data", onData)
          const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString("latin1"))?.[1])
          if (status !== 200) {
            const e = Object.assign(
              new Error(
                `proxy ${spec.host}:${spec.port} refused the tunnel to ${target} (${Number.isNaN(status) ? "no HTTP answer" : status})`
              ),
              {
                code: "ECONNREFUSED"
              }
            )
            return fail(e)
          }
          clearTimeout(timer)
          socket.off("error", fail)
          socket.pause()
          const rest = head.subarray(end + 4)
          if (rest.length > 0) socket.unshift(rest)
          resolve(socket)
        }
        socket.on("data", onData)
      })
  )

/**
 * A raw TCP stream to `host:port` through `spec`, for a client that runs its own TLS over it (the
 * fingerprinted transport, src/upstream/egress/fingerprint.ts). The family rules and the guard's
 * lookup apply to the proxy exactly as for the dispatcher above.
 */
export const tunnelThrough = (spec: ProxySpec, lookup: LookupFunction, host: string, port: number): Promise<net.Socket> => {
  const contradiction = literalContradiction(spec.host, spec.family)
  if (contradiction) return Promise.reject(new ProxyFamilyUnavailable(contradiction))
  return spec.type === "socks5" ? socksTunnel(spec, lookup, host, port) : connectTunnel(spec, lookup, host, port)
}
