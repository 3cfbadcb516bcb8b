import * as crypto from "node:crypto"
import * as https from "node:https"
import * as net from "node:net"

/**
 * A TLS ClientHello as a server reads it off the wire, and its JA3 and JA4 fingerprints: what a
 * CDN sees of a client before any byte of HTTP. `TlsRecorder` is a TLS server on 127.0.0.1 that
 * records the ClientHello of every connection before handing the socket to an https server.
 */
export interface ClientHello {
  /** The legacy version field (0x0303 for TLS 1.2 and 1.3 alike). */
  readonly version: number
  readonly ciphers: ReadonlyArray<number>
  /** Extension types in the order sent. */
  readonly extensions: ReadonlyArray<number>
  readonly groups: ReadonlyArray<number>
  readonly pointFormats: ReadonlyArray<number>
  readonly alpn: ReadonlyArray<string>
  readonly signatureAlgorithms: ReadonlyArray<number>
  readonly supportedVersions: ReadonlyArray<number>
  readonly sni: string | null
  /** Length of the padding extension (21), if sent. */
  readonly padding: number | null
  readonly ja3: string
  readonly ja3Hash: string
  readonly ja4: string
}

/** GREASE values (RFC 8701): 0x0a0a, 0x1a1a ... 0xfafa. */
export const isGrease = (v: number): boolean => (v & 0x0f0f) === 0x0a0a && v >> 8 === (v & 0xff)

const u16list = (b: Buffer, at: number, bytes: number): Array<number> => {
  const out: Array<number> = []
  for (let i = at; i + 1 < at + bytes; i += 2) out.push(b.readUInt16BE(i))
  return out
}

const hex4 = (v: number) => v.toString(16).padStart(4, "0")
const sha12 = (s: string) => crypto.createHash("sha256").update(s).digest("hex").slice(0, 12)

/** The handshake message of a ClientHello (its records' payloads joined), or undefined while incomplete. */
const handshakeOf = (data: Buffer): Buffer | undefined => {
  let payload = Buffer.alloc(0)
  let at = 0
  while (at + 5 <= data.length) {
    if (data[at] !== 0x16) throw new Error(`not a TLS handshake record (type ${data[at]})`)
    const len = data.readUInt16BE(at + 3)
    if (at + 5 + len > data.length) return undefined
    payload = Buffer.concat([payload, data.subarray(at + 5, at + 5 + len)])
    at += 5 + len
    if (payload.length >= 4 && payload.length >= 4 + payload.readUIntBE(1, 3)) return payload
  }
  return undefined
}

export const parseClientHello = (hs: Buffer): ClientHello => {
  if (hs[0] !== 1) throw new Error("not a ClientHello")
  let p = 4
  const version = hs.readUInt16BE(p)
  p += 2 + 32
  p += 1 + hs[p]!
  const cipherBytes = hs.readUInt16BE(p)
  const ciphers = u16list(hs, p + 2, cipherBytes)
  p += 2 + cipherBytes
  p += 1 + hs[p]!
  const extEnd = p + 2 + hs.readUInt16BE(p)
  p += 2
  const extensions: Array<number> = []
  let groups: Array<number> = []
  let pointFormats: Array<number> = []
  let alpn: Array<string> = []
  let signatureAlgorithms: Array<number> = []
  let supportedVersions: Array<number> = []
  let sni: string | null = null
  let padding: number | null = null
  while (p + 4 <= extEnd) {
    const type = hs.readUInt16BE(p)
    const len = hs.readUInt16BE(p + 2)
    const body = hs.subarray(p + 4, p + 4 + len)
    extensions.push(type)
    if (type === 0 && len > 5) sni = body.subarray(5, 5 + body.readUInt16BE(3)).toString("latin1")
    if (type === 10) groups = u16list(body, 2, body.readUInt16BE(0))
    if (type === 11) pointFormats = [...body.subarray(1, 1 + body[0]!)]
    if (type === 13) signatureAlgorithms = u16list(body, 2, body.readUInt16BE(0))
    if (type === 43) supportedVersions = u16list(body, 1, body[0]!)
    if (type === 21) padding = len
    if (type === 16) {
      alpn = []
      for (let i = 2; i < body.length; ) {
        const n = body[i]!
        alpn.push(body.subarray(i + 1, i + 1 + n).toString("latin1"))
        i += 1 + n
      }
    }
    p += 4 + len
  }
  const clean = (l: ReadonlyArray<number>) => l.filter((v) => !isGrease(v))
  const ja3 = [version, clean(ciphers).join("-"), clean(extensions).join("-"), clean(groups).join("-"), pointFormats.join("-")].join(",")
  const top = Math.max(version, ...clean(supportedVersions))
  const tlsVersion = { 0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10" }[top] ?? "00"
  const ext = clean(extensions)
  const first = alpn[0]
  const alpnCode = first === undefined || first.length === 0 ? "00" : `${first[0]}${first[first.length - 1]}`
  const count = (n: number) => String(Math.min(n, 99)).padStart(2, "0")
  const ja4a = `t${tlsVersion}${sni === null ? "i" : "d"}${count(clean(ciphers).length)}${count(ext.length)}${alpnCode}`
  const ja4b = sha12(clean(ciphers).map(hex4).sort().join(","))
  const sortedExt = ext
    .filter((e) => e !== 0 && e !== 16)
    .map(hex4)
    .sort()
    .join(",")
  const sigs = clean(signatureAlgorithms).map(hex4).join(",")
  const ja4c = sha12(sigs ? `${sortedExt}_${sigs}` : sortedExt)
  return {
    version,
    ciphers,
    extensions,
    groups,
    pointFormats,
    alpn,
    signatureAlgorithms,
    supportedVersions,
    sni,
    padding,
    ja3,
    ja3Hash: crypto.createHash("md5").update(ja3).digest("hex"),
    ja4: `${ja4a}_${ja4b}_${ja4c}`
  }
}

export interface TlsRecorder {
  /** `https://127.0.0.1:<port>` */
  readonly origin: string
  /** Every ClientHello, in the order the connections came. */
  readonly hellos: Array<ClientHello>
  close(): Promise<void>
}

/**
 * A TLS server on 127.0.0.1: each connection's bytes are read until its ClientHello is whole,
 * parsed, put back and the socket handed to `server` (an https server with a test certificate),
 * which completes the handshake and answers.
 */
export const tlsRecorder = async (server: https.Server): Promise<TlsRecorder> => {
  const hellos: Array<ClientHello> = []
  const sockets = new Set<net.Socket>()
  const front = net.createServer((socket) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
    let seen = Buffer.alloc(0)
    const onData = (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk])
      let hs: Buffer | undefined
      try {
        hs = handshakeOf(seen)
      } catch {
        return socket.destroy()
      }
      if (hs === undefined) return
      socket.off("data", onData)
      socket.pause()
      hellos.push(parseClientHello(hs))
      socket.unshift(seen)
      server.emit("connection", socket)
    }
    socket.on("data", onData)
  })
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve))
  return {
    origin: `https://127.0.0.1:${(front.address() as net.AddressInfo).port}`,
    hellos,
    close: async () => {
      for (const s of sockets) s.destroy()
      server.closeAllConnections()
      await new Promise((r) => front.close(r))
    }
  }
}
