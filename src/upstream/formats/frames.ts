import { StringDecoder } from "node:string_decoder"

/** One unit of an upstream stream: an SSE event (`event:` + joined `data:` lines) or an NDJSON line. */
export interface Frame {
  readonly event?: string
  readonly data: string
}

/**
 * Longest SSE event or NDJSON line held (UTF-16 units): one upstream frame may not grow the
 * gateway's memory without bound. Beyond it `push` throws (the stream counts as unparseable).
 */
export const MAX_FRAME_CHARS = 16 * 1024 * 1024

const LF = 10
const CR = 13
const SPACE = 32

/** Lengths of `data:` and `event:`, as `fieldAt` answers them. */
const DATA_FIELD = 5
const EVENT_FIELD = 6

/** Whether the line at `start` begins `data:` or `event:`: that prefix's length, else 0. */
const fieldAt = (buffer: string, start: number): number => {
  const c = buffer.charCodeAt(start)
  if (c === 100) {
    // d a t a :
    return buffer.charCodeAt(start + 1) === 97 &&
      buffer.charCodeAt(start + 2) === 116 &&
      buffer.charCodeAt(start + 3) === 97 &&
      buffer.charCodeAt(start + 4) === 58
      ? DATA_FIELD
      : 0
  }
  if (c === 101) {
    // e v e n t :
    return buffer.charCodeAt(start + 1) === 118 &&
      buffer.charCodeAt(start + 2) === 101 &&
      buffer.charCodeAt(start + 3) === 110 &&
      buffer.charCodeAt(start + 4) === 116 &&
      buffer.charCodeAt(start + 5) === 58
      ? EVENT_FIELD
      : 0
  }
  return 0
}

/**
 * An event's name, the most frequent ones (an Anthropic stream's text delta, a Responses
 * stream's) as their constant: a decoder compares the name with that constant once per event,
 * at once when it is the same string.
 */
const eventName = (value: string): string =>
  value === "content_block_delta" ? "content_block_delta" : value === "response.output_text.delta" ? "response.output_text.delta" : value

/**
 * Incremental SSE parser (WHATWG rules: `event:`/`data:` fields, blank line ends an event,
 * `:` comments ignored, CR/LF/CRLF line ends). Holds only the current partial event.
 */
export class SseParser {
  private readonly decoder = new StringDecoder("utf8")
  private buffer = ""
  private event: string | undefined
  /** The current event's first `data:` line, and its further ones (most events have one). */
  private data: string | undefined
  private moreData: Array<string> | undefined
  /** Length of `data`, joined. */
  private dataSize = 0
  /** Further pieces of the partial line in `buffer`, set aside (see `push`). */
  private pending: Array<string> = []
  private pendingSize = 0

  /** The last byte given ended a character (no partial UTF-8 sequence held by the decoder). */
  private whole = true

  /** Nothing held: no partial line, event or character (the next chunk starts afresh). */
  idle(): boolean {
    return this.whole && this.buffer === "" && this.pending.length === 0 && this.data === undefined && this.event === undefined
  }

  push(chunk: Buffer | string): Array<Frame> {
    if (typeof chunk !== "string") this.whole = chunk.length === 0 ? this.whole : chunk[chunk.length - 1]! < 0x80
    const text = typeof chunk === "string" ? chunk : this.decoder.write(chunk)
    // The middle of a long line: set aside rather than joined to the buffer and searched again
    // with every chunk (which made a long line quadratic).
    if (this.buffer.length > 0 && this.buffer[this.buffer.length - 1] !== "\r" && text.indexOf("\n") === -1 && text.indexOf("\r") === -1) {
      this.pendingSize += text.length
      if (this.buffer.length + this.pendingSize > MAX_FRAME_CHARS) throw new Error("SSE line longer than 16 MiB")
      this.pending.push(text)
      return []
    }
    this.buffer += this.pending.length > 0 ? this.pending.join("") + text : text
    this.pending = []
    this.pendingSize = 0
    this.cr = -2
    const frames: Array<Frame> = []
    const buffer = this.buffer
    let start = 0
    for (;;) {
      const nl = this.findLineEnd(start)
      if (nl === -1) break
      this.lineAt(buffer, start, nl, frames)
      start = nl + (buffer.charCodeAt(nl) === CR && buffer.charCodeAt(nl + 1) === LF ? 2 : 1)
    }
    this.buffer = this.buffer.slice(start)
    this.cr = -2
    if (this.buffer.length > MAX_FRAME_CHARS) throw new Error("SSE line longer than 16 MiB")
    return frames
  }

  /** The stream ended: an event without its final blank line still counts. */
  end(): Array<Frame> {
    const frames: Array<Frame> = []
    this.buffer += this.pending.join("") + this.decoder.end()
    this.pending = []
    if (this.buffer.length > 0) this.line(this.buffer, frames)
    this.buffer = ""
    this.line("", frames)
    return frames
  }

  /** Where the next \r is (-1: none), or -2 when the buffer changed since the last search. */
  private cr = -2

  private findLineEnd(from: number): number {
    const n = this.buffer.indexOf("\n", from)
    // Searched once per buffer, not once per line: most streams have no \r at all, and scanning
    // to the end for every line made a burst of many events quadratic.
    if (this.cr === -2 || (this.cr !== -1 && this.cr < from)) this.cr = this.buffer.indexOf("\r", from)
    const r = this.cr
    if (r === -1) return n
    if (n === -1) return r === this.buffer.length - 1 ? -1 : r // a lone trailing \r may be half of \r\n
    return Math.min(n, r)
  }

  /**
   * The line from `start` to `end` of `buffer`, read in place: a `data:` or `event:` line's value
   * is the only string made of it (the usual lines; others go through `line`).
   */
  private lineAt(buffer: string, start: number, end: number, frames: Array<Frame>): void {
    if (end === start) return this.line("", frames)
    const field = fieldAt(buffer, start)
    if (field === 0) return this.line(buffer.slice(start, end), frames)
    // After the field's name and its colon, one space is not part of the value.
    let from = start + field
    if (buffer.charCodeAt(from) === SPACE) from++
    if (field === DATA_FIELD) this.addData(buffer.slice(from, end))
    else this.event = eventName(buffer.slice(from, end))
  }

  private addData(value: string): void {
    this.dataSize += value.length + 1
    if (this.dataSize > MAX_FRAME_CHARS) throw new Error("SSE event longer than 16 MiB")
    if (this.data === undefined) this.data = value
    else (this.moreData ??= []).push(value)
  }

  private line(line: string, frames: Array<Frame>): void {
    if (line === "") {
      if (this.data !== undefined) {
        const data = this.moreData === undefined ? this.data : `${this.data}\n${this.moreData.join("\n")}`
        frames.push(this.event ? { event: this.event, data } : { data })
      }
      this.event = undefined
      this.data = undefined
      this.moreData = undefined
      this.dataSize = 0
      return
    }
    if (line.startsWith(":")) return
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "data") this.addData(value)
    else if (field === "event") this.event = value
  }
}

/** Incremental NDJSON parser: one frame per non-empty line. */
export class NdjsonParser {
  private readonly decoder = new StringDecoder("utf8")
  private buffer = ""
  /** Further pieces of the partial line in `buffer`, set aside (see SseParser.push). */
  private pending: Array<string> = []
  private pendingSize = 0

  push(chunk: Buffer | string): Array<Frame> {
    const text = typeof chunk === "string" ? chunk : this.decoder.write(chunk)
    if (this.buffer.length > 0 && text.indexOf("\n") === -1) {
      this.pendingSize += text.length
      if (this.buffer.length + this.pendingSize > MAX_FRAME_CHARS) throw new Error("NDJSON line longer than 16 MiB")
      this.pending.push(text)
      return []
    }
    this.buffer += this.pending.length > 0 ? this.pending.join("") + text : text
    this.pending = []
    this.pendingSize = 0
    const frames: Array<Frame> = []
    let start = 0
    for (let nl = this.buffer.indexOf("\n"); nl !== -1; nl = this.buffer.indexOf("\n", start)) {
      const line = this.buffer.slice(start, nl).trim()
      if (line) frames.push({ data: line })
      start = nl + 1
    }
    this.buffer = this.buffer.slice(start)
    if (this.buffer.length > MAX_FRAME_CHARS) throw new Error("NDJSON line longer than 16 MiB")
    return frames
  }

  end(): Array<Frame> {
    const line = (this.buffer + this.pending.join("") + this.decoder.end()).trim()
    this.buffer = ""
    this.pending = []
    return line ? [{ data: line }] : []
  }
}

export const sseData = (data: unknown, event?: string): string =>
  (event ? `event: ${event}\n` : "") + `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`

export const ndjsonLine = (data: unknown): string => JSON.stringify(data) + "\n"
