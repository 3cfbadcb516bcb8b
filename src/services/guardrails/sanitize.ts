/**
 * The input sanitizer: removes terminal escapes whole, control, zero-width and bidi characters, then applies NFKC
 * (the exact list: docs/guardrails.md#input-sanitizer).
 */

// eslint-disable-next-line no-control-regex
const STRIPPED = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u200B-\u200D\u2060\uFEFF\u202A-\u202E\u2066-\u2069]/g
// eslint-disable-next-line no-control-regex
const ANY_STRIPPED = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u200B-\u200D\u2060\uFEFF\u202A-\u202E\u2066-\u2069]/
/** Only text outside printable ASCII can change under NFKC or the stripping above. */
// eslint-disable-next-line no-control-regex
const NOT_PLAIN = /[^\u0009\u000A\u000D\u0020-\u007E]/

// eslint-disable-next-line no-control-regex
const ESCAPES = /\u001B(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001B]*(?:\u0007|\u001B\\)?|[ -/]*[0-~])/g

/** The text sanitized; the same string (no copy) when nothing changes, the usual case. */
export const sanitizeText = (text: string): string => {
  if (!NOT_PLAIN.test(text)) return text
  const unescaped = text.includes("\u001B") ? text.replace(ESCAPES, "") : text
  const stripped = ANY_STRIPPED.test(unescaped) ? unescaped.replace(STRIPPED, "") : unescaped
  const normalised = stripped.normalize("NFKC")
  return normalised === text ? text : normalised
}
