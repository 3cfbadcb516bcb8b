/**
 * Reading the common event of an upstream stream without JSON.parse.
 *
 * Most events of a streamed answer have one small shape: a chat chunk whose delta is only
 * `content`, an Anthropic `text_delta`, a Gemini candidate with one text part. Parsing each into
 * objects was the largest share of a translated stream's CPU (and of its garbage). A decoder
 * first asks a reader here for the few values it needs from such an event; the reader walks the
 * JSON text strictly, by the grammar JSON.parse accepts, and answers undefined for anything else:
 * another shape, a key the decoder reads given twice (JSON.parse keeps the last), a value of
 * another type, invalid JSON, a nesting deeper than it follows. The decoder then parses the
 * event in full, as before: the events it makes are those of JSON.parse by construction.
 */

const QUOTE = 34
const BACKSLASH = 92
const COMMA = 44
const COLON = 58
const OPEN_BRACE = 123
const CLOSE_BRACE = 125
const OPEN_BRACKET = 91
const CLOSE_BRACKET = 93

/** Values nested deeper than this are left to JSON.parse. */
const MAX_DEPTH = 32

const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)

/** The characters JSON allows after a backslash, besides `u`: `"` `\` `/` `b` `f` `n` `r` `t`. */
const isSimpleEscape = (c: number): boolean =>
  c === QUOTE || c === BACKSLASH || c === 47 || c === 98 || c === 102 || c === 110 || c === 114 || c === 116

/**
 * A cursor over one JSON text. A step that meets anything unexpected marks the reading failed
 * (`failed`) and moves to the end of the text, where every further step fails too: a reader can
 * be written as straight-line code and look at `failed` once, at the end.
 */
export class JsonReader {
  private text = ""
  private at = 0
  failed = false
  /** Bounds of the key read last (`member`). */
  private keyStart = 0
  private keyEnd = 0

  /** Starts reading `text` from its beginning. */
  reset(text: string): this {
    this.text = text
    this.at = 0
    this.failed = false
    this.stringStart = this.stringEnd = 0
    return this
  }

  /** Marks the reading failed (a value of the right type that the caller does not take). */
  fail(): false {
    this.failed = true
    this.at = this.text.length
    return false
  }

  private space(): number {
    const s = this.text
    let i = this.at
    let c = s.charCodeAt(i)
    while (c === 32 || c === 10 || c === 13 || c === 9) c = s.charCodeAt(++i)
    this.at = i
    return c
  }

  /** Reads `{` or `[` (the code given). */
  open(code: number): boolean {
    if (this.space() !== code) return this.fail()
    this.at++
    return true
  }

  /** Reads `{`. */
  object(): boolean {
    return this.open(OPEN_BRACE)
  }

  /** Reads `[`. */
  array(): boolean {
    return this.open(OPEN_BRACKET)
  }

  /**
   * The next member of an object whose `{` was read: true with its key read (see `isKey`) and
   * its `:`, the value next; false at the object's `}` (or when the reading failed).
   */
  member(first: boolean): boolean {
    let c = this.space()
    if (c === CLOSE_BRACE) {
      this.at++
      return false
    }
    if (!first) {
      if (c !== COMMA) return this.fail()
      this.at++
      c = this.space()
    }
    if (c !== QUOTE) return this.fail()
    // A key with an escape could spell any name: such an event is left to JSON.parse.
    const s = this.text
    const start = this.at + 1
    let i = start
    for (let k = s.charCodeAt(i); k !== QUOTE; k = s.charCodeAt(++i)) if (!(k >= 32) || k === BACKSLASH) return this.fail()
    this.keyStart = start
    this.keyEnd = i
    this.at = i + 1
    if (this.space() !== COLON) return this.fail()
    this.at++
    return true
  }

  /** Whether the key read last is `name`. */
  isKey(name: string): boolean {
    const n = name.length
    if (this.keyEnd - this.keyStart !== n) return false
    for (let i = 0, at = this.keyStart; i < n; i++, at++) if (this.text.charCodeAt(at) !== name.charCodeAt(i)) return false
    return true
  }

  /** The next element of an array whose `[` was read: true when one follows, false at its `]`. */
  element(first: boolean): boolean {
    const c = this.space()
    if (c === CLOSE_BRACKET) {
      this.at++
      return false
    }
    if (!first) {
      if (c !== COMMA) return this.fail()
      this.at++
    }
    return true
  }

  /** Where the string read last (`scanString`) begins (its opening quote), and whether it has escapes. */
  private quoteAt = 0
  private escaped = false

  /**
   * Reads a string value, answering where it ends (its closing quote), or -1 when the next value
   * is not a well-formed string (a raw control character, a bad escape, no closing quote).
   */
  private scanString(): number {
    if (this.space() !== QUOTE) return (this.fail(), -1)
    const s = this.text
    const n = s.length
    this.quoteAt = this.at
    this.escaped = false
    let i = this.at + 1
    for (;;) {
      if (i >= n) return (this.fail(), -1)
      const c = s.charCodeAt(i)
      if (c === QUOTE) break
      if (c === BACKSLASH) {
        this.escaped = true
        const e = s.charCodeAt(i + 1)
        if (e === 117) {
          // \uXXXX
          if (!(isHex(s.charCodeAt(i + 2)) && isHex(s.charCodeAt(i + 3)) && isHex(s.charCodeAt(i + 4)) && isHex(s.charCodeAt(i + 5))))
            return (this.fail(), -1)
          i += 6
        } else if (isSimpleEscape(e)) i += 2
        else return (this.fail(), -1)
      } else if (c < 32) return (this.fail(), -1)
      else i++
    }
    this.at = i + 1
    return i
  }

  /** Where the string read last by `string` begins (its opening quote) and ends (after its closing quote); 0 before one. */
  stringStart = 0
  stringEnd = 0

  /** Reads a string value (undefined, and a failed reading, when the next value is not a string). */
  string(): string | undefined {
    const end = this.scanString()
    if (end === -1) return undefined
    this.stringStart = this.quoteAt
    this.stringEnd = end + 1
    // Escapes (\n, \", \u2028, surrogate pairs...) are decoded by JSON.parse itself, given the string alone.
    return this.escaped ? (JSON.parse(this.text.slice(this.quoteAt, end + 1)) as string) : this.text.slice(this.quoteAt + 1, end)
  }

  /** Reads the next value if it is the string `value` exactly, written without escapes; else fails. */
  isString(value: string): boolean {
    const end = this.scanString()
    if (end === -1) return false
    const from = this.quoteAt + 1
    return (!this.escaped && end - from === value.length && this.text.slice(from, end) === value) || this.fail()
  }

  /** Reads a number value (NaN, and a failed reading, when the next value is not a number). */
  number(): number {
    let c = this.space()
    const s = this.text
    const start = this.at
    let i = start
    if (c === 45) c = s.charCodeAt(++i) // -
    if (c === 48)
      c = s.charCodeAt(++i) // a leading 0 stands alone
    else if (c >= 49 && c <= 57) while (c >= 48 && c <= 57) c = s.charCodeAt(++i)
    else return (this.fail(), Number.NaN)
    if (c === 46) {
      // .
      c = s.charCodeAt(++i)
      if (!(c >= 48 && c <= 57)) return (this.fail(), Number.NaN)
      while (c >= 48 && c <= 57) c = s.charCodeAt(++i)
    }
    if (c === 101 || c === 69) {
      // e E
      c = s.charCodeAt(++i)
      if (c === 43 || c === 45) c = s.charCodeAt(++i)
      if (!(c >= 48 && c <= 57)) return (this.fail(), Number.NaN)
      while (c >= 48 && c <= 57) c = s.charCodeAt(++i)
    }
    this.at = i
    return Number(s.slice(start, i))
  }

  /** Reads `null` if it is the next value (false, the reading unchanged, when it is not). */
  isNull(): boolean {
    if (this.space() !== 110 || this.text.slice(this.at, this.at + 4) !== "null") return false
    this.at += 4
    return true
  }

  /** Reads `null`, or fails. */
  null(): boolean {
    return this.isNull() || this.fail()
  }

  /** Reads any value, checked but not built. */
  skip(depth = 0): boolean {
    const c = this.space()
    if (c === QUOTE) return this.scanString() !== -1
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (depth >= MAX_DEPTH) return this.fail()
      this.at++
      if (c === OPEN_BRACE) for (let first = true; this.member(first); first = false) this.skip(depth + 1)
      else for (let first = true; this.element(first); first = false) this.skip(depth + 1)
      return !this.failed
    }
    if (c === 116) return this.word("true")
    if (c === 102) return this.word("false")
    if (c === 110) return this.word("null")
    return !Number.isNaN(this.number())
  }

  private word(w: string): boolean {
    if (this.text.slice(this.at, this.at + w.length) !== w) return this.fail()
    this.at += w.length
    return true
  }

  /** The string literal that is exactly the text from `from` to `to`, or undefined. */
  stringBetween(from: number, to: number): string | undefined {
    this.at = from
    if (this.text.charCodeAt(from) !== QUOTE) return undefined
    const text = this.string()
    return this.at === to ? text : undefined
  }

  /** Whether the text was read whole and well: nothing but whitespace after the value. */
  done(): boolean {
    if (this.failed) return false
    this.space()
    return this.at === this.text.length
  }
}

const templateReader = new JsonReader()

/** A frame's last line's end and its blank line, in a run of frames whose lines end in \n or in \r\n (`TextTemplate.frameAt`). */
export const LF_BLANK = "\n\n"
export const CRLF_BLANK = "\r\n\r\n"

/**
 * The bytes around the text of an event read in full (with `JsonReader`): an event with the same
 * bytes before and after a string literal has the same shape and the same values but its text,
 * which it answers without reading the rest again. Streams repeat their usual event that way
 * (the same id, model, index and usage, chunk after chunk).
 */
export class TextTemplate {
  private before = ""
  private after = ""

  /** The event `data` as the learned one with another text, that text; else undefined. */
  text(data: string): string | undefined {
    const before = this.before
    const to = data.length - this.after.length
    // Compared as slices: === on two flat strings is a memory compare, startsWith goes character by character.
    if (before === "" || to <= before.length || data.slice(0, before.length) !== before || data.slice(to) !== this.after) return undefined
    return templateReader.reset(data).stringBetween(before.length, to)
  }

  /**
   * The usual event as a frame in place (`head`, the bytes before its data, then the data, then
   * `blank`: its line's end and a blank line) at `from` of a run of SSE frames: where the frame
   * ends (after its blank line), its text in `frameText` and the text's JSON literal in
   * `frameJson`; -1 unless it is the learned event with a text written without escapes (one that
   * has them is read by `text`). Such a text is its literal without the quotes, and JSON.stringify
   * writes it back as that literal.
   */
  frameAt(frames: string, from: number, head: string, blank: string): number {
    if (this.before === "" || this.multiline) return -1
    if (head !== this.head || blank !== this.blank) {
      this.head = head
      this.blank = blank
      this.headBefore = head + this.before
      this.afterBlank = this.after + blank
    }
    const headBefore = this.headBefore
    let at = from + headBefore.length
    // Compared as slices (a memory compare; startsWith goes a character at a time, ~3 ns each, and
    // a chat chunk's bytes before its text are ~170), the opening quote first.
    if (frames.charCodeAt(at) !== QUOTE || frames.slice(from, at) !== headBefore) return -1
    const open = at
    for (at++; ; at++) {
      const c = frames.charCodeAt(at)
      if (c === QUOTE) break
      // A backslash, a raw control character, the end (NaN), or half of a surrogate pair (a lone
      // one JSON.stringify would escape: left to `text`, as an emoji's pair is, rather than told apart).
      if (!(c >= 32 && c !== BACKSLASH && (c < 0xd800 || c > 0xdfff))) return -1
    }
    const end = at + 1 + this.afterBlank.length
    if (frames.slice(at + 1, end) !== this.afterBlank) return -1
    this.frameText = frames.slice(open + 1, at)
    this.frameJson = frames.slice(open, at + 1)
    return end
  }

  /** The text and its JSON literal of the frame `frameAt` found last. */
  frameText = ""
  frameJson = ""
  /** `frameAt`'s head, and what it compares a frame with: the head and `before`; `after` and the blank line. */
  private head = ""
  private blank = ""
  /** The learned data had more than one line: `frameAt` reads nothing in place. */
  private multiline = false
  private headBefore = ""
  private afterBlank = ""

  /**
   * Learns the bytes around the text of the event `data`, which `r` has just read whole and found
   * to be the usual event (its text the only string it read with `string()`). Answers whether
   * there was one (an event without a text literal teaches nothing).
   */
  learn(data: string, r: JsonReader): boolean {
    if (r.stringEnd === 0) return false
    this.before = data.slice(0, r.stringStart)
    this.after = data.slice(r.stringEnd)
    this.head = ""
    // Data of several lines (`data:` lines joined): in the stream's bytes each of its lines has its
    // own field name, so the bytes around its text are not `before` and `after` as they are.
    this.multiline = /[\r\n]/.test(this.before) || /[\r\n]/.test(this.after)
    return true
  }
}

/**
 * After an event that was not the usual one, how many events go straight to JSON.parse before
 * the reader tries again: a stream of other events (tool-call arguments, reasoning) pays for the
 * reader on one event in this many, not on each.
 */
export const READER_PAUSE = 8
