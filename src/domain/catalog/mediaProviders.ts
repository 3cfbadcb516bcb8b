/**
 * The providers that serve no chat: speech, transcription and music (ElevenLabs, Deepgram),
 * rerank (Cohere, Jina, Voyage) and web search (Tavily, Brave, Exa, SearXNG, Serper). Part of
 * the catalog (src/domain/catalog/catalog.ts); their base URLs are bare origins, since their APIs'
 * paths carry their own versions. docs/media.md, docs/search.md.
 */
import { media, type ProviderSpec } from "./modelSpec.js"

export const MEDIA_PROVIDERS: ReadonlyArray<ProviderSpec> = [
  {
    id: "elevenlabs",
    name: "ElevenLabs",
    format: "openai-chat",
    baseUrl: "https://api.elevenlabs.io",
    authStyle: "xi-api-key",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://elevenlabs.io/docs/api-reference",
    offers: ["speech", "music", "transcription"],
    models: [
      media("eleven_multilingual_v2", "Eleven Multilingual v2", "speech", { perCharacter: 0.0001 }),
      media("eleven_flash_v2_5", "Eleven Flash v2.5", "speech", { perCharacter: 0.00005 }),
      media("eleven_turbo_v2_5", "Eleven Turbo v2.5", "speech", { perCharacter: 0.00005 }),
      media("eleven_v3", "Eleven v3", "speech", { perCharacter: 0.0001 }),
      media("music_v1", "Eleven Music", "music"),
      media("scribe_v1", "Scribe v1", "transcription")
    ]
  },
  {
    id: "deepgram",
    name: "Deepgram",
    format: "openai-chat",
    baseUrl: "https://api.deepgram.com",
    authStyle: "token",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://developers.deepgram.com/reference",
    offers: ["transcription", "speech"],
    models: [
      media("nova-3", "Nova-3", "transcription", { perSecond: 0.0043 / 60 }),
      media("aura-2-thalia-en", "Aura 2 (Thalia)", "speech", { perCharacter: 0.00003 })
    ]
  },
  {
    id: "cohere",
    name: "Cohere",
    format: "openai-chat",
    baseUrl: "https://api.cohere.com",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.cohere.com/reference",
    offers: ["rerank"],
    // One search unit = one query with up to 100 documents. $2 per 1k searches for 3.5 (unverified);
    // Rerank 4 has no pay-as-you-go price published (Model Vault only): unpriced until set in /api/pricing.
    models: [
      media("rerank-v3.5", "Rerank 3.5", "rerank", { perSearch: 0.002 }),
      media("rerank-v4.0-pro", "Rerank 4 Pro", "rerank"),
      media("rerank-v4.0-fast", "Rerank 4 Fast", "rerank")
    ]
  },
  {
    id: "jina",
    name: "Jina AI",
    format: "openai-chat",
    baseUrl: "https://api.jina.ai",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://jina.ai/reranker/",
    offers: ["rerank"],
    // Billed per token from prepaid packages (no unit price confirmed): unpriced until set in /api/pricing.
    models: [
      media("jina-reranker-v2-base-multilingual", "Jina Reranker v2", "rerank"),
      media("jina-reranker-v3", "Jina Reranker v3", "rerank"),
      media("jina-reranker-m0", "Jina Reranker m0", "rerank")
    ]
  },
  {
    id: "voyage",
    name: "Voyage AI",
    format: "openai-chat",
    baseUrl: "https://api.voyageai.com",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.voyageai.com/reference",
    offers: ["rerank"],
    // Per 1M tokens of query and documents (unverified; the first 200M tokens are free).
    models: [
      media("rerank-2.5", "Voyage Rerank 2.5", "rerank", { input: 0.05 }),
      media("rerank-2.5-lite", "Voyage Rerank 2.5 Lite", "rerank", { input: 0.02 })
    ]
  },
  // ---------------------------------------------------------------- web search (docs/search.md)
  // One pseudo-model each, `search`, so the router plans `<connection>/search` like any model.
  // Prices per search unit, from the vendors' pricing pages as read when this was written (unverified).
  {
    id: "tavily",
    name: "Tavily",
    format: "openai-chat",
    baseUrl: "https://api.tavily.com",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.tavily.com/documentation/api-reference/endpoint/search",
    offers: ["search"],
    // $0.008 per API credit pay-as-you-go; a basic search is 1 credit, an advanced one 2.
    models: [media("search", "Tavily Search", "search", { perSearch: 0.008 })]
  },
  {
    id: "brave",
    name: "Brave Search",
    format: "openai-chat",
    baseUrl: "https://api.search.brave.com",
    authStyle: "x-subscription-token",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://api-dashboard.search.brave.com/app/documentation/web-search/get-started",
    offers: ["search"],
    // $5 per 1,000 requests.
    models: [media("search", "Brave Web Search", "search", { perSearch: 0.005 })]
  },
  {
    id: "exa",
    name: "Exa",
    format: "openai-chat",
    baseUrl: "https://api.exa.ai",
    authStyle: "x-api-key",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.exa.ai/reference/search",
    offers: ["search"],
    // $5 per 1,000 searches of up to 25 results (page text billed apart by Exa: not counted here).
    models: [media("search", "Exa Search", "search", { perSearch: 0.005 })]
  },
  {
    id: "searxng",
    name: "SearXNG (self-hosted)",
    format: "openai-chat",
    baseUrl: null,
    authStyle: "none",
    authClass: "local",
    // Not "local": a local provider may be picked as the budget's free emergency chat model.
    category: "custom",
    requiresApiKey: false,
    requiresBaseUrl: true,
    docsUrl: "https://docs.searxng.org/dev/search_api.html",
    offers: ["search"],
    models: [media("search", "SearXNG", "search")]
  },
  {
    id: "serper",
    name: "Serper (Google results)",
    format: "openai-chat",
    baseUrl: "https://google.serper.dev",
    authStyle: "x-api-key",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://serper.dev/",
    offers: ["search"],
    // About $1 per 1,000 queries (prepaid credit packs; one credit a query of up to 10 results).
    models: [media("search", "Serper Search", "search", { perSearch: 0.001 })]
  }
]
