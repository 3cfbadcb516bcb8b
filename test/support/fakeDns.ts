import * as dgram from "node:dgram"
import type { AddressInfo } from "node:net"

/**
 * A DNS server for tests, on loopback (UDP): it answers every query NXDOMAIN ("no such name"),
 * SERVFAIL, or not at all, as `answer` decides per name, and records what it was asked. The
 * gateway's tests point a resolver at it (a `dns.Resolver` with its address, or, inside a network
 * namespace, the namespace's resolv.conf), so that a name fails to resolve through the DNS
 * protocol itself without any query leaving the machine. No vitest import: a gateway process
 * of its own (test/support/gatewayChild.main.ts) runs it too.
 */
export type DnsAnswer = "nxdomain" | "servfail" | "silent"

export interface DnsQuery {
  readonly name: string
  /** 1 A, 28 AAAA, ... */
  readonly type: number
}

export interface FakeDns {
  readonly host: string
  readonly port: number
  readonly queries: Array<DnsQuery>
  close(): Promise<void>
}

const RCODE: Record<Exclude<DnsAnswer, "silent">, number> = { nxdomain: 3, servfail: 2 }

/** The question of a query: its name and type, and where the question section ends. */
const question = (msg: Buffer): (DnsQuery & { readonly end: number }) | undefined => {
  if (msg.length < 12) return undefined
  const labels: Array<string> = []
  let at = 12
  while (at < msg.length) {
    const len = msg[at]!
    if (len === 0) break
    if (len > 63 || at + 1 + len > msg.length) return undefined
    labels.push(msg.subarray(at + 1, at + 1 + len).toString("latin1"))
    at += 1 + len
  }
  if (at + 5 > msg.length) return undefined
  return { name: labels.join(".").toLowerCase(), type: msg.readUInt16BE(at + 1), end: at + 5 }
}

export const startFakeDns = async (
  options: {
    readonly host?: string
    readonly port?: number
    readonly answer?: (name: string, type: number) => DnsAnswer
    readonly onQuery?: (q: DnsQuery) => void
  } = {}
): Promise<FakeDns> => {
  const host = options.host ?? "127.0.0.1"
  const queries: Array<DnsQuery> = []
  const socket = dgram.createSocket(host.includes(":") ? "udp6" : "udp4")
  socket.on("message", (msg, from) => {
    const q = question(msg)
    if (q === undefined) return
    const asked = { name: q.name, type: q.type }
    queries.push(asked)
    options.onQuery?.(asked)
    const answer = options.answer?.(q.name, q.type) ?? "nxdomain"
    if (answer === "silent") return
    // The header: the query's id, QR (a response), its RD bit, RA, the rcode; one question, no records.
    const header = Buffer.alloc(12)
    header.writeUInt16BE(msg.readUInt16BE(0), 0)
    header.writeUInt16BE(0x8000 | (msg.readUInt16BE(2) & 0x0100) | 0x0080 | RCODE[answer], 2)
    header.writeUInt16BE(1, 4)
    socket.send(Buffer.concat([header, msg.subarray(12, q.end)]), from.port, from.address)
  })
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject)
    socket.bind(options.port ?? 0, host, () => resolve())
  })
  return {
    host,
    port: (socket.address() as AddressInfo).port,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve()))
  }
}
