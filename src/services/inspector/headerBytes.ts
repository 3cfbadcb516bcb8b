/**
 * A request's or an answer's headers kept as bytes in a buffer of their own, for as long as the
 * inspector's slot of a request lives: a thousand requests later. Held as they come (node's object
 * and a string per name and value), they outlived every young collection of those requests and were
 * copied twice and promoted to the old generation only to die there: about half of the ~1,000
 * bytes a JSON request promoted, and at one request at a time a quarter of each young collection's
 * pause (docs/performance.md, "2026-11-29 (afternoon)"). As bytes, a slot holds two buffers (the
 * request's headers, the answer's), reused by the next request its slot serves; the objects are
 * made again only when someone reads the entry.
 */

import type { CaptureEnd } from "./types.js"

/** What a header set holds: a name's value is a string, a number (an answer's content-length), or several strings. */
export type HeaderSet = CaptureEnd["headers"]

const STRING = 0
const NUMBER = 1
const LIST = 2

/** Larger sets keep their object (node caps a request's head at 16 KB by default; answers are smaller). */
const MAX_BYTES = 64 * 1024
/**
 * A buffer grown past this for one large set is made small again by the next set that uses a
 * quarter of it or less: a thousand slots do not each keep the largest set they ever saw.
 */
const SHRINK_ABOVE = 4 * 1024
const EMPTY = new Uint8Array(0)

export class HeaderBytes {
  private bytes: Uint8Array = EMPTY
  private used = 0

  /**
   * Keeps `headers` as bytes, in place of what was kept before. False when they cannot be: a
   * character beyond Latin-1 (node's header strings never have one), a value of another type, or
   * more than MAX_BYTES; the caller keeps the object then.
   */
  store(headers: HeaderSet): boolean {
    this.used = 0
    for (const name in headers) {
      const value = headers[name]
      if (value === undefined) continue
      if (typeof value === "string") {
        if (!this.byte(STRING) || !this.text(name) || !this.text(value)) return this.fail()
      } else if (typeof value === "number") {
        if (!this.byte(NUMBER) || !this.text(name) || !this.text(String(value))) return this.fail()
      } else if (Array.isArray(value)) {
        if (!this.byte(LIST) || !this.text(name) || !this.count(value.length)) return this.fail()
        for (const v of value) if (typeof v !== "string" || !this.text(v)) return this.fail()
      } else return this.fail()
    }
    if (this.bytes.length > SHRINK_ABOVE && this.used * 4 <= this.bytes.length) this.bytes = this.bytes.slice(0, Math.max(1024, this.used))
    return true
  }

  /** The headers kept, as a new object of the same names, order and values. */
  read(): Record<string, string | Array<string> | number> {
    const out: Record<string, string | Array<string> | number> = {}
    const b = this.bytes
    let at = 0
    const text = (): string => {
      const n = b[at]! | (b[at + 1]! << 8)
      at += 2
      const s = latin1(b, at, n)
      at += n
      return s
    }
    while (at < this.used) {
      const kind = b[at++]
      const name = text()
      if (kind === STRING) out[name] = text()
      else if (kind === NUMBER) out[name] = Number(text())
      else {
        const n = b[at]! | (b[at + 1]! << 8)
        at += 2
        const list: Array<string> = []
        for (let i = 0; i < n; i++) list.push(text())
        out[name] = list
      }
    }
    return out
  }

  /** Forgets what is kept (its buffer stays, for the next set). */
  clear(): void {
    this.used = 0
  }

  private fail(): false {
    this.used = 0
    if (this.bytes.length > SHRINK_ABOVE) this.bytes = EMPTY
    return false
  }

  private room(n: number): boolean {
    const need = this.used + n
    if (need <= this.bytes.length) return true
    if (need > MAX_BYTES) return false
    const bigger = new Uint8Array(Math.min(MAX_BYTES, Math.max(1024, need, this.bytes.length * 2)))
    bigger.set(this.bytes.subarray(0, this.used))
    this.bytes = bigger
    return true
  }

  private byte(v: number): boolean {
    if (!this.room(1)) return false
    this.bytes[this.used++] = v
    return true
  }

  private count(n: number): boolean {
    if (n > 0xffff || !this.room(2)) return false
    this.bytes[this.used++] = n & 0xff
    this.bytes[this.used++] = n >> 8
    return true
  }

  /** A string's length (two bytes) and its characters (one byte each). */
  private text(s: string): boolean {
    const n = s.length
    if (!this.count(n) || !this.room(n)) return false
    const b = this.bytes
    let at = this.used
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i)
      if (c > 0xff) return false
      b[at++] = c
    }
    this.used = at
    return true
  }
}

/** Latin-1 bytes as a string: short ones by char codes (no call into node), longer ones through a Buffer view. */
const latin1 = (b: Uint8Array, at: number, n: number): string => {
  if (n <= 16) {
    let s = ""
    for (let i = 0; i < n; i++) s += String.fromCharCode(b[at + i]!)
    return s
  }
  return Buffer.from(b.buffer, b.byteOffset + at, n).toString("latin1")
}
