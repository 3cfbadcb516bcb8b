/**
 * Text that comes from outside (paths, bodies, upstream answers) on its way into places that
 * throw on bad input: decodeURIComponent, JSON walks, response headers. Each helper answers
 * instead of throwing; all are cheap when the input is ordinary.
 */

/** A percent-encoded path segment decoded, or undefined when its escapes are malformed (`%ZZ`, a cut UTF-8 sequence). */
export const decodePathSegment = (raw: string): string | undefined => {
  if (raw.indexOf("%") === -1) return raw
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}

/**
 * `encodeURIComponent` that never throws: a lone surrogate (which a JSON body can carry as
 * `"\ud800"`) becomes U+FFFD instead of a URIError.
 */
export const encodeComponent = (text: string): string => {
  try {
    return encodeURIComponent(text)
  } catch {
    return encodeURIComponent(Buffer.from(text, "utf8").toString("utf8"))
  }
}

/** A path as it may appear in an error message: at most 100 characters. */
export const quotedPath = (raw: string): string => `'${raw.length > 100 ? `${raw.slice(0, 100)}…` : raw}'`

/** Deepest nesting of arrays and objects accepted in a JSON body or WebSocket frame. */
export const MAX_JSON_DEPTH = 128

/** The 400 message for JSON nested deeper than MAX_JSON_DEPTH. */
export const TOO_DEEP_MESSAGE = `JSON nested deeper than ${MAX_JSON_DEPTH} levels (arrays and objects); flatten the request`

/**
 * Whether JSON text nests arrays and objects deeper than `limit`. A pre-scan before JSON.parse:
 * strings are skipped with indexOf (native), so the cost follows the number of tokens, not the
 * bytes of text. Malformed text is not judged here; JSON.parse says what is wrong with it.
 */
export const jsonTooDeep = (text: string, limit = MAX_JSON_DEPTH): boolean => {
  const n = text.length
  // Each level takes at least one byte.
  if (n <= limit) return false
  // Nor can it nest deeper than it has brackets (the usual request and answer): counted natively.
  if (fewBrackets(text, limit)) return false
  let depth = 0
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // A string: to its closing quote (one not escaped by an odd run of backslashes).
      let j = i
      for (;;) {
        j = text.indexOf('"', j + 1)
        if (j === -1) return false
        let slashes = 0
        for (let k = j - 1; text.charCodeAt(k) === 0x5c; k--) slashes++
        if ((slashes & 1) === 0) break
      }
      i = j
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true
    } else if (c === 0x7d || c === 0x5d) {
      depth--
    }
  }
  return false
}

/**
 * Whether `text` holds at most `limit` opening brackets (`{` and `[`, in strings too), found
 * with indexOf: a bound on its depth that costs a call per bracket rather than a step per token.
 */
const fewBrackets = (text: string, limit: number): boolean => {
  let count = 0
  for (let i = text.indexOf("{"); i !== -1; i = text.indexOf("{", i + 1)) if (++count > limit) return false
  for (let i = text.indexOf("["); i !== -1; i = text.indexOf("[", i + 1)) if (++count > limit) return false
  return true
}

/** Longest header value the gateway sends with text from outside; longer ones are left out. */
export const MAX_HEADER_VALUE = 1024

// What node writes without complaint and every client reads the same way: tab and printable ASCII.
// (`%` excepted, so that an encoded value always decodes back to the original.)
const CLEAN = /^[\t\x20-\x24\x26-\x7e]*$/

/**
 * A response header value from outside text: as is when clean, else percent-encoded as UTF-8; undefined (leave it out) when too long.
 * Never throws: node would (CR, LF, above U+00FF) after the upstream was called (docs/security.md, "Header values from outside").
 */
export const safeHeaderValue = (value: string): string | undefined => {
  // Encoding never makes a value shorter: a long one is left out before it is scanned.
  if (value.length > MAX_HEADER_VALUE) return undefined
  if (CLEAN.test(value)) return value
  // Buffer.from replaces lone surrogates (which encodeURIComponent throws on) with U+FFFD.
  const bytes = Buffer.from(value, "utf8")
  let out = ""
  for (const b of bytes) {
    out += b > 0x20 && b < 0x7f && b !== 0x25 ? String.fromCharCode(b) : `%${b < 16 ? "0" : ""}${b.toString(16).toUpperCase()}`
    if (out.length > MAX_HEADER_VALUE) return undefined
  }
  return out
}
