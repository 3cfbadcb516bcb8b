import * as net from "node:net"
// socks is loaded with the first SOCKS connection (docs/performance.md, "Memory at rest").
const loadSocks = () => import("socks").then((m) => m.SocksClient)
import { Agent, buildConnector, type Dispatcher, ProxyAgent } from "undici"
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
  return family === 0 ? { lookup: lookup as never } : { lookup: pinnedLookup(lookup, spec.family) as never, family, autoSelectFamily: false }
}

/** Opens a TCP connection to the proxy (the guard's lookup, the pinned family), for SOCKS5 and reachability tests. */
export const connectToProxy = (spec: ProxySpec, lookup: LookupFunction, timeoutMs = CONNECT_TIMEOUT_MS): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ host: bare(spec.host), port: spec.port, ...proxySocketOptions(spec, lookup) })
    const timer = setTimeout(() => {
      socket.destroy()
      reject(Object.assign(new Error(`proxy ${spec.host}:${spec.port} did not accept a connection within ${timeoutMs} ms`), { code: "UND_ERR_CONNECT_TIMEOUT" }))
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
 * A dispatcher that sends every request through `spec` (docs/egress.md):
 *
 * - `http`/`https` proxies: undici's ProxyAgent, which opens a `CONNECT host:port` tunnel for
 *   every origin (http and https alike), with `Proxy-Authorization: Basic` from the credentials;
 *   TLS to an https origin runs inside the tunnel.
 * - `socks5`: an Agent whose connector opens the proxy socket, runs the SOCKS5 handshake
 *   (RFC 1928/1929, via the `socks` client) naming the origin by host name (the proxy resolves
 *   it), then TLS for https origins.
 *
 * Rule 3 is enforced here: an IP-literal proxy host that contradicts the family throws
 * ProxyFamilyUnavailable when the dispatcher is built.
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
  const connect: buildConnector.connector = (opts, callback) => {
    const targetHost = bare(opts.hostname)
    const targetPort = Number(opts.port) || (opts.protocol === "https:" ? 443 : 80)
    connectToProxy(spec, lookup)
      .then((existing) =>
        loadSocks()
          .then((SocksClient) =>
            SocksClient.createConnection({
              proxy: { host: bare(spec.host), port: spec.port, type: 5, ...(spec.username ? { userId: spec.username, password: spec.password ?? "" } : {}) },
              command: "connect",
              destination: { host: targetHost, port: targetPort },
              existing_socket: existing,
              timeout: CONNECT_TIMEOUT_MS
            })
          )
          .catch((e: unknown) => {
            existing.destroy()
            throw e
          })
      )
      .then(({ socket }) => {
        if (opts.protocol !== "https:") return callback(null, socket)
        tlsUpgrade({ ...opts, httpSocket: socket } as never, callback)
      })
      .catch((e: unknown) => callback(e as Error, null))
  }
  return new Agent({ ...POOL, connect })
}
