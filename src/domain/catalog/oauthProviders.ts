/**
 * The providers whose accounts sign in with OAuth (Claude, Qwen), with the vendors' public endpoints and client ids; every URL can be
 * overridden, see `oauthEndpoints` (docs/operations.md, "OAuth connections").
 */
import { chat, type ProviderSpec } from "./modelSpec.js"

const VR = { vision: true, reasoning: true, pdf: true }

export const OAUTH_PROVIDERS: ReadonlyArray<ProviderSpec> = [
  {
    id: "claude-code",
    name: "Claude (subscription, OAuth)",
    format: "anthropic",
    baseUrl: "https://api.anthropic.com",
    authStyle: "bearer",
    authClass: "oauth",
    category: "cloud",
    requiresApiKey: false,
    requiresBaseUrl: false,
    docsUrl: "https://docs.anthropic.com/en/docs/claude-code",
    offers: ["chat"],
    oauth: {
      authorizeUrl: "https://claude.ai/oauth/authorize",
      tokenUrl: "https://console.anthropic.com/v1/oauth/token",
      clientId: "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
      scopes: ["org:create_api_key", "user:profile", "user:inference"],
      flows: ["pkce"],
      redirectUri: "https://console.anthropic.com/oauth/code/callback",
      authorizeParams: { code: "true" },
      tokenRequest: "json",
      tokenUse: "bearer",
      upstreamHeaders: { "anthropic-beta": "oauth-2025-04-20" }
    },
    // Served by the subscription: API-equivalent prices, so usage rows show what it would cost.
    models: [
      chat("claude-opus-4-1", "Claude Opus 4.1", 200_000, 32_000, 15, 75, VR, { cachedInput: 1.5 }),
      chat("claude-sonnet-4-5", "Claude Sonnet 4.5", 200_000, 64_000, 3, 15, VR, { cachedInput: 0.3 }),
      chat("claude-haiku-4-5", "Claude Haiku 4.5", 200_000, 64_000, 1, 5, VR, { cachedInput: 0.1 })
    ]
  },
  {
    id: "qwen",
    name: "Qwen (qwen.ai account, OAuth)",
    format: "openai-chat",
    baseUrl: "https://portal.qwen.ai/v1",
    authStyle: "bearer",
    authClass: "oauth",
    category: "cloud",
    requiresApiKey: false,
    requiresBaseUrl: false,
    docsUrl: "https://github.com/QwenLM/qwen-code",
    offers: ["chat"],
    oauth: {
      tokenUrl: "https://chat.qwen.ai/api/v1/oauth2/token",
      deviceAuthorizationUrl: "https://chat.qwen.ai/api/v1/oauth2/device/code",
      clientId: "f0304373b74a44d2b584a3fb70ca9e56",
      scopes: ["openid", "profile", "email", "model.completion"],
      flows: ["device"],
      devicePkce: true,
      tokenRequest: "form",
      tokenUse: "bearer"
    },
    // The qwen.ai free tier (a daily request quota, no per-token price).
    models: [
      chat("qwen3-coder-plus", "Qwen3 Coder Plus", 1_000_000, 65_536, 0, 0),
      chat("qwen3-coder-flash", "Qwen3 Coder Flash", 1_000_000, 65_536, 0, 0)
    ]
  }
]
