/**
 * The TPROXY mode's optional Node-API addon (native/src/tproxy.c, Linux only): a transparent listening socket and a connection marked
 * before it connects, which Node's `net` lacks. `loadTproxyNative()` says why it is missing (native/README.md, docs/capture.md).
 */
import { closeSync, existsSync } from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import { NATIVE_ADDON_PATH } from "../../../platform/system/nativeAddon.js"

/** The addon's exports (native/src/tproxy.c). Both raise Errors with `code` (the errno name, e.g. "EPERM") and `syscall`. */
export interface TproxyNative {
  /**
   * A listening TCP socket with SO_REUSEADDR and IP_TRANSPARENT (IPv6: V6ONLY) for `net.Server.listen({ fd })`; port 0 picks one.
   * Throws with `code` (EPERM without CAP_NET_ADMIN or CAP_NET_RAW, EADDRINUSE, EADDRNOTAVAIL), the socket closed on any failure.
   * @param backlog the listen queue's length (default 511, Node's)
   */
  listenTransparent(host: string, port: number, backlog?: number): number
  /**
   * A TCP connection whose every packet, the SYN included, carries SO_MARK `mark` (0 to 2^32-1): how the gateway's own connections
   * stay out of the TPROXY rules. Made on the libuv threadpool; resolves with an fd the caller must wrap at once (`markedSocket`) or
   * close. Rejects with `code` (EPERM, ECONNREFUSED, ETIMEDOUT once `timeoutMs` (at least 1) passed...); a bad argument throws at once.
   */
  connectMarked(address: string, port: number, mark: number, timeoutMs: number): Promise<number>
}

/** The addon, or why it cannot be used. */
export type TproxyNativeLoad =
  | { readonly available: true; readonly native: TproxyNative }
  | { readonly available: false; readonly reason: string }

/** Where native/build.mjs puts the addon, from src/ (vitest, tsx), dist/ and dist/bundle/ alike. */
export const TPROXY_ADDON_PATH: string = NATIVE_ADDON_PATH

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
