import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import * as net from "node:net"
import * as tls from "node:tls"
import type { ProxyTestResult } from "../../domain/settings.js"
import type { ProxyFamily } from "../../domain/proxies.js"
import { familyNumber, literalContradiction, type LookupFunction, pinnedLookup, ProxyFamilyUnavailable } from "./family.js"
import { maskProxyUrl } from "../../platform/settings/Settings.js"

/**
 * `POST /api/settings/proxy/test`: one GET of `target` through `proxy`, reporting what happened.
 * HTTP and HTTPS proxies are asked for a tunnel (`CONNECT host:port`, with `Proxy-Authorization:
 * Basic` when the URL has credentials); SOCKS5 proxies get the RFC 1928 handshake (no auth, or
 * RFC 1929 user/password). Then the target is fetched over the tunnel (TLS for https targets).
 */

const once = <T>(emitter: NodeJS.EventEmitter, ok: string): Promise<T> =>
  new Promise((resolve, reject) => {
    const onOk = (v: T) => {
      emitter.off("error", onError)
      resolve(v)
    }
    const onError = (e: Error) => {
      emitter.off(ok, onOk)
      reject(e)
    }
    emitter.once(ok, onOk)
    emitter.once("error", onError)
  })

/** Reads from `socket` until `enough(buffer)` says how many bytes make the answer. */
const readUntil = (socket: net.Socket, enough: (b: Buffer) => number | undefined): Promise<{ head: Buffer; rest: Buffer }> =>
  new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0)
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk])
      const n = enough(buf)
      if (n === undefined) {
        if (buf.length > 65536) done(new Error("proxy answer too long"))
        return
      }
      done(undefined, n)
    }
    const onEnd = () => done(new Error("proxy closed the connection"))
    const onError = (e: Error) => done(e)
    const done = (e: Error | undefined, n = 0) => {
      socket.off("data", onData)
      socket.off("end", onEnd)
      socket.off("error", onError)
      socket.pause()
      if (e) reject(e)
      else resolve({ head: buf.subarray(0, n), rest: buf.subarray(n) })
    }
    socket.on("data", onData)
    socket.once("end", onEnd)
    socket.once("error", onError)
    socket.resume()
  })

/** How the test reaches the proxy: the egress layer's guarded lookup and the pinned family (docs/egress.md). */
export interface ProxyReach {
  readonly lookup?: LookupFunction
  readonly family: ProxyFamily
}
const connectTo = async (host: string, port: number, secure: boolean, reach: ProxyReach): Promise<net.Socket> => {
  const bare = host.replace(/^\[|\]$/g, "")
  const contradiction = literalContradiction(bare, reach.family)
  if (contradiction) throw new ProxyFamilyUnavailable(contradiction)
  const family = familyNumber(reach.family)
  const pinned = {
    ...(reach.lookup ? { lookup: (family === 0 ? reach.lookup : pinnedLookup(reach.lookup, reach.family)) as never } : {}),
    ...(family === 0 ? {} : { family, autoSelectFamily: false })
  }
  if (secure) {
    const s = tls.connect({ host: bare, port, servername: net.isIP(bare) ? undefined : bare, ...pinned })
    await once(s, "secureConnect")
    return s
  }
  const s = net.connect({ host: bare, port, ...pinned })
  await once(s, "connect")
  return s
}

const httpTunnel = async (proxy: URL, host: string, port: number, reach: ProxyReach): Promise<net.Socket> => {
  const socket = await connectTo(
    proxy.hostname,
    Number(proxy.port || (proxy.protocol === "https:" ? 443 : 80)),
    proxy.protocol === "https:",
    reach
  )
  const auth = proxy.username
    ? `Proxy-Authorization: Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString("base64")}\r\n`
    : ""
  const authority = net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`)
  const { head, rest } = await readUntil(socket, (b) => {
    const i = b.indexOf("\r\n\r\n")
    return i === -1 ? undefined : i + 4
  })
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.toString("latin1"))
  if (!status) throw new Error("the proxy did not answer HTTP")
  if (status[1] !== "200") {
    socket.destroy()
    throw new Error(`the proxy refused the tunnel: ${status[1]}${status[1] === "407" ? " (proxy authentication required)" : ""}`)
  }
  if (rest.length > 0) socket.unshift(rest)
  return socket
}

const socksTunnel = async (proxy: URL, host: string, port: number, reach: ProxyReach): Promise<net.Socket> => {
  const socket = await connectTo(proxy.hostname, Number(proxy.port || 1080), false, reach)
  const user = decodeURIComponent(proxy.username)
  const pass = decodeURIComponent(proxy.password)
  socket.write(Buffer.from(user ? [5, 2, 0, 2] : [5, 1, 0]))
  const greet = await readUntil(socket, (b) => (b.length >= 2 ? 2 : undefined))
  if (greet.head[0] !== 5) throw new Error("not a SOCKS5 proxy")
  if (greet.head[1] === 2) {
    const u = Buffer.from(user)
    const p = Buffer.from(pass)
    socket.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]))
    const authed = await readUntil(socket, (b) => (b.length >= 2 ? 2 : undefined))
    if (authed.head[1] !== 0) throw new Error("the SOCKS5 proxy refused the credentials")
  } else if (greet.head[1] !== 0) throw new Error("the SOCKS5 proxy accepts none of our authentication methods")
  const bare = host.replace(/^\[|\]$/g, "")
  const family = net.isIP(bare)
  const address =
    family === 4
      ? Buffer.from([1, ...bare.split(".").map(Number)])
      : family === 6
        ? Buffer.concat([Buffer.from([4]), Buffer.from(expand6(new URL(`http://[${bare}]/`).hostname.slice(1, -1)))])
        : Buffer.concat([Buffer.from([3, Buffer.byteLength(bare)]), Buffer.from(bare)])
  socket.write(Buffer.concat([Buffer.from([5, 1, 0]), address, Buffer.from([port >> 8, port & 255])]))
  const reply = await readUntil(socket, (b) => {
    if (b.length < 5) return undefined
    const len = b[3] === 1 ? 4 : b[3] === 4 ? 16 : 1 + b[4]!
    return b.length >= 4 + len + 2 ? 4 + len + 2 : undefined
  })
  if (reply.head[1] !== 0) throw new Error(`the SOCKS5 proxy could not connect (reply ${reply.head[1]})`)
  if (reply.rest.length > 0) socket.unshift(reply.rest)
  return socket
}

const expand6 = (ip: string): Array<number> => {
  const [a, b = ""] = ip.split("::")
  const head = a ? a.split(":") : []
  const tail = b ? b.split(":") : []
  const groups = [...head, ...Array<string>(8 - head.length - tail.length).fill("0"), ...tail]
  return groups.flatMap((g) => {
    const n = parseInt(g, 16)
    return [n >> 8, n & 255]
  })
}

const fetchOver = async (socket: net.Socket, target: URL): Promise<number> => {
  // The tunnel's socket was paused after the handshake: resumed once its new reader is attached.
  const conn =
    target.protocol === "https:"
      ? tls.connect({ socket, servername: net.isIP(target.hostname.replace(/^\[|\]$/g, "")) ? undefined : target.hostname })
      : socket
  if (conn !== socket) {
    socket.resume()
    await once(conn, "secureConnect")
  }
  return new Promise((resolve, reject) => {
    const req = http.request({
      method: "GET",
      host: target.hostname,
      path: `${target.pathname}${target.search}`,
      headers: { host: target.host, "user-agent": "gateway-proxy-test" },
      createConnection: () => conn
    })
    req.once("response", (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.once("socket", (s) => s.resume())
    req.once("error", reject)
    req.end()
  })
}

export const testProxy = (
  proxyUrl: string,
  targetUrl: string,
  timeoutMs: number,
  via: ProxyReach = { family: "auto" }
): Effect.Effect<ProxyTestResult> =>
  Effect.gen(function* () {
    const started = Date.now()
    const proxy = new URL(proxyUrl)
    const target = new URL(targetUrl)
    const port = Number(target.port || (target.protocol === "https:" ? 443 : 80))
    const host = target.hostname
    let socket: net.Socket | undefined
    let family: "ipv4" | "ipv6" | null = null
    const attempt = Effect.tryPromise({
      try: async () => {
        socket = proxy.protocol.startsWith("socks") ? await socksTunnel(proxy, host, port, via) : await httpTunnel(proxy, host, port, via)
        family = socket.remoteFamily === "IPv6" ? "ipv6" : socket.remoteFamily === "IPv4" ? "ipv4" : null
        return await fetchOver(socket, target)
      },
      catch: (e) => (e instanceof Error ? e.message : String(e))
    })
    const outcome = yield* attempt.pipe(
      Effect.timeoutFail({ duration: Duration.millis(timeoutMs), onTimeout: () => `no answer within ${timeoutMs} ms` }),
      Effect.either,
      Effect.ensuring(Effect.sync(() => socket?.destroy()))
    )
    const latencyMs = Date.now() - started
    const masked = maskProxyUrl(proxyUrl)
    // An error message may quote the URL: never with its password.
    const scrub = (m: string) => (proxy.password ? m.split(proxy.password).join("****") : m)
    return outcome._tag === "Right"
      ? { ok: outcome.right >= 200 && outcome.right < 400, status: outcome.right, latencyMs, error: null, proxy: masked, family }
      : { ok: false, status: null, latencyMs, error: scrub(outcome.left), proxy: masked, family }
  })
