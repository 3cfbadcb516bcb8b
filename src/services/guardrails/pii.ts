/**
 * Personal data and secrets in text: the detectors (each over-matching pattern checked further: Luhn, mod-97, ranges,
 * public IPs only, entropy), the per-request placeholder map, and the stream hold (docs/guardrails.md#pii-redaction-reversible).
 */
import { isIPv4, isIPv6 } from "node:net"

export type PiiKind = "EMAIL" | "PHONE" | "CARD" | "SSN" | "NINO" | "IBAN" | "IP" | "SECRET"

export interface PiiMatch {
  readonly kind: PiiKind
  readonly start: number
  readonly end: number
}

interface Detector {
  readonly kind: PiiKind
  readonly pattern: RegExp
  readonly valid?: (match: string) => boolean
}

const luhn = (digits: string): boolean => {
  let sum = 0
  let double = false
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
    double = !double
  }
  return sum % 10 === 0
}

const ibanValid = (raw: string): boolean => {
  const s = raw.replace(/ /g, "")
  if (s.length < 15 || s.length > 34) return false
  const moved = s.slice(4) + s.slice(0, 4)
  let rem = 0
  for (const ch of moved) {
    const code = ch.charCodeAt(0)
    const v = code >= 65 ? String(code - 55) : ch
    for (const digit of v) rem = (rem * 10 + (digit.charCodeAt(0) - 48)) % 97
  }
  return rem === 1
}

const publicV4 = (ip: string): boolean => {
  if (!isIPv4(ip)) return false
  const [a, b] = ip.split(".").map(Number) as [number, number]
  if (a === 0 || a === 10 || a === 127 || a >= 224) return false
  if (a === 169 && b === 254) return false
  if (a === 172 && b >= 16 && b <= 31) return false
  if (a === 192 && b === 168) return false
  if (a === 100 && b >= 64 && b <= 127) return false
  return true
}

const publicV6 = (ip: string): boolean => {
  if (!isIPv6(ip)) return false
  const groups = ip.split(":").filter((g) => g !== "")
  if (groups.length < 3 || !/\d/.test(ip)) return false
  const first = ip.toLowerCase()
  return !(
    first.startsWith("fe8") ||
    first.startsWith("fe9") ||
    first.startsWith("fea") ||
    first.startsWith("feb") ||
    first.startsWith("fc") ||
    first.startsWith("fd") ||
    first.startsWith("::")
  )
}

/** Shannon entropy in bits per character. */
const entropy = (s: string): number => {
  const counts = new Map<string, number>()
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1)
  let h = 0
  for (const n of counts.values()) {
    const p = n / s.length
    h -= p * Math.log2(p)
  }
  return h
}

/** File names look like addresses (`icon@2x.png`); these endings are not top-level domains people mail. */
const FILE_ENDINGS = /\.(?:png|jpe?g|gif|svg|webp|ico|js|mjs|cjs|ts|tsx|jsx|css|scss|json|md|txt|py|rs|go|rb|java|lock|ya?ml|toml|html?)$/i

/** Detectors in priority order: where two overlap, the earlier wins (a secret is not re-read as a phone number). */
const DETECTORS: ReadonlyArray<Detector> = [
  { kind: "SECRET", pattern: /\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{20,}/g },
  { kind: "SECRET", pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g },
  { kind: "SECRET", pattern: /\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}/g },
  { kind: "SECRET", pattern: /\bxox[abprs]-[A-Za-z0-9-]{10,}/g },
  { kind: "SECRET", pattern: /\bAIza[0-9A-Za-z_-]{35}\b/g },
  { kind: "SECRET", pattern: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  {
    kind: "SECRET",
    pattern: /(?<=\b[Bb]earer\s+)[A-Za-z0-9._~+/-]{24,}=*/g,
    valid: (t) => entropy(t) >= 3.5 && /[A-Za-z]/.test(t) && /\d/.test(t)
  },
  {
    kind: "EMAIL",
    pattern:
      /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}\b/g,
    valid: (m) => !FILE_ENDINGS.test(m) && !m.startsWith("git@")
  },
  { kind: "IBAN", pattern: /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b/g, valid: ibanValid },
  {
    kind: "CARD",
    pattern: /(?<![\d.-])[2-6]\d{3}(?:[ -]?\d{4}){2}[ -]?\d{1,7}(?![\d.-]?\d)/g,
    valid: (m) => {
      const d = m.replace(/[ -]/g, "")
      return d.length >= 13 && d.length <= 19 && luhn(d)
    }
  },
  {
    kind: "SSN",
    pattern: /(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])/g
  },
  { kind: "NINO", pattern: /\b(?!BG|GB|NK|KN|TN|NT|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b/g },
  {
    kind: "PHONE",
    pattern: /(?<![\w+])\+[1-9](?:[ .-]?\(?\d\)?){6,14}(?![\w])|(?<![\w.-])\(?[2-9]\d{2}\)?[ .-]\d{3}[ .-]\d{4}(?![\w-]|\.\d)/g,
    valid: (m) => {
      const digits = m.replace(/\D/g, "")
      return digits.length >= 7 && digits.length <= 15
    }
  },
  { kind: "IP", pattern: /(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)/g, valid: publicV4 },
  { kind: "IP", pattern: /(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){1,7}:?(?::?[0-9A-Fa-f]{1,4}){1,7}(?![\w:])/g, valid: publicV6 }
]

/** Every match in `text`, in order, non-overlapping (earlier detectors win). */
export const findPii = (text: string): Array<PiiMatch> => {
  const found: Array<PiiMatch> = []
  for (const d of DETECTORS) {
    d.pattern.lastIndex = 0
    let m: RegExpExecArray | null
    while ((m = d.pattern.exec(text)) !== null) {
      const start = m.index
      const end = start + m[0].length
      if (m[0].length === 0) {
        d.pattern.lastIndex++
        continue
      }
      if (d.valid && !d.valid(m[0])) continue
      if (found.some((f) => start < f.end && end > f.start)) continue
      found.push({ kind: d.kind, start, end })
    }
  }
  return found.sort((a, b) => a.start - b.start)
}

/** A cheap pre-check: text without a digit, `@` or a known secret prefix has no match. */
const MAYBE = /[\d@]|sk-|AKIA|ASIA|gh[pousr]_|github_pat_|xox|AIza|eyJ|[Bb]earer|[A-Z]{2} ?\d/
export const mayHavePii = (text: string): boolean => MAYBE.test(text)

// ---------------------------------------------------------------- reversible redaction (requests)

/** One request's placeholders: the same value gets the same placeholder; kept in memory for the request only. */
export class PlaceholderMap {
  private readonly byValue = new Map<string, string>()
  readonly byPlaceholder = new Map<string, string>()
  private readonly counts = new Map<PiiKind, number>()
  /** Kinds replaced, with how many distinct values each. */
  readonly kinds = new Map<PiiKind, number>()

  placeholder(kind: PiiKind, value: string): string {
    const known = this.byValue.get(value)
    if (known) return known
    const n = (this.counts.get(kind) ?? 0) + 1
    this.counts.set(kind, n)
    this.kinds.set(kind, n)
    const p = `[${kind}_${n}]`
    this.byValue.set(value, p)
    this.byPlaceholder.set(p, value)
    return p
  }

  get size(): number {
    return this.byPlaceholder.size
  }
}

/** `text` with every match replaced by `replace(kind, value)`; the same string when there is none. */
export const replacePii = (text: string, replace: (kind: PiiKind, value: string) => string): string => {
  if (!mayHavePii(text)) return text
  const matches = findPii(text)
  if (matches.length === 0) return text
  let out = ""
  let at = 0
  for (const m of matches) {
    out += text.slice(at, m.start) + replace(m.kind, text.slice(m.start, m.end))
    at = m.end
  }
  return out + text.slice(at)
}

const PLACEHOLDER = /\[(?:EMAIL|PHONE|CARD|SSN|NINO|IBAN|IP|SECRET)_\d{1,6}\]/g

/** Placeholders of `map` put back (`json`: the text is inside a JSON string, the value is escaped). */
export const restorePlaceholders = (text: string, map: PlaceholderMap, json = false): string => {
  if (map.size === 0 || text.indexOf("[") === -1) return text
  return text.replace(PLACEHOLDER, (p) => {
    const v = map.byPlaceholder.get(p)
    if (v === undefined) return p
    return json ? JSON.stringify(v).slice(1, -1) : v
  })
}

/** Where a placeholder could begin at the end of `text` (a `[` followed by what a placeholder may hold), or -1. */
export const placeholderTail = (text: string): number => {
  const i = text.lastIndexOf("[")
  if (i === -1 || text.length - i > 16) return -1
  return /^\[[A-Z]{0,6}(?:_\d{0,6})?$/.test(text.slice(i)) ? i : -1
}

// ---------------------------------------------------------------- answers (response sanitization)

/** What a redacted answer shows in place of a match. */
export const redactedMark = (kind: PiiKind): string => `[REDACTED_${kind}]`

/**
 * Characters held back at the end of a streamed text that has no match reaching its end: a
 * match could begin inside them (the longest detector's reach). A match that does reach the end
 * is held from its start, up to `MAX_HOLD` characters in all, after which text goes out.
 */
export const HOLD_WINDOW = 48
export const MAX_HOLD = 512
