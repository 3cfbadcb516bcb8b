/**
 * The firewall mark on the gateway's own outbound connections while the transparent-capture mode
 * runs (docs/capture.md). Its rules divert every new local TCP connection to the intercepted port
 * unless its packets carry the bypass mark, the gateway's included: without the mark its provider
 * calls on 443 would come back to its own transparent listener. While a dial is set, the upstream
 * client (UpstreamHttp) and the capture modes' forwarders connect through it (a socket whose
 * SO_MARK is set before connect, from the native addon); otherwise they connect as always.
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import type * as net from "node:net"

/** Connects to an address (an IP literal) and port with the mark set before the first packet. */
export type MarkedDial = (address: string, port: number, timeoutMs: number) => Promise<net.Socket>

export interface EgressMarkShape {
  /** The marking dial while the transparent capture runs; undefined otherwise (the usual connect). */
  readonly current: () => MarkedDial | undefined
  readonly set: (dial: MarkedDial | undefined) => void
}

export class EgressMark extends Context.Tag("gateway/EgressMark")<EgressMark, EgressMarkShape>() {
  static readonly layer = Layer.sync(EgressMark, () => {
    let dial: MarkedDial | undefined
    return {
      current: () => dial,
      set: (d) => {
        dial = d
      }
    }
  })
}
