import type { AuthStyle, WireFormat } from "../providers/catalog.js"

export const ANTHROPIC_VERSION = "2023-06-01"

/** Headers that authenticate the gateway to an upstream, per the provider's auth style. */
export const upstreamAuthHeaders = (
  style: AuthStyle,
  format: WireFormat,
  apiKey: string | undefined
): Record<string, string> => {
  const headers: Record<string, string> = {}
  if (apiKey) {
    if (style === "bearer") headers["authorization"] = `Bearer ${apiKey}`
    else if (style === "x-api-key") headers["x-api-key"] = apiKey
    else if (style === "x-goog-api-key") headers["x-goog-api-key"] = apiKey
  }
  if (format === "anthropic") headers["anthropic-version"] = ANTHROPIC_VERSION
  return headers
}

export const joinUrl = (base: string, path: string): string => base.replace(/\/+$/, "") + path
