/**
 * The `claude-code-compatible` provider: a relay that serves only Claude Code, so every call carries what Claude Code sends
 * (docs/providers.md, "Claude Code compatible relays"). A connection can be created only while ENABLE_CC_COMPATIBLE_PROVIDER is on.
 */
import { chat, type ProviderSpec } from "./modelSpec.js"

export const CC_COMPATIBLE_PROVIDER_ID = "claude-code-compatible"

/** The Claude Code release whose headers the gateway sends. */
export const CLAUDE_CODE_VERSION = "2.0.14"

export const CLAUDE_CODE_PREAMBLE = "You are Claude Code, Anthropic's official CLI for Claude."

const VR = { vision: true, reasoning: true, pdf: true }

export const CC_COMPATIBLE_PROVIDER: ProviderSpec = {
  id: CC_COMPATIBLE_PROVIDER_ID,
  name: "Claude Code compatible (custom base URL)",
  format: "anthropic",
  baseUrl: null,
  authStyle: "x-api-key",
  authClass: "apikey",
  category: "custom",
  requiresApiKey: true,
  requiresBaseUrl: true,
  docsUrl: "https://docs.anthropic.com/en/docs/claude-code/settings#environment-variables",
  offers: ["chat"],
  clientCompat: {
    headers: {
      "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
      "anthropic-dangerous-direct-browser-access": "true",
      "x-app": "cli",
      "user-agent": `claude-cli/${CLAUDE_CODE_VERSION} (external, cli)`
    },
    bearerToo: true,
    systemPreamble: CLAUDE_CODE_PREAMBLE
  },
  models: [
    chat("claude-opus-4-1", "Claude Opus 4.1", 200_000, 32_000, 15, 75, VR, { cachedInput: 1.5 }),
    chat("claude-sonnet-4-5", "Claude Sonnet 4.5", 200_000, 64_000, 3, 15, VR, { cachedInput: 0.3 }),
    chat("claude-haiku-4-5", "Claude Haiku 4.5", 200_000, 64_000, 1, 5, VR, { cachedInput: 0.1 })
  ]
}
