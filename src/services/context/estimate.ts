/**
 * The prompt-size estimate compression decisions use: what compression can change, counted with o200k, or characters / 4
 * where a request path must not wait for the tokenizer to load (docs/compression.md#the-estimate).
 */
import type { FormatId } from "../../domain/canonical.js"
import { loadCounter, loadedCounter } from "../../upstream/formats/tokens.js"
import { segmentsOf } from "./walk.js"

type Body = Readonly<Record<string, unknown>>
type Counter = (text: string) => number

/** Characters per token of the approximation used before the tokenizer is loaded. */
const CHARS_PER_TOKEN = 4
const approximate: Counter = (text) => Math.ceil(text.length / CHARS_PER_TOKEN)

/** The tool definitions of a body as the JSON the model reads (`tools`, and chat's legacy `functions`). */
const toolsJson = (body: Body): string => {
  let out = ""
  for (const key of ["tools", "functions"]) {
    const v = body[key]
    if (Array.isArray(v) && v.length > 0) out += JSON.stringify(v)
  }
  return out
}

const count = (counter: Counter, format: FormatId, endpoint: string, body: Body): number => {
  let total = 0
  for (const { text } of segmentsOf(format, endpoint, body)) total += counter(text)
  const tools = toolsJson(body)
  return tools ? total + counter(tools) : total
}

/** Loads the o200k tokenizer (once; later calls answer at once). */
export const loadTokenizer = (): Promise<void> => loadCounter().then(() => undefined)

/** The prompt's tokens by the o200k tokenizer, loading it first if needed. */
export const estimateTokens = async (format: FormatId, endpoint: string, body: Body): Promise<number> =>
  count(await loadCounter(), format, endpoint, body)

/** The o200k counter when loaded; else the approximation, and the tokenizer starts loading for the next count. */
const counterNow = (): Counter => {
  const loaded = loadedCounter()
  if (loaded !== undefined) return loaded
  loadCounter().catch(() => undefined)
  return approximate
}

/** The prompt's tokens: by the o200k tokenizer when it is loaded, else characters / 4 (and it starts loading). Never waits. */
export const estimateTokensSync = (format: FormatId, endpoint: string, body: Body): number => count(counterNow(), format, endpoint, body)

/**
 * The prompt's tokens as characters / 4, whether or not the tokenizer is loaded: microseconds
 * where o200k takes milliseconds on a long agent request (bench/compression-walk.ts), for a
 * threshold check on the request path that needs only the order of magnitude.
 */
export const approximateTokens = (format: FormatId, endpoint: string, body: Body): number => count(approximate, format, endpoint, body)

/** Whether `estimateTokensSync` counts exactly (the tokenizer is loaded) or approximates. */
export const tokenizerLoaded = (): boolean => loadedCounter() !== undefined

/** Which tokenizer counts a target family's tokens, and whether it is that family's own. */
export interface TokenizerFamily {
  readonly tokenizer: "o200k"
  /** True when the count is the provider's own tokenizer (OpenAI); false when o200k approximates another. */
  readonly exact: boolean
  /** For display: `o200k` or `approximate (o200k)`. */
  readonly label: string
}

const EXACT: TokenizerFamily = { tokenizer: "o200k", exact: true, label: "o200k" }
const APPROXIMATE: TokenizerFamily = { tokenizer: "o200k", exact: false, label: "approximate (o200k)" }

/** Providers whose models use o200k (catalog ids, src/domain/catalog/catalog.ts). */
const O200K_PROVIDERS = new Set(["openai", "azure", "azure-openai"])

/**
 * The tokenizer for a target provider (a catalog id such as `openai`, `anthropic`, `gemini`).
 * Only o200k is installed: OpenAI's count is exact; Anthropic, Gemini and every other family
 * are counted with o200k too and labelled approximate (their own tokenizers are not public or
 * not installed; counts differ by some percent, the relative savings much less).
 */
export const tokenizerFamily = (provider: string): TokenizerFamily => (O200K_PROVIDERS.has(provider.toLowerCase()) ? EXACT : APPROXIMATE)

/** Tokens of one text: o200k when loaded, else characters / 4 (memory entries, skills, the savings counted off the request path). */
export const countText = (text: string): number => counterNow()(text)
