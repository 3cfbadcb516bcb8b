import { encodeComponent } from "./untrusted.js"
/**
 * Masks anything shaped like a credential in text bound for a log line; `scrubSecrets` also removes a connection's own secrets from
 * upstream error answers (docs/security.md, "Provider credentials in upstream errors").
 * Valid JSON must stay valid: a replacement stays inside one JSON string, between escapes, and puts no quote or backslash in.
 */

/**
 * Field, header and parameter names whose value is a credential (regex sources, matched
 * case-insensitively, whole or after other words: `db_password`). The one list for JSON keys,
 * `key: value` text and query parameters.
 */
const SECRET_KEY_NAMES: ReadonlyArray<string> = [
  "(?:x-)?api[_ -]?key",
  "x-goog-api-key",
  "access[_ -]?token",
  "refresh[_ -]?token",
  "id[_ -]?token",
  "auth[_ -]?token",
  "client[_ -]?secret",
  "private[_ -]?key",
  "secret",
  "password",
  "passwd",
  "token",
  "(?:proxy-)?authorization"
]
const KEY_NAMES = SECRET_KEY_NAMES.join("|")
/** A secret name, maybe after other words (`db_password`, `webhook-secret`). */
const KEY_NAME = `(?:[A-Za-z0-9]+[_-]){0,3}(?:${KEY_NAMES})`

/** Prefixes of provider keys (`sk-…`, `ghp_…`), followed by `-` or `_`. */
const KEY_PREFIXES = "sk|pk|rk|gwk|whsec|xai|gsk|AIza|ghp|gho|ghu|ghs|ghr|github_pat|glpat|hf|pplx|nvapi|fw|r8|xox[abposr]"

/** Key-shaped text, masked with `maskSecret` (or after the `Bearer` / `?token=` of group 1). */
const PATTERNS: ReadonlyArray<RegExp> = [
  /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi,
  new RegExp(`\\b(?:${KEY_PREFIXES})[-_][A-Za-z0-9._-]{6,}`, "g"),
  /\bAIza[A-Za-z0-9_-]{20,}/g,
  /\bya29\.[A-Za-z0-9._-]{10,}/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  // JSON Web Tokens (OAuth access tokens): header.payload.signature.
  /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g,
  new RegExp(`([?&](?:${KEY_NAMES}|key)=)[^&#\\s"'\\\\]+`, "gi")
]

/**
 * `name: value`, `name=value`, `"name": "value"` (JSON), `\"name\":\"value\"` (JSON inside a
 * JSON string), `'name': 'value'`, for the secret names above. A quoted value is matched up to
 * its closing quote, escapes included.
 */
const KEY_VALUE = new RegExp(
  `\\b(?<key>${KEY_NAME})(?<kq>\\\\?["'])?(?<sep>\\s*[:=]\\s*)(?:` +
    `(?<dq>")(?<dqv>(?:[^"\\\\\\n]|\\\\.)*)(?<dqc>")?|` +
    `(?<eq>\\\\")(?<eqv>(?:[^"\\\\\\n]|\\\\[^"\\n])*)(?<eqc>\\\\")?|` +
    `(?<sq>')(?<sqv>(?:[^'"\\\\\\n]|\\\\.)*)(?<sqc>')?|` +
    `(?<bare>[^\\s"'\\\\&,;]+))`,
  "gi"
)

/**
 * Necessary for any pattern above to match, in one scan instead of eight: the common log line
 * has none of these and is returned as is. Keep it a superset of the patterns: every key name
 * ends with one of the words here, followed by `:` or `=` (after a closing quote, maybe escaped).
 */
const MAY_HOLD_SECRET = new RegExp(
  `(?:bearer|basic)\\s|(?:${KEY_PREFIXES})[-_]|aiza|ya29\\.|akia|eyj|(?:key|token|secret|passw(?:or)?d|authorization)\\\\?["']?\\s*[:=]`,
  "i"
)

/**
 * Unquoted words after `name:` that describe the field instead of being its value
 * (`password: expected string`). Words shorter than 8 letters are never masked anyway.
 */
const SCHEMA_WORDS = new Set([
  "expected",
  "required",
  "optional",
  "undefined",
  "nullable",
  "provided",
  "incorrect",
  "mismatch",
  "redacted",
  "deprecated",
  "forbidden",
  "characters",
  "malformed",
  "rejected",
  "unchanged",
  "received"
])
/** Whether an unquoted value after `name:` (not `name=`) is masked: not a bare word of prose. */
const maskAfterColon = (value: string): boolean =>
  /^[A-Za-z]+$/.test(value) ? value.length >= 8 && !SCHEMA_WORDS.has(value.toLowerCase()) : value.length >= 4
/** A JSON number (or its start) at the beginning of an unquoted value; a literal or a nested value. */
const JSON_NUMBER = /^-?\d[\d.eE+-]*/
const JSON_OTHER = /^(?:true|false|null|[{[])/

/** Shows at most about a third of a secret (none of a short one): enough to tell keys apart. */
export const maskSecret = (secret: string): string => {
  if (secret.length < 12) return "****"
  if (secret.length < 24) return `${secret.slice(0, 3)}…${secret.slice(-2)}`
  return `${secret.slice(0, 8)}…${secret.slice(-4)}`
}

const BACKSLASH = 92
const QUOTE = 34

/** Whether the character at `i` is escaped (an odd run of backslashes right before it). */
const escapedAt = (text: string, i: number): boolean => {
  let n = 0
  while (i - n - 1 >= 0 && text.charCodeAt(i - n - 1) === BACKSLASH) n++
  return n % 2 === 1
}

/** The escape sequence (`\x`, `\uXXXX`) position `i` is strictly inside of, as [start, end). */
const escapeAround = (text: string, i: number): readonly [number, number] | undefined => {
  if (i <= 0 || i > text.length) return undefined
  if (escapedAt(text, i)) return [i - 1, text[i] === "u" ? i + 5 : i + 1]
  for (let j = 1; j <= 4; j++) {
    const u = i - j
    if (u >= 1 && text[u] === "u" && escapedAt(text, u) && /^[0-9a-fA-F]{4}$/.test(text.slice(u + 1, u + 5))) return [u - 1, u + 5]
  }
  return undefined
}

/** [start, end) moved off escape sequences: the start past the one it is in, the end past the one it cuts. */
const alignToEscapes = (text: string, start: number, end: number): readonly [number, number] => {
  const s = escapeAround(text, start)
  const e = escapeAround(text, end)
  const from = s && s[0] < start ? Math.min(s[1], text.length) : start
  const to = e && e[0] < end ? Math.min(e[1], text.length) : end
  return [from, Math.max(from, to)]
}

/**
 * Whether position `i` is outside JSON strings, counting unescaped quotes before it: the
 * positions of a text are counted once, however many times this is asked.
 */
const outsideStrings = (text: string): ((i: number) => boolean) => {
  if (lastText === text && lastOutside) return lastOutside
  let quotes: Array<number> | undefined
  lastText = text
  return (lastOutside = (i) => {
    if (quotes === undefined) {
      quotes = []
      for (let p = text.indexOf('"'); p !== -1; p = text.indexOf('"', p + 1)) if (!escapedAt(text, p)) quotes.push(p)
    }
    let lo = 0
    let hi = quotes.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (quotes[mid]! < i) lo = mid + 1
      else hi = mid
    }
    return lo % 2 === 0
  })
}
// The text of the last question: a text with several `name: value` pairs is counted once.
let lastText: string | undefined
let lastOutside: ((i: number) => boolean) | undefined

/** Whether `text` may be a JSON document (then a masked piece of a number must stay a number). */
const looksLikeJson = (text: string): boolean => /^\s*[{[]/.test(text)

/**
 * `text` with the given spans replaced by `****`, after aligning them to escape sequences and
 * merging overlaps. In a JSON document a span is masked string by string: the quotes and the
 * syntax between strings stay, and a piece of a number becomes as many `1`s (still a number).
 */
const maskSpans = (text: string, spans: ReadonlyArray<readonly [number, number]>): string => {
  if (spans.length === 0) return text
  const aligned = spans.map(([s, e]) => alignToEscapes(text, s, e)).filter(([s, e]) => e > s)
  aligned.sort((a, b) => a[0] - b[0])
  const json = looksLikeJson(text)
  const outside = outsideStrings(text)
  const masked = (from: number, to: number): string => {
    if (!json) return "****"
    let out = ""
    for (let a = from; a < to; ) {
      let b = a
      while (b < to && !(text.charCodeAt(b) === QUOTE && !escapedAt(text, b))) b++
      const piece = text.slice(a, b)
      // Outside strings a valid document has only numbers there: anything else means the text
      // only began like JSON (`[quota] …`), and the secret is masked like in any text.
      out += piece === "" ? "" : !outside(a) ? "****" : /^[0-9eE-]+$/.test(piece) ? "1".repeat(piece.length) : "****"
      if (b < to) out += '"'
      a = b + 1
    }
    return out
  }
  let out = ""
  let at = 0
  let i = 0
  while (i < aligned.length) {
    let [s, e] = aligned[i]!
    for (i++; i < aligned.length && aligned[i]![0] <= e; i++) e = Math.max(e, aligned[i]![1])
    out += text.slice(at, s) + masked(s, e)
    at = e
  }
  return out + text.slice(at)
}

/** `value` of a `name: value` pair, masked as its quoting and its place in JSON allow. */
const maskKeyValue = (match: string, offset: number, text: string, g: Record<string, string | undefined>): string => {
  const prefix = `${g["key"]}${g["kq"] ?? ""}${g["sep"]}`
  if (g["dq"] !== undefined) {
    // A quote that closes a JSON string (`{"m":"password: ","x":1}`) starts no value.
    if (!outsideStrings(text)(offset + prefix.length)) return match
    return `${prefix}"****${g["dqc"] ?? ""}`
  }
  if (g["eq"] !== undefined) return `${prefix}\\"****${g["eqc"] ?? ""}`
  if (g["sq"] !== undefined) return `${prefix}'****${g["sqc"] ?? ""}`
  const bare = g["bare"] ?? ""
  const kq = g["kq"]
  if (kq === '"' || kq === '\\"') {
    // After a JSON key (or one inside a JSON string), a value that is not a string: a number
    // becomes the string "****"; true, false, null, {…}, […] stay.
    const number = JSON_NUMBER.exec(bare)?.[0]
    if (number !== undefined) return `${prefix}${kq}****${kq}${bare.slice(number.length)}`
    if (JSON_OTHER.test(bare)) return match
  }
  return g["sep"]!.includes("=") || maskAfterColon(bare) ? `${prefix}****` : match
}

export const redactText = (text: string): string => {
  if (!MAY_HOLD_SECRET.test(text)) return text
  let out = text
  for (const re of PATTERNS) {
    out = out.replace(re, (match: string, ...rest: Array<unknown>) => {
      // (match, group 1?, offset, whole text): the second argument is the offset for a pattern without groups.
      const g1 = typeof rest[0] === "string" ? rest[0] : undefined
      const offset = rest.at(-2) as number
      const whole = rest.at(-1) as string
      // Right after an escaping backslash (`\rk-…` in JSON is a carriage return and `k-…`):
      // the escaped character stays, so the escape stays whole.
      const keep = !g1 && escapedAt(whole, offset) ? match.slice(0, 1) : ""
      if (g1 && (g1.startsWith("?") || g1.startsWith("&"))) return `${g1}****`
      if (g1 && /^(bearer|basic)$/i.test(g1)) return `${g1} ****`
      return keep + maskSecret(match.slice(keep.length))
    })
  }
  return out.replace(KEY_VALUE, (match: string, ...rest: Array<unknown>) =>
    maskKeyValue(match, rest.at(-3) as number, rest.at(-2) as string, rest.at(-1) as Record<string, string | undefined>)
  )
}

/** Secrets shorter than this are not searched for (they would mangle ordinary words). */
const MIN_SECRET = 6
/** Any piece of a secret at least this long, among key characters, counts as the secret cut short. */
const MIN_PART = 12
const KEY_RUN = /[A-Za-z0-9_-]{12,}/g
const KEY_PIECE = /^[A-Za-z0-9_-]{12}$/

/** How a secret may appear in an answer: as is, URL-encoded, JSON-escaped, base64 (a Basic header echoed). */
const formsOf = (secret: string): ReadonlyArray<string> => [
  secret,
  encodeComponent(secret),
  JSON.stringify(secret).slice(1, -1),
  Buffer.from(secret).toString("base64")
]

/** Where `form` occurs in `text`. */
const occurrences = (text: string, form: string): Array<readonly [number, number]> => {
  const spans: Array<readonly [number, number]> = []
  for (let i = text.indexOf(form); i !== -1; i = text.indexOf(form, i + form.length)) spans.push([i, i + form.length])
  return spans
}

/** The spans of `text` covered by a MIN_PART-long window, among key characters, found in `pieces`. */
const pieceSpans = (text: string, pieces: ReadonlySet<string>): Array<readonly [number, number]> => {
  const spans: Array<[number, number]> = []
  for (const run of text.matchAll(KEY_RUN)) {
    const start = run.index
    const end = start + run[0].length
    for (let i = start; i + MIN_PART <= end; i++) {
      if (!pieces.has(text.slice(i, i + MIN_PART))) continue
      const last = spans.at(-1)
      if (last && last[1] >= i) last[1] = i + MIN_PART
      else spans.push([i, i + MIN_PART])
    }
  }
  return spans
}

/**
 * Scrubs texts of the given secrets (every form, and any piece of MIN_PART key characters or
 * more) and of anything shaped like a credential; what it needs from the secrets is worked out
 * once, for as many texts as there are.
 */
export const secretScrubber = (secrets: ReadonlyArray<string>): ((text: string) => string) => {
  const usable = secrets.filter((s) => s.length >= MIN_SECRET)
  const forms = [...new Set(usable.flatMap(formsOf))].sort((a, b) => b.length - a.length)
  const pieces = new Set<string>()
  for (const secret of usable) {
    for (let i = 0; i + MIN_PART <= secret.length; i++) {
      const piece = secret.slice(i, i + MIN_PART)
      if (KEY_PIECE.test(piece)) pieces.add(piece)
    }
  }
  return (text) => {
    let out = text
    for (const form of forms) if (out.includes(form)) out = maskSpans(out, occurrences(out, form))
    if (pieces.size > 0) out = maskSpans(out, pieceSpans(out, pieces))
    return redactText(out)
  }
}

/**
 * `text` without the given secrets (every form, and any long piece of one) and without anything
 * shaped like a credential. For upstream error answers only: it costs a few scans of the text.
 */
export const scrubSecrets = (text: string, secrets: ReadonlyArray<string>): string => secretScrubber(secrets)(text)
