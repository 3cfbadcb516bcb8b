/**
 * The TPROXY mode's transparent listener: a diverted connection's original destination is the accepted socket's local address.
 * Decrypting and relaying are capture/intercept.ts's; origins are dialled with the bypass mark (docs/capture.md#what-clients-see).
 */
import * as net from "node:net"
import type * as stream from "node:stream"
import type { InspectorSink } from "../types.js"
import type { LocalCa } from "../capture/ca.js"
import { closeAll, createUpstreams, type Dial, type Live } from "../capture/forward.js"
import { makeInterceptor, onFirstBytes, TLS_HANDSHAKE } from "../capture/intercept.js"
import { markedSocket, type TproxyNative } from "./native.js"

export interface TransparentListenerOptions {
  readonly native: TproxyNative
  /** The listener's port (`onPort`). */
  readonly port: number
  /** The mark of the origin connections (`bypassMark`). */
  readonly bypassMark: number
  readonly sink: InspectorSink
  readonly ca: () => Promise<LocalCa>
  /** Extra CA certificates (PEM) trusted for origins (INSPECTOR_UPSTREAM_CA_FILE). */
  readonly upstreamCa?: ReadonlyArray<string> | undefined
  /** False only with MITM_DISABLE_TLS_VERIFY. */
  readonly verifyUpstream: Live<boolean>
  readonly idleTimeoutMs: number
  /** Called once per diverted connection. */
  readonly onIntercept?: () => void
}

export interface RunningTransparentListener {
  readonly port: number
  /** The addresses it listens on: 127.0.0.1 and ::1 (TPROXY hands diverted packets to the listener on the loopback device's address). */
  readonly hosts: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

/** A listen failure with the system's code (`EADDRINUSE`: the caller answers 409). */
export class TransparentListenError extends Error {
  override readonly name = "TransparentListenError"
  constructor(
    message: string,
    readonly code: string
  ) {
    super(message)
  }
}

const listenFd = (server: net.Server, fd: number): Promise<void> =>
  new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen({ fd }, () => {
      server.off("error", reject)
      server.on("error", () => undefined)
      resolve()
    })
  })

/**
 * Opens the listener on 127.0.0.1 and ::1 (`onPort`, IP_TRANSPARENT). A diverted packet reaches
 * it through the loopback device, so TPROXY (no `--on-ip`) looks the listener up on that device's
 * address: a listener bound to loopback is enough, and nothing else on the network can reach it.
 */
export const startTransparentListener = async (opts: TransparentListenerOptions): Promise<RunningTransparentListener> => {
  const { sink, idleTimeoutMs, native, bypassMark } = opts
  const marked: Dial = (address, port, timeoutMs) =>
    markedSocket(native, address, port, bypassMark, Math.max(1, Math.min(timeoutMs, 30_000)))
  const upstreams = createUpstreams({ upstreamCa: opts.upstreamCa, idleTimeoutMs, dial: () => marked })
  const sockets = new Set<stream.Duplex>()
  const track = (socket: stream.Duplex) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
  }
  let closing = false
  const interceptor = makeInterceptor({
    sink,
    source: () => "tproxy",
    ca: opts.ca,
    upstreams,
    verifyUpstream: opts.verifyUpstream,
    idleTimeoutMs,
    track,
    closing: () => closing
  })

  const onConnection = (client: net.Socket) => {
    track(client)
    client.setNoDelay(true)
    client.on("error", () => client.destroy())
    opts.onIntercept?.()
    if (client.remotePort !== undefined) sink.accepted?.(client.remotePort)
    // Under TPROXY the accepted socket's local address is where the client was going.
    const address = (client.localAddress ?? "").replace(/^::ffff:/, "")
    const port = client.localPort ?? 0
    const target = { host: address.toLowerCase(), port, address, hostFromSni: true }
    onFirstBytes(client, idleTimeoutMs, (first) => {
      const meta = { clientPort: client.remotePort, headers: {}, method: first[0] === TLS_HANDSHAKE ? "TLS" : "TCP" }
      if (first[0] === TLS_HANDSHAKE) interceptor.decrypt(client, first, target, meta)
      else interceptor.tunnel(client, first, target, meta, { answered: true })
    })
  }

  const servers: Array<net.Server> = []
  const hosts = ["127.0.0.1", "::1"]
  let boundPort = opts.port
  try {
    for (const host of hosts) {
      let fd: number
      try {
        fd = native.listenTransparent(host, boundPort)
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? "EUNKNOWN"
        const why =
          code === "EADDRINUSE"
            ? `port ${boundPort} on ${host} is already in use: stop what listens there or pick another onPort`
            : code === "EPERM"
              ? `${(e as Error).message} (the transparent listener needs root or CAP_NET_ADMIN)`
              : (e as Error).message
        throw new TransparentListenError(why, code)
      }
      const server = net.createServer({ pauseOnConnect: false }, onConnection)
      servers.push(server)
      await listenFd(server, fd)
      // Port 0 (tests): the second family listens on the port the first was given.
      boundPort = (server.address() as net.AddressInfo).port
    }
  } catch (error) {
    closing = true
    await Promise.all(servers.map((s) => closeAll(s, sockets, upstreams)))
    throw error
  }
  return {
    port: boundPort,
    hosts,
    close: async () => {
      closing = true
      await Promise.all(servers.map((s) => closeAll(s, sockets, upstreams)))
    }
  }
}
