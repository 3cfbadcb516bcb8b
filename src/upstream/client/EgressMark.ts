/**
 * The firewall mark on the gateway's own outbound connections while transparent capture runs: without it, its provider calls would
 * be diverted back to its own listener (docs/capture.md, "The gateway's own traffic").
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
