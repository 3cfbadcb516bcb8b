import { encodeComponent } from "../http/untrusted.js"
/**
 * Masks anything that looks like a credential in free text before it reaches a log line.
 * Used by the logger for every message, so a careless `Effect.log(error)` cannot leak a key.
 * `scrubSecrets` does more for upstream error answers: it also removes the connection's own
 * secrets, matched literally (and cut short), whatever they look like.
 */
const PATTERNS: ReadonlyArray<RegExp> = [
  /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi,
  /\b(sk|pk|rk|gwk|whsec|xai|gsk|AIza|ghp|gho|ghu|ghs|ghr|github_pat|glpat|hf|pplx|nvapi|fw|r8|xox[abposr])[-_][A-Za-z0-9._-]{6,}/g,
  /\bAIza[A-Za-z0-9_-]{20,}/g,
  /\bya29\.[A-Za-z0-9._-]{10,}/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  // JSON Web Tokens (OAuth access tokens): header.payload.signature.
  /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g,
  /([?&](?:token|apiKey|api_key|key|password|access_token|secret)=)[^&\s"'\\]+/gi,
  /("(?:api_?key|apiKey|password|secret|token|access_token|refresh_token|authorization|x-api-key|x-goog-api-key)"\s*:\s*")[^"]*"/gi,
  // `api key: ...`, `x-api-key=...` in free text (header dumps, plain-text error pages).
  /\b((?:x-)?(?:api[_ -]?key|x-goog-api-key|access[_ -]?token|secret|password)\s*[:=]\s*)['"]?(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}/gi
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
    // The second argument is the first group, or the offset for a pattern without groups.
    out = out.replace(re, (match, group: unknown) => {
      const g1 = typeof group === "string" ? group : undefined
      if (match.startsWith("\"") && g1) return `${g1}****"`
      if (g1 && (g1.startsWith("?") || g1.startsWith("&"))) return `${g1}****`
      if (g1 && /^(bearer|basic)$/i.test(g1)) return `${g1} ****`
      if (g1 && /[:=]\s*$/.test(g1)) return `${g1}****`
      return maskSecret(match)
    })
  }
  return out
}

/** Secrets shorter than this are not searched for (they would mangle ordinary words). */
const MIN_SECRET = 6
/** A run of key characters at least this long that is part of a secret counts as the secret, cut short. */
const MIN_PART = 12
const KEY_RUN = /[A-Za-z0-9_-]{12,}/g

/** How a secret may appear in an answer: as is, URL-encoded, JSON-escaped, base64 (a Basic header echoed). */
const formsOf = (secret: string): ReadonlyArray<string> => {
  const forms = new Set([secret, encodeComponent(secret), JSON.stringify(secret).slice(1, -1), Buffer.from(secret).toString("base64")])
  return [...forms].sort((a, b) => b.length - a.length)
}

/**
 * `text` without the given secrets (every form, and any long piece of one) and without anything
 * shaped like a credential. For upstream error answers only: it costs a few scans of the text.
 */
export const scrubSecrets = (text: string, secrets: ReadonlyArray<string>): string => {
  let out = text
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET) continue
    for (const form of formsOf(secret)) if (out.includes(form)) out = out.split(form).join("****")
    if (secret.length >= MIN_PART) out = out.replace(KEY_RUN, (run) => (secret.includes(run) ? "****" : run))
  }
  return redactText(out)
}

/** A parsed JSON value with every string scrubbed (keys named like credentials emptied). */
export const scrubJson = (value: unknown, secrets: ReadonlyArray<string>): unknown => {
  if (typeof value === "string") return scrubSecrets(value, secrets)
  if (Array.isArray(value)) return value.map((v) => scrubJson(v, secrets))
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, typeof v === "string" && CREDENTIAL_KEY.test(k) ? "****" : scrubJson(v, secrets)])
    )
  }
  return value
}
const CREDENTIAL_KEY = /^(api_?key|password|secret|token|access_token|refresh_token|authorization|x-api-key|x-goog-api-key)$/i
