import type { FormatId } from "../../domain/canonical.js"
import * as Redacted from "effect/Redacted"
import type { AuthStyle, ProviderSpec } from "../../domain/catalog/catalog.js"

export const ANTHROPIC_VERSION = "2023-06-01"

const FORMAT_AUTH: Partial<Record<FormatId, AuthStyle>> = {
  "openai-chat": "bearer",
  "openai-responses": "bearer",
  anthropic: "x-api-key",
  gemini: "x-goog-api-key",
  ollama: "bearer"
}

/** Headers that authenticate the gateway to an upstream, per the provider's auth style. */
export const upstreamAuthHeaders = (style: AuthStyle, format: FormatId, apiKey: string | undefined): Record<string, string> => {
  const headers: Record<string, string> = {}
  if (apiKey) {
    // A connection speaking another family's format (a compatible server) authenticates the
    // way that family's SDK does.
    const effective = style === "none" ? style : (FORMAT_AUTH[format] ?? style)
    if (effective === "bearer") headers["authorization"] = `Bearer ${apiKey}`
    else if (effective === "x-api-key") headers["x-api-key"] = apiKey
    else if (effective === "x-goog-api-key") headers["x-goog-api-key"] = apiKey
  }
  if (format === "anthropic") headers["anthropic-version"] = ANTHROPIC_VERSION
  return headers
}

export const joinUrl = (base: string, path: string): string => base.replace(/\/+$/, "") + path

/** The key sent in exactly `style`'s header (a provider node says how, whatever its family). */
const styleHeaders = (style: AuthStyle, apiKey: string | undefined): Record<string, string> => {
  if (!apiKey || style === "none") return {}
  switch (style) {
    case "x-api-key":
      return { "x-api-key": apiKey }
    case "x-goog-api-key":
      return { "x-goog-api-key": apiKey }
    case "xi-api-key":
      return { "xi-api-key": apiKey }
    case "x-subscription-token":
      return { "x-subscription-token": apiKey }
    case "token":
      return { authorization: `Token ${apiKey}` }
    default:
      return { authorization: `Bearer ${apiKey}` }
  }
}

/**
 * The headers that authenticate a call to `provider` in `format`: `upstreamAuthHeaders` for a
 * catalog provider; for a provider node, its own auth style and then its default headers (an
 * operator's header wins over the gateway's).
 */
export const providerAuthHeaders = (provider: ProviderSpec, format: FormatId, apiKey: string | undefined): Record<string, string> => {
  if (provider.clientCompat)
    return { ...upstreamAuthHeaders(provider.authStyle, format, apiKey), ...compatHeaders(provider, apiKey, undefined) }
  if (!provider.node) return upstreamAuthHeaders(provider.authStyle, format, apiKey)
  const headers: Record<string, string> = styleHeaders(provider.authStyle, apiKey)
  if (format === "anthropic") headers["anthropic-version"] = ANTHROPIC_VERSION
  for (const [name, value] of Object.entries(provider.node.headers)) headers[name.toLowerCase()] = Redacted.value(value)
  return headers
}

/**
 * A client-compatible provider's own headers (`clientCompat`): the client's headers, a list header
 * (`anthropic-beta`) merged with the value a client sent, and the key also as a bearer token.
 */
export const compatHeaders = (
  provider: ProviderSpec,
  apiKey: string | undefined,
  forward: Readonly<Record<string, string>> | undefined
): Record<string, string> => {
  const compat = provider.clientCompat
  if (!compat) return {}
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(compat.headers)) headers[name] = mergeList(value, forward?.[name])
  if (compat.bearerToo && apiKey) headers["authorization"] = `Bearer ${apiKey}`
  return headers
}

/** `ours` with the client's comma-separated values it lacks appended (`anthropic-beta`). */
export const mergeList = (ours: string, client: string | undefined): string => {
  if (!client) return ours
  const have = new Set(ours.split(",").map((s) => s.trim()))
  const extra = client
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "" && !have.has(s))
  return extra.length === 0 ? ours : `${ours},${extra.join(",")}`
}
