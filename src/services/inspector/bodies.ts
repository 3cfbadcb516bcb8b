/**
 * What the inspector keeps of headers and bodies: sensitive headers masked, key-shaped strings in
 * bodies and URLs masked (src/kernel/redact.ts, the logger's own rules), compressed bodies decoded
 * for display (gzip, deflate, br; zstd where the running Node has it), bodies cut at the size
 * limit with a notice, binary bodies kept as base64. Plain functions, no I/O.
 */
import * as zlib from "node:zlib"
import { maskSecret, redactText } from "../../kernel/redact.js"
import type { CapturedBody } from "./types.js"

/** Headers whose value is a credential (spec document 3, "Authentication" 4), plus the gateway's and providers' own. */
export const SENSITIVE_HEADERS: ReadonlySet<string> = new Set([
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "api-key",
  "x-api-key",
  "x-goog-api-key",
  "x-inspector-ingest-token",
  "chatgpt-account-id"
])

export type RawHeaders = Readonly<Record<string, string | ReadonlyArray<string> | number | undefined>>

/** Headers as one string per name (lower-cased; repeated values joined with ", "). */
export const flatHeaders = (headers: RawHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : String(v)
  }
  return out
}

/** A header value masked: the scheme kept (`Bearer sk-…abcd`), the secret's ends only. */
const maskHeaderValue = (value: string): string => {
  const space = value.indexOf(" ")
  if (space > 0 && space < 12) return `${value.slice(0, space)} ${maskSecret(value.slice(space + 1).trim())}`
  return maskSecret(value)
}

/** Headers with credentials masked: the sensitive ones by name, key-shaped strings in the others. */
export const maskHeaders = (headers: Readonly<Record<string, string>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(headers)) {
    if (SENSITIVE_HEADERS.has(k)) {
      out[k] = maskHeaderValue(v)
    } else out[k] = redactText(v)
  }
  return out
}

/** A URL with key-shaped query values masked (`?key=AIza…`). */
export const maskUrl = (url: string): string => redactText(url)

const TEXTUAL =
  /^(text\/|application\/(json|x-ndjson|xml|javascript|x-www-form-urlencoded|graphql|[a-z.+-]*\+json|[a-z.+-]*\+xml))|event-stream/i

/** Whether bytes are valid UTF-8 text (no NUL): kept as text, else as base64. */
const looksText = (buf: Buffer): boolean => {
  if (buf.includes(0)) return false
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(buf)
    return true
  } catch {
    // A body cut at the limit may end inside a character: the rest decides.
    if (buf.length < 4) return false
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(buf.subarray(0, buf.length - 3))
      return true
    } catch {
      return false
    }
  }
}

const zstdDecompress = (zlib as unknown as { zstdDecompressSync?: (b: Buffer, o?: object) => Buffer }).zstdDecompressSync

/** Decodes a content-encoding, bounded to `max` bytes out; a cut body decodes as far as it goes. */
const decode = (
  encoding: string,
  raw: Buffer,
  max: number
): { readonly bytes: Buffer; readonly cut: boolean } | { readonly error: string } => {
  const opts = { maxOutputLength: max, finishFlush: zlib.constants.Z_SYNC_FLUSH }
  try {
    switch (encoding) {
      case "gzip":
      case "x-gzip":
        return { bytes: zlib.gunzipSync(raw, opts), cut: false }
      case "deflate":
        try {
          return { bytes: zlib.inflateSync(raw, opts), cut: false }
        } catch {
          return { bytes: zlib.inflateRawSync(raw, opts), cut: false }
        }
      case "br":
        return {
          bytes: zlib.brotliDecompressSync(raw, { maxOutputLength: max, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }),
          cut: false
        }
      case "zstd":
        if (zstdDecompress === undefined)
          return { error: "zstd is not decodable on this Node version (Node 22.15+ has it); the body is kept as received" }
        return { bytes: zstdDecompress(raw, { maxOutputLength: max }), cut: false }
      default:
        return { error: `content-encoding ${encoding} is not decoded; the body is kept as received` }
    }
  } catch (e) {
    if (e instanceof RangeError) return { bytes: Buffer.alloc(0), cut: true }
    return { error: `the ${encoding} body could not be decoded (${e instanceof Error ? e.message : String(e)}); kept as received` }
  }
}

export interface BodyOptions {
  /** Largest body kept, bytes. */
  readonly maxBytes: number
  /** Mask key-shaped strings in the text. */
  readonly mask: boolean
}

/**
 * One body as the inspector keeps it. `raw` is what the source kept (at most maxBytes + 1 bytes:
 * more means it was cut), `size` the bytes on the wire. Decoded when compressed, masked when
 * asked, cut to `maxBytes` with a notice.
 */
export const captureBody = (raw: Buffer, size: number, headers: Readonly<Record<string, string>>, options: BodyOptions): CapturedBody => {
  const max = options.maxBytes
  let bytes = raw
  let truncated = raw.length > max || size > raw.length
  let notice: string | undefined
  let decodedFrom: string | undefined
  const encoding = (headers["content-encoding"] ?? "").trim().toLowerCase()
  if (encoding !== "" && encoding !== "identity" && raw.length > 0) {
    const d = decode(encoding, raw.length > max ? raw.subarray(0, max) : raw, max)
    if ("error" in d) notice = d.error
    else if (d.cut) {
      truncated = true
      notice = `decoded body larger than ${Math.round(max / 1024)} KB: not shown`
      bytes = Buffer.alloc(0)
      decodedFrom = encoding
    } else {
      bytes = d.bytes
      decodedFrom = encoding
    }
  }
  if (bytes.length > max) {
    bytes = bytes.subarray(0, max)
    truncated = true
  }
  if (truncated && notice === undefined)
    notice = `body truncated: ${size} bytes, the first ${Math.min(max, bytes.length)} kept (INSPECTOR_MAX_BODY_KB)`
  const type = headers["content-type"] ?? ""
  const asText = (notice === undefined || decodedFrom !== undefined || truncated) && (TEXTUAL.test(type) || looksText(bytes))
  const text = asText ? bytes.toString("utf8") : bytes.toString("base64")
  return {
    text: asText && options.mask ? redactText(text) : text,
    encoding: asText ? "utf8" : "base64",
    size,
    truncated,
    ...(decodedFrom !== undefined ? { decodedFrom } : {}),
    ...(notice !== undefined ? { notice } : {})
  }
}

/** A body's text, parsed as JSON when it is (undefined otherwise). */
export const jsonOf = (body: CapturedBody | null): unknown => {
  if (body === null || body.encoding !== "utf8" || body.truncated) return undefined
  const t = body.text.trimStart()
  if (t[0] !== "{" && t[0] !== "[") return undefined
  try {
    return JSON.parse(body.text)
  } catch {
    return undefined
  }
}
