import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import * as tls from "node:tls"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { loadTproxyNative, markedSocket, TPROXY_ADDON_PATH, type TproxyNative } from "../src/services/inspector/tproxy/native.js"

/**
 * The transparent-capture mode's native addon (native/src/tproxy.c, built by native/build.mjs at
 * `npm install` or `npm run build:native`): a listening socket with IP_TRANSPARENT, and outgoing
 * connections whose packets carry an SO_MARK set before connect. Both need CAP_NET_ADMIN: as root
 * (this machine, CI) every behaviour is checked for real (the marks counted by iptables in a
 * network namespace: test/netns/tproxy-native.netns.ts); as another user each test asserts the EPERM the
 * addon gives instead. The addon must be built: without it every test fails saying how to build it.
 */
const ROOT = typeof process.getuid === "function" && process.getuid() === 0
const TLS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "fixtures/tls")

/** The addon, or a failure saying how to build it (never a skip). */
const addon = (): TproxyNative => {
  const load = loadTproxyNative()
  if (!load.available)
    throw new Error(
      `the transparent-capture addon is unavailable (${load.reason}); build it with \`npm run build:native\` (node native/build.mjs), then run this file again`
    )
  return load.native
}

/** `fn`'s error (thrown or rejected), failing when there is none. */
const failure = async (fn: () => unknown): Promise<NodeJS.ErrnoException> => {
  try {
    await fn()
  } catch (e) {
    return e as NodeJS.ErrnoException
  }
  throw new Error("expected an error, got none")
}

/** The file status flags of one of this process's fds (/proc/self/fdinfo, octal). */
const fdFlags = (fd: number): number => {
  const m = /^flags:\s*([0-7]+)/m.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))
  if (!m) throw new Error(`no flags in /proc/self/fdinfo/${fd}`)
  return Number.parseInt(m[1]!, 8)
}
const O_NONBLOCK = 0o4000
const O_CLOEXEC = 0o2000000

/** `server` listening: on a host and port, or on a listening fd it takes over (`{ fd }`, Node's listen(handle)). */
const listening = (server: net.Server, options: net.ListenOptions | { fd: number }) =>
  new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options, () => resolve())
  })
const closed = (server: net.Server) => new Promise<void>((resolve) => server.close(() => resolve()))

/** A server answering each connection's first chunk with `pong:<chunk>`, then closing it. */
const echoServer = async (host: string) => {
  const server = net.createServer((s) => s.once("data", (d) => s.end(`pong:${d}`)))
  await listening(server, { host, port: 0 })
  return { server, port: (server.address() as net.AddressInfo).port }
}

/** Writes `text` on `socket` and reads until the peer ends. */
const exchange = (socket: net.Socket | tls.TLSSocket, text: string) =>
  new Promise<string>((resolve, reject) => {
    let got = ""
    socket.setEncoding("utf8")
    socket.on("data", (d: string) => (got += d))
    socket.once("end", () => resolve(got))
    socket.once("error", reject)
    socket.write(text)
  })

const expectEperm = (e: NodeJS.ErrnoException, call: string) => {
  expect(e).toBeInstanceOf(Error)
  expect(e.code).toBe("EPERM")
  expect(e.syscall).toBe("setsockopt")
  expect(e.message).toContain(call)
  expect(e.message).toContain("Operation not permitted")
}

describe("loadTproxyNative", () => {
  it("reports the addon available once built, and caches the answer", () => {
    expect(fs.existsSync(TPROXY_ADDON_PATH), `${TPROXY_ADDON_PATH} is missing: run npm run build:native`).toBe(true)
    const load = loadTproxyNative()
    expect(load, JSON.stringify(load)).toMatchObject({ available: true })
    const native = addon()
    expect(Object.keys(native).sort()).toEqual(["connectMarked", "listenTransparent", "setBatchPolicy", "trimMemory"])
    expect(loadTproxyNative()).toBe(load)
  })
})

describe("listenTransparent", () => {
  it.each([
    ["127.0.0.1", "IPv4", "IP_TRANSPARENT"],
    ["::1", "IPv6", "IPV6_TRANSPARENT"]
  ] as const)(
    "on %s: a non-blocking close-on-exec listening fd that net.Server takes and accepts a real connection on",
    async (host, family, option) => {
      const native = addon()
      if (!ROOT) return expectEperm(await failure(() => native.listenTransparent(host, 0, 16)), `setsockopt(${option})`)
      const fd = native.listenTransparent(host, 0, 16)
      expect(fd).toBeGreaterThan(2)
      expect(fdFlags(fd) & O_NONBLOCK).toBe(O_NONBLOCK)
      expect(fdFlags(fd) & O_CLOEXEC).toBe(O_CLOEXEC)
      const accepted: Array<{ localAddress?: string; localPort?: number }> = []
      const server = net.createServer((s) => {
        accepted.push({ localAddress: s.localAddress, localPort: s.localPort })
        s.once("data", (d) => s.end(`pong:${d}`))
      })
      try {
        await listening(server, { fd })
        const address = server.address() as net.AddressInfo
        expect(address).toMatchObject({ address: host, family })
        expect(address.port).toBeGreaterThan(0)
        const client = net.connect({ host, port: address.port })
        expect(await exchange(client, "hello")).toBe("pong:hello")
        // The accepted socket's local address is where the client was going: for TPROXY, the original destination.
        expect(accepted).toEqual([{ localAddress: host, localPort: address.port }])
      } finally {
        await closed(server)
      }
    }
  )

  it("a busy port gives EADDRINUSE (with code and syscall), a bad argument a TypeError or RangeError", async () => {
    const native = addon()
    const { server, port } = await echoServer("127.0.0.1")
    try {
      const e = await failure(() => native.listenTransparent("127.0.0.1", port))
      if (!ROOT) expectEperm(e, "setsockopt(IP_TRANSPARENT)")
      else {
        expect(e.code).toBe("EADDRINUSE")
        expect(e.syscall).toBe("bind")
        expect(e.message).toBe(`listenTransparent 127.0.0.1:${port}: bind(): Address already in use`)
      }
    } finally {
      await closed(server)
    }
    expect(() => native.listenTransparent("localhost", 0)).toThrow(TypeError)
    expect(() => native.listenTransparent("127.0.0.1", 65536)).toThrow(RangeError)
    expect(() => (native.listenTransparent as (...a: Array<unknown>) => number)(1, 0)).toThrow(TypeError)
  })
})

describe("connectMarked", () => {
  it("connects on the threadpool to a local server; the fd is non-blocking, close-on-exec, and carries bytes both ways as a net.Socket", async () => {
    const native = addon()
    const { server, port } = await echoServer("127.0.0.1")
    try {
      if (!ROOT) return expectEperm(await failure(() => native.connectMarked("127.0.0.1", port, 0x4750, 2000)), "setsockopt(SO_MARK)")
      const fd = await native.connectMarked("127.0.0.1", port, 0x4750, 2000)
      expect(fdFlags(fd) & O_NONBLOCK).toBe(O_NONBLOCK)
      expect(fdFlags(fd) & O_CLOEXEC).toBe(O_CLOEXEC)
      const socket = new net.Socket({ fd, readable: true, writable: true })
      expect(socket.remoteAddress).toBe("127.0.0.1")
      expect(socket.remotePort).toBe(port)
      expect(await exchange(socket, "ping")).toBe("pong:ping")
      socket.destroy()
      // The same through the helper.
      const viaHelper = await markedSocket(native, "127.0.0.1", port, 0x4750, 2000)
      expect(await exchange(viaHelper, "again")).toBe("pong:again")
      viaHelper.destroy()
    } finally {
      await closed(server)
    }
  })

  it("the socket it gives carries TLS: tls.connect({ socket }) over it (IPv6)", async () => {
    const native = addon()
    const server = tls.createServer(
      { cert: fs.readFileSync(path.join(TLS_DIR, "loopback.crt")), key: fs.readFileSync(path.join(TLS_DIR, "loopback.key")) },
      (s) => s.once("data", (d) => s.end(`tls:${d}`))
    )
    await listening(server, { host: "::1", port: 0 })
    const { port } = server.address() as net.AddressInfo
    try {
      if (!ROOT) return expectEperm(await failure(() => markedSocket(native, "::1", port, 1, 2000)), "setsockopt(SO_MARK)")
      const socket = tls.connect({
        socket: await markedSocket(native, "::1", port, 1, 2000),
        servername: "localhost",
        ca: fs.readFileSync(path.join(TLS_DIR, "loopback.crt"))
      })
      await new Promise<void>((resolve, reject) => socket.once("secureConnect", () => resolve()).once("error", reject))
      expect(socket.authorized).toBe(true)
      expect(await exchange(socket, "secret")).toBe("tls:secret")
      socket.destroy()
    } finally {
      await closed(server)
    }
  })

  it("rejects a bad argument at once", () => {
    const native = addon()
    expect(() => native.connectMarked("example.com", 443, 1, 1000)).toThrow(TypeError)
    expect(() => native.connectMarked("127.0.0.1", 0, 1, 1000)).toThrow(RangeError)
    expect(() => native.connectMarked("127.0.0.1", 443, -1, 1000)).toThrow(RangeError)
    expect(() => native.connectMarked("127.0.0.1", 443, 1, 0)).toThrow(RangeError)
  })
})
