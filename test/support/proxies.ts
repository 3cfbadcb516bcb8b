import * as http from "node:http"
import * as https from "node:https"
import type { AddressInfo, Socket } from "node:net"
import { createProxy } from "proxy"
import { createServer as createSocksServer } from "simple-socks"

/** What a test proxy saw: one entry per tunnel or forwarded request. */
export interface Passed {
  /** `CONNECT host:port`, an absolute URI, or `socks5 host:port`. */
  readonly target: string
  /** The family of the gateway's connection to the proxy. */
  readonly family: "IPv4" | "IPv6"
  /** The credentials the gateway presented (`user:password`), or null. */
  readonly credentials: string | null
}

export interface TestProxy {
  readonly host: string
  readonly port: number
  readonly passed: Array<Passed>
  /** Attempts refused for bad or missing credentials. */
  refused: number
  /** TLS handshakes that failed (an HTTPS proxy whose certificate the client refused). */
  tlsErrors: number
  close(): Promise<void>
}

const familyOf = (s: Socket): "IPv4" | "IPv6" => (s.remoteFamily === "IPv6" ? "IPv6" : "IPv4")

/**
 * A real HTTP proxy (the `proxy` package: CONNECT tunnels and absolute-URI forwarding) on
 * `host`, recording what passed; with `auth`, `Proxy-Authorization: Basic` must match. With
 * `tls` (a key and certificate) it is an HTTPS proxy: clients speak TLS to it, then CONNECT.
 */
export const httpProxy = async (
  host: string,
  auth?: { user: string; password: string },
  port = 0,
  tls?: { key: string | Buffer; cert: string | Buffer }
): Promise<TestProxy> => {
  const server = createProxy(tls ? https.createServer(tls) : http.createServer())
  const sockets = new Set<Socket>()
  server.on("connection", (s: Socket) => {
    sockets.add(s)
    s.once("close", () => sockets.delete(s))
  })
  const self: TestProxy = { host, port: 0, passed: [], refused: 0, tlsErrors: 0, close: async () => undefined }
  // A client that does not trust the certificate aborts the handshake: counted, never a tunnel.
  server.on("tlsClientError", () => self.tlsErrors++)
  const credentialsOf = (req: http.IncomingMessage) => {
    const h = req.headers["proxy-authorization"]
    return h?.startsWith("Basic ") ? Buffer.from(h.slice(6), "base64").toString("utf8") : null
  }
  server.authenticate = (req) => {
    const credentials = credentialsOf(req)
    const ok = !auth || credentials === `${auth.user}:${auth.password}`
    if (!ok) self.refused++
    else
      self.passed.push({
        target: req.method === "CONNECT" ? `CONNECT ${req.url}` : (req.url ?? ""),
        family: familyOf(req.socket),
        credentials
      })
    return ok
  }
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, host, resolve))
  ;(self as { port: number }).port = (server.address() as AddressInfo).port
  self.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    })
  return self
}

/** A real SOCKS5 server (`simple-socks`) on `host`, recording each CONNECT; with `auth`, RFC 1929 user/password. */
export const socksProxy = async (host: string, auth?: { user: string; password: string }, port = 0): Promise<TestProxy> => {
  const self: TestProxy = { host, port: 0, passed: [], refused: 0, tlsErrors: 0, close: async () => undefined }
  const users = new Map<Socket, string>()
  const server = createSocksServer({
    ...(auth
      ? {
          authenticate: (user: string, password: string, socket: Socket, cb: (e?: Error) => void) => {
            if (user === auth.user && password === auth.password) {
              users.set(socket, `${user}:${password}`)
              return cb()
            }
            self.refused++
            cb(new Error("bad credentials"))
          }
        }
      : {}),
    connectionFilter: (destination, origin, cb) => {
      const socket = [...sockets].find((s) => s.remotePort === origin.port)
      self.passed.push({
        target: `socks5 ${destination.address}:${destination.port}`,
        family: origin.address.includes(":") ? "IPv6" : "IPv4",
        credentials: socket ? (users.get(socket) ?? null) : null
      })
      cb()
    }
  })
  const sockets = new Set<Socket>()
  server.on("connection", (s: Socket) => {
    sockets.add(s)
    s.once("close", () => sockets.delete(s))
  })
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, host, resolve))
  ;(self as { port: number }).port = (server.address() as AddressInfo).port
  self.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    })
  return self
}

/**
 * One proxy port on both loopbacks: a listener on 127.0.0.1 and one on ::1 with the same port,
 * so a name that resolves to both reaches whichever family the gateway picks, and each side
 * records what it saw. Retries with another port if ::1 has that port taken.
 */
export const dualStack = async (
  make: (host: string, port?: number) => Promise<TestProxy>
): Promise<{ v4: TestProxy; v6: TestProxy; port: number; close(): Promise<void> }> => {
  for (let attempt = 0; ; attempt++) {
    const v4 = await make("127.0.0.1")
    try {
      const v6 = await make("::1", v4.port)
      return { v4, v6, port: v4.port, close: () => Promise.all([v4.close(), v6.close()]).then(() => undefined) }
    } catch (e) {
      await v4.close()
      if (attempt >= 5) throw e
    }
  }
}
