/**
 * Masks anything that looks like a credential in free text before it reaches a log line.
 * Used by the logger for every message, so a careless `Effect.log(error)` cannot leak a key.
 */
const PATTERNS: ReadonlyArray<RegExp> = [
  /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi,
  /\b(sk|pk|rk|gwk|whsec|xai|gsk|AIza)[-_][A-Za-z0-9._-]{6,}/g,
  /\bAIza[A-Za-z0-9_-]{20,}/g,
  /([?&](?:token|apiKey|api_key|key|password)=)[^&\s"']+/gi,
  /("(?:api_?key|apiKey|password|secret|token|authorization|x-api-key|x-goog-api-key)"\s*:\s*")[^"]*"/gi
]

/** Shows at most about a third of a secret (none of a short one): enough to tell keys apart. */
export const maskSecret = (secret: string): string => {
  if (secret.length < 12) return "****"
  if (secret.length < 24) return `${secret.slice(0, 3)}…${secret.slice(-2)}`
  return `${secret.slice(0, 8)}…${secret.slice(-4)}`
}

export const redactText = (text: string): string => {
  let out = text
  for (const re of PATTERNS) {
    out = out.replace(re, (match, g1: string | undefined) => {
      if (match.startsWith("\"") && g1) return `${g1}****"`
      if (g1 && (g1.startsWith("?") || g1.startsWith("&"))) return `${g1}****`
      if (g1 && /^(bearer|basic)$/i.test(g1)) return `${g1} ****`
      return maskSecret(match)
    })
  }
  return out
}
