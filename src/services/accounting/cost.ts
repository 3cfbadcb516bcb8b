import type { Usage } from "../../domain/canonical.js"

/**
 * Cost arithmetic (pure): token prices per 1M tokens, media prices per unit. Canonical `inputTokens` includes cache
 * reads and writes, `outputTokens` includes reasoning (per format: docs/accounting.md#pricing-and-cost).
 */

export interface ModelPrice {
  /** USD per 1M uncached input tokens. */
  readonly input: number
  /** USD per 1M output tokens (reasoning included). */
  readonly output: number
  /** USD per 1M input tokens read from the prompt cache; default `input`. */
  readonly cachedInput?: number
  /** USD per 1M input tokens written to the prompt cache; default `input × 1.25`. */
  readonly cacheWrite?: number
  /** USD per generated image. */
  readonly perImage?: number
  /**
   * USD per generated image by kind of image (`"high:1024x1024"`, `"low"`, `"4K"`): the first of
   * the answer's `imageKeys` found here wins over `perImage`. Catalog only: an override's
   * `perImage` replaces the whole table (Pricing.effectivePrice).
   */
  readonly perImageBy?: Readonly<Record<string, number>>
  /** USD per second of audio or video. */
  readonly perSecond?: number
  /** USD per character (speech synthesis). */
  readonly perCharacter?: number
  /** USD per search unit (rerank, web search). */
  readonly perSearch?: number
}

export interface MediaUnits {
  readonly images?: number
  /**
   * What kind of image they were, most specific first (`["high:1024x1024", "high"]` for OpenAI's
   * quality and size, `["4K"]` for Gemini's image size): looked up in `perImageBy`.
   */
  readonly imageKeys?: ReadonlyArray<string>
  readonly seconds?: number
  readonly characters?: number
  readonly searches?: number
}

/** Anthropic's published cache-write premium, used when no `cacheWrite` price is set. */
export const CACHE_WRITE_MULTIPLIER = 1.25

const count = (n: number | undefined): number => (n !== undefined && Number.isFinite(n) && n > 0 ? n : 0)
const rate = (n: number | undefined): number | undefined => (n !== undefined && Number.isFinite(n) && n >= 0 ? n : undefined)

/**
 * USD for the tokens of one response. Unpriced (`price` undefined) or no usage: 0.
 * `(uncached × input + cached × (cachedInput ?? input) + cacheWrite × (cacheWrite ?? 1.25 × input) + output × output) / 1e6`.
 */
export const tokenCost = (price: ModelPrice | undefined, usage: Partial<Usage> | undefined): number => {
  if (!price || !usage) return 0
  const input = rate(price.input) ?? 0
  const output = rate(price.output) ?? 0
  const cached = count(usage.cachedInputTokens)
  const written = count(usage.cacheCreationTokens)
  const uncached = Math.max(0, count(usage.inputTokens) - cached - written)
  const micro =
    uncached * input +
    cached * (rate(price.cachedInput) ?? input) +
    written * (rate(price.cacheWrite) ?? input * CACHE_WRITE_MULTIPLIER) +
    count(usage.outputTokens) * output
  return micro / 1e6
}

/** USD of one image of the kind `keys` name: the first key in `perImageBy`, else `perImage`. */
export const imagePrice = (price: ModelPrice, keys: ReadonlyArray<string> = []): number => {
  for (const k of keys) {
    const v = rate(price.perImageBy?.[k])
    if (v !== undefined) return v
  }
  return rate(price.perImage) ?? 0
}

/**
 * Whether an answer's images were paid for as output tokens: the upstream reported output tokens
 * and the model has an output token price (gpt-image: image output $30/1M). They are then not
 * priced again per image. A model with per-image prices and only an input token price (prompt
 * tokens) pays both: its prompt by the token, its images by the image.
 */
const imagesInTokens = (price: ModelPrice, usage: Partial<Usage> | undefined): boolean =>
  count(usage?.outputTokens) > 0 && (rate(price.output) ?? 0) > 0

/**
 * USD for media units: the sum of `unit price × units` over the priced modalities; unpriced: 0.
 * Images are priced per image (`imagePrice`) unless `usage` shows they were priced per token.
 */
export const mediaCost = (price: ModelPrice | undefined, units: MediaUnits, usage?: Partial<Usage>): number => {
  if (!price) return 0
  return (
    (imagesInTokens(price, usage) ? 0 : count(units.images) * imagePrice(price, units.imageKeys)) +
    count(units.seconds) * (rate(price.perSecond) ?? 0) +
    count(units.characters) * (rate(price.perCharacter) ?? 0) +
    count(units.searches) * (rate(price.perSearch) ?? 0)
  )
}

/** Tokens and media of one response together. */
export const responseCost = (price: ModelPrice | undefined, usage: Partial<Usage> | undefined, units: MediaUnits = {}): number =>
  tokenCost(price, usage) + mediaCost(price, units, usage)

/** One number per model for ranking (auto routing's `costPer1MTokens`): 60% input, 40% output. */
export const blendedPrice = (price: Pick<ModelPrice, "input" | "output">): number => 0.6 * price.input + 0.4 * price.output

/**
 * USD as `X-Gateway-Response-Cost` shows it: fixed 10 decimals, `0.0000000000` for zero,
 * negative or non-finite values, never exponent notation.
 */
export const formatCost = (usd: number): string => {
  if (!Number.isFinite(usd) || usd <= 0) return "0.0000000000"
  // toFixed switches to exponent notation from 1e21 on; such numbers are integers anyway.
  if (usd >= 1e21) return `${BigInt(Math.round(usd)).toString()}.0000000000`
  return usd.toFixed(10)
}
