import type { FormatId } from "../formats/canonical.js"
import type { AuthStyle } from "../providers/catalog.js"

export const ANTHROPIC_VERSION = "2023-06-01"

const FORMAT_AUTH: Partial<Record<FormatId, AuthStyle>> = {
  "openai-chat": "bearer",
  "openai-responses": "bearer",
  anthropic: "x-api-key",
  gemini: "x-goog-api-key",
  ollama: "bearer"
}

/** Headers that authenticate the gateway to an upstream, per the provider's auth style. */
export const upstreamAuthHeaders = (
  style: AuthStyle,
  format: FormatId,
  apiKey: string | undefined
): Record<string, string> => {
  const headers: Record<string, string> = {}
  if (apiKey) {
    // A connection speaking another family's format (a compatible server) authenticates the
    // way that family's SDK does.
    const effective = style === "none" ? style : FORMAT_AUTH[format] ?? style
    if (effective === "bearer") headers["authorization"] = `Bearer ${apiKey}`
    else if (effective === "x-api-key") headers["x-api-key"] = apiKey
    else if (effective === "x-goog-api-key") headers["x-goog-api-key"] = apiKey
  }
  if (format === "anthropic") headers["anthropic-version"] = ANTHROPIC_VERSION
  return headers
}

export const joinUrl = (base: string, path: string): string => base.replace(/\/+$/, "") + path
