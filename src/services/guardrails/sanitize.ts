/**
 * The input sanitizer (`INPUT_SANITIZER_ENABLED`): what it changes in prompt text is exactly
 * this (docs/guardrails.md, "Input sanitizer"):
 *
 * - terminal escape sequences (ANSI colours and cursor moves: `ESC [ … final`, OSC `ESC ] … BEL`
 *   or `ESC \`, and the short `ESC x`, `ESC ( B` forms) are removed whole, so a coloured tool output loses its
 *   colours, not only their ESC byte (which would leave `[33m` in the text);
 * - C0 controls U+0000–U+001F except tab, line feed and carriage return, DEL U+007F and the C1
 *   controls U+0080–U+009F are removed;
 * - zero-width characters U+200B–U+200D, U+2060 (word joiner) and U+FEFF (byte-order mark) are removed;
 * - bidirectional embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069 are removed;
 * - then the text is normalised to NFKC (full-width letters become ASCII, ligatures are split,
 *   compatibility forms fold).
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
