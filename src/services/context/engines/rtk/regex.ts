/**
 * Regex checks for filters that come from outside the gateway's code (a project's filter file, the
 * config's `customFilters`): a length limit, must compile, and (unless trusted) no shape known to
 * backtrack catastrophically: a quantified group that itself contains a quantifier (`(a+)+`,
 * `(\w*\s?)*`, `(?:x+){2,}`), or a backreference (`\1`, `\k<name>`).
 */

export const MAX_REGEX_LENGTH = 500

/** A problem with `source` (a sentence), or undefined when it may be used. */
export const checkRegex = (source: string, trusted: boolean): string | undefined => {
  if (source.length === 0) return "empty regex"
  if (source.length > MAX_REGEX_LENGTH) return `regex longer than ${MAX_REGEX_LENGTH} characters`
  try {
    new RegExp(source)
  } catch (e) {
    return `invalid regex: ${e instanceof Error ? e.message.replace(/^Invalid regular expression: /, "") : String(e)}`
  }
  if (trusted) return undefined
  return unsafeShape(source)
}

/** Where a quantifier that repeats without bound starts at `i` (`*`, `+`, `{n,}`, `{n,m}` with m > 1): its length, else 0. */
const unboundedQuantifier = (s: string, i: number): number => {
  const ch = s[i]
  if (ch === "*" || ch === "+") return 1
  if (ch === "{") {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(s.slice(i))
    if (!m) return 0
    if (m[2] === undefined) return Number(m[1]) > 1 ? m[0].length : 0
    if (m[3] === undefined || m[3] === "" || Number(m[3]) > 1) return m[0].length
  }
  return 0
}

const unsafeShape = (s: string): string | undefined => {
  // One frame per open group: whether anything inside it repeats.
  const stack: Array<{ repeats: boolean }> = [{ repeats: false }]
  let i = 0
  while (i < s.length) {
    const ch = s[i]!
    if (ch === "\\") {
      const next = s[i + 1] ?? ""
      if (/[1-9]/.test(next) || next === "k") return "backreferences are not allowed"
      i += 2
      // An escaped atom followed by a quantifier.
      const q = unboundedQuantifier(s, i)
      if (q) stack[stack.length - 1]!.repeats = true
      continue
    }
    if (ch === "[") {
      // Skip the class (escapes inside included).
      i++
      if (s[i] === "^") i++
      if (s[i] === "]") i++
      while (i < s.length && s[i] !== "]") i += s[i] === "\\" ? 2 : 1
      i++
      if (unboundedQuantifier(s, i)) stack[stack.length - 1]!.repeats = true
      continue
    }
    if (ch === "(") {
      stack.push({ repeats: false })
      i++
      continue
    }
    if (ch === ")") {
      const frame = stack.length > 1 ? stack.pop()! : { repeats: false }
      i++
      const q = unboundedQuantifier(s, i)
      if (q && frame.repeats) return "nested quantifiers (a repeated group that itself repeats, like (a+)+) are not allowed"
      if (q || frame.repeats) stack[stack.length - 1]!.repeats = true
      continue
    }
    i++
    if (unboundedQuantifier(s, i)) stack[stack.length - 1]!.repeats = true
  }
  return undefined
}
