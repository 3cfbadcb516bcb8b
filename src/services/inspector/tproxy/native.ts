/**
 * The native part of the transparent-capture (TPROXY) mode: a small Node-API addon in C
 * (native/src/tproxy.c, built at `npm install` or by `npm run build:native` into
 * native/build/Release/gateway_tproxy.node) giving the two socket operations Node's `net` lacks:
 * a listening socket with IP_TRANSPARENT, and an outgoing connection carrying an SO_MARK set
 * before it connects. The original destination of a connection TPROXY hands to the transparent
 * listener is the accepted socket's local address (`socket.localAddress`/`localPort`): no native
 * call is needed for it.
 *
 * The addon is optional: it is Linux-only and needs python3, make and a C compiler to build, and
 * `npm install` goes on without it. `loadTproxyNative()` says whether it is there and, when not,
 * exactly what is missing.
 */
import { closeSync, existsSync } from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as path from "node:path"
import { PACKAGE_ROOT } from "../../../kernel/packageRoot.js"

/** The addon's exports (native/src/tproxy.c). Both raise Errors with `code` (the errno name, e.g. "EPERM") and `syscall`. */
export interface TproxyNative {
  /**
   * A listening TCP socket on `host` (an IPv4 or IPv6 literal; an IPv6 one is IPV6_V6ONLY) and
   * `port` (0: any free port), with SO_REUSEADDR and IP_TRANSPARENT (IPV6_TRANSPARENT), so that
   * it accepts the connections a TPROXY rule redirects to it whatever their destination.
   * Non-blocking and close-on-exec. Returns its file descriptor: hand it to
   * `net.Server.listen({ fd })`; `server.address()` then gives the bound port.
   *
   * Throws an Error naming the failed call with `code`: "EPERM" without CAP_NET_ADMIN (or
   * CAP_NET_RAW), "EADDRINUSE" for a busy port, "EADDRNOTAVAIL" for an address not on this host;
   * a TypeError or RangeError for a bad argument. The socket is closed on any failure.
   *
   * @param backlog the listen queue's length (default 511, Node's)
   */
  listenTransparent(host: string, port: number, backlog?: number): number
  /**
   * A TCP connection to `address` (an IPv4 or IPv6 literal) and `port`, whose packets all carry
   * the firewall mark `mark` (SO_MARK, set before connect so the SYN carries it too): how the
   * gateway's own upstream connections stay out of its TPROXY rules. Connects on the libuv
   * threadpool and resolves with the connected socket's file descriptor, non-blocking and
   * close-on-exec; the caller owns it and must wrap it at once (`markedSocket` does) or close it.
   *
   * Rejects with an Error naming the failed call with `code`: "EPERM" without CAP_NET_ADMIN,
   * "ECONNREFUSED", "ETIMEDOUT" when no connection is made in `timeoutMs`, "ENETUNREACH", ...
   * Throws a TypeError or RangeError at once for a bad argument.
   *
   * @param mark the firewall mark, 0 to 2^32-1
   * @param timeoutMs how long the connect may take, at least 1
   */
  connectMarked(address: string, port: number, mark: number, timeoutMs: number): Promise<number>
}

/** The addon, or why it cannot be used. */
export type TproxyNativeLoad =
  | { readonly available: true; readonly native: TproxyNative }
  | { readonly available: false; readonly reason: string }

/** Where native/build.mjs puts the addon, from src/ (vitest, tsx), dist/ and dist/bundle/ alike. */
export const TPROXY_ADDON_PATH: string = path.join(PACKAGE_ROOT, "native", "build", "Release", "gateway_tproxy.node")

let loaded: TproxyNativeLoad | undefined

/**
 * Loads the addon once (the answer is cached): available, or the reason it is not — "not Linux",
 * the addon not built (and how to build it), or the error loading it gave.
 */
export const loadTproxyNative = (): TproxyNativeLoad => {
  if (loaded) return loaded
  if (process.platform !== "linux") return (loaded = { available: false, reason: "not Linux" })
  if (!existsSync(TPROXY_ADDON_PATH))
    return (loaded = {
      available: false,
      reason: "the native addon is not built: run npm run build:native (needs python3, make and a C compiler)"
    })
  try {
    const native = createRequire(import.meta.url)(TPROXY_ADDON_PATH) as Partial<TproxyNative>
    if (typeof native.listenTransparent !== "function" || typeof native.connectMarked !== "function")
      return (loaded = {
        available: false,
        reason: `${TPROXY_ADDON_PATH} is not the transparent-capture addon: rebuild it with npm run build:native`
      })
    return (loaded = { available: true, native: native as TproxyNative })
  } catch (e) {
    return (loaded = {
      available: false,
      reason: `the native addon ${TPROXY_ADDON_PATH} did not load: ${e instanceof Error ? e.message : String(e)}`
    })
  }
}

/**
 * `native.connectMarked` wrapped in a `net.Socket` (connected, reading): ready for bytes or for
 * `tls.connect({ socket })`. Rejects as `connectMarked` does.
 */
export const markedSocket = async (
  native: TproxyNative,
  address: string,
  port: number,
  mark: number,
  timeoutMs: number
): Promise<net.Socket> => {
  const fd = await native.connectMarked(address, port, mark, timeoutMs)
  try {
    return new net.Socket({ fd, readable: true, writable: true })
  } catch (e) {
    closeSync(fd)
    throw e
  }
}
