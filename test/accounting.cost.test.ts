import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { blendedPrice, formatCost, imagePrice, mediaCost, responseCost, tokenCost } from "../src/services/accounting/cost.js"
import { catalogPrice, effectivePrice, Pricing } from "../src/services/accounting/Pricing.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { usageFromAnthropic } from "../src/upstream/formats/anthropic.js"
import { usageFromGemini } from "../src/upstream/formats/gemini.js"
import { usageFromOpenAi } from "../src/upstream/formats/openai-chat.js"
import * as Db from "../src/platform/store/Db.js"
import { StoreVersion } from "../src/platform/store/StoreVersion.js"
import { tempDir } from "./support/gateway.js"

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
const dbAt = (dataDir: string) => Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir })), Layer.provide(quiet))
const pricingLayer = () =>
  Pricing.layer.pipe(Layer.provide(StoreVersion.layer()), Layer.provideMerge(dbAt(tempDir())), Layer.provide(quiet))

const SONNET = { input: 3, output: 15, cachedInput: 0.3 }

describe("tokenCost", () => {
  it("1,000 input at $3/M + 500 output at $15/M = $0.0105", () => {
    expect(tokenCost({ input: 3, output: 15 }, { inputTokens: 1000, outputTokens: 500 })).toBeCloseTo(0.0105, 15)
  })

  it("400 of the 1,000 input tokens cached at $0.30/M: 600×3 + 400×0.3 + 500×15 = $0.00942", () => {
    expect(tokenCost(SONNET, { inputTokens: 1000, cachedInputTokens: 400, outputTokens: 500 })).toBeCloseTo(0.00942, 15)
  })

  it("cached tokens without a cached price cost the input price", () => {
    expect(tokenCost({ input: 3, output: 15 }, { inputTokens: 1000, cachedInputTokens: 400, outputTokens: 500 })).toBeCloseTo(0.0105, 15)
  })

  it("Anthropic usage: cache reads and writes are folded into inputTokens by the decoder and priced once each; writes at 1.25× input", () => {
    const usage = usageFromAnthropic({
      input_tokens: 100,
      cache_read_input_tokens: 400,
      cache_creation_input_tokens: 1000,
      output_tokens: 500
    })
    expect(usage).toEqual({ inputTokens: 1500, outputTokens: 500, cachedInputTokens: 400, cacheCreationTokens: 1000 })
    // 100×3 + 400×0.3 + 1000×3.75 + 500×15 = 300 + 120 + 3750 + 7500 = 11670 micro-USD
    expect(tokenCost(SONNET, usage)).toBeCloseTo(0.01167, 15)
    // An explicit cache-write price wins over the 1.25× default: 300 + 120 + 6000 + 7500
    expect(tokenCost({ ...SONNET, cacheWrite: 6 }, usage)).toBeCloseTo(0.01392, 15)
  })

  it("reasoning tokens are part of output tokens and are not added twice (OpenAI, Gemini)", () => {
    const openai = usageFromOpenAi({ prompt_tokens: 1000, completion_tokens: 500, completion_tokens_details: { reasoning_tokens: 300 } })
    expect(openai).toEqual({ inputTokens: 1000, outputTokens: 500, reasoningTokens: 300 })
    expect(tokenCost({ input: 3, output: 15 }, openai)).toBeCloseTo(0.0105, 15)
    const gemini = usageFromGemini({ promptTokenCount: 1000, candidatesTokenCount: 200, thoughtsTokenCount: 300 })
    expect(gemini?.outputTokens).toBe(500)
    expect(tokenCost({ input: 3, output: 15 }, gemini)).toBeCloseTo(0.0105, 15)
  })

  it("unpriced, no usage, or a free model cost 0", () => {
    expect(tokenCost(undefined, { inputTokens: 1000, outputTokens: 500 })).toBe(0)
    expect(tokenCost(SONNET, undefined)).toBe(0)
    expect(tokenCost({ input: 0, output: 0 }, { inputTokens: 1000, outputTokens: 500 })).toBe(0)
    expect(tokenCost(SONNET, { outputTokens: 1000 })).toBeCloseTo(0.015, 15)
  })

  it("an override of one field keeps the other catalog fields", () => {
    const price = effectivePrice(catalogPrice("anthropic", "claude-sonnet-4-5"), { output: 10 })
    expect(price).toEqual({ input: 3, output: 10, cachedInput: 0.3 })
    // 1000×3 + 500×10 = 8000 micro-USD
    expect(tokenCost(price, { inputTokens: 1000, outputTokens: 500 })).toBeCloseTo(0.008, 15)
    expect(effectivePrice(undefined, undefined)).toBeUndefined()
    expect(effectivePrice(undefined, { perImage: 0.04 })).toEqual({ input: 0, output: 0, perImage: 0.04 })
  })
})

describe("mediaCost", () => {
  const price = { input: 0, output: 0, perImage: 0.04, perSecond: 0.006, perCharacter: 0.000015, perSearch: 0.002 }
  it("per modality: unit price × units", () => {
    expect(mediaCost(price, { images: 3 })).toBeCloseTo(0.12, 15)
    expect(mediaCost(price, { seconds: 90 })).toBeCloseTo(0.54, 15)
    expect(mediaCost(price, { characters: 1000 })).toBeCloseTo(0.015, 15)
    expect(mediaCost(price, { searches: 5 })).toBeCloseTo(0.01, 15)
    expect(mediaCost(price, { images: 1, searches: 1 })).toBeCloseTo(0.042, 15)
  })
  it("an unpriced modality or model costs 0", () => {
    expect(mediaCost({ input: 1, output: 1 }, { images: 3, seconds: 10 })).toBe(0)
    expect(mediaCost(undefined, { images: 3 })).toBe(0)
    expect(mediaCost({ input: 0, output: 0, perImage: 0.04 }, { seconds: 10 })).toBe(0)
  })
  it("responseCost adds tokens and media", () => {
    // Prompt tokens by the token, the image by the image: 1000 × $3/1M + $0.04.
    expect(responseCost({ input: 3, output: 0, perImage: 0.04 }, { inputTokens: 1000, outputTokens: 500 }, { images: 1 })).toBeCloseTo(
      0.043,
      15
    )
    expect(responseCost({ input: 3, output: 15, perSecond: 0.01 }, { inputTokens: 1000, outputTokens: 500 }, { seconds: 2 })).toBeCloseTo(
      0.0305,
      15
    )
  })
  it("images reported as output tokens of a model with an output token price (gpt-image) are not charged again per image", () => {
    const gptImage = { input: 5, output: 30, perImage: 0.053, perImageBy: { "high:1024x1024": 0.211 } }
    // 50 × 5 + 1056 × 30 micro-USD, no per-image price on top.
    expect(
      responseCost(gptImage, { inputTokens: 50, outputTokens: 1056 }, { images: 1, imageKeys: ["high:1024x1024", "high"] })
    ).toBeCloseTo(0.03193, 15)
    // No usage reported: per image, by quality and size.
    expect(responseCost(gptImage, undefined, { images: 2, imageKeys: ["high:1024x1024", "high"] })).toBeCloseTo(0.422, 15)
  })
  it("per image by kind: the first of the answer's keys in perImageBy, else perImage", () => {
    const price = { input: 0, output: 0, perImage: 0.134, perImageBy: { "4K": 0.24, high: 0.2 } }
    expect(imagePrice(price, ["4K"])).toBe(0.24)
    expect(imagePrice(price, ["high:1024x1024", "high"])).toBe(0.2)
    expect(imagePrice(price, ["1K"])).toBe(0.134)
    expect(imagePrice(price)).toBe(0.134)
    expect(mediaCost(price, { images: 2, imageKeys: ["4K"] })).toBeCloseTo(0.48, 15)
  })
  it("the catalog's per-kind table is kept under field overrides, and dropped when an override sets perImage", () => {
    const catalog = catalogPrice("openai", "gpt-image-2")!
    expect(catalog.perImageBy?.["high:1024x1024"]).toBe(0.211)
    expect(effectivePrice(catalog, { output: 20 })?.perImageBy).toEqual(catalog.perImageBy)
    const flat = effectivePrice(catalog, { perImage: 0.1 })!
    expect(flat.perImageBy).toBeUndefined()
    expect(mediaCost(flat, { images: 2, imageKeys: ["high:1024x1024"] })).toBeCloseTo(0.2, 15)
  })
})

describe("blendedPrice and formatCost", () => {
  it("blended = 0.6 × input + 0.4 × output", () => {
    expect(blendedPrice({ input: 3, output: 15 })).toBeCloseTo(7.8, 12)
    expect(blendedPrice({ input: 0, output: 0 })).toBe(0)
  })
  it("fixed 10 decimals, never negative, never exponent notation", () => {
    expect(formatCost(0)).toBe("0.0000000000")
    expect(formatCost(0.0105)).toBe("0.0105000000")
    expect(formatCost(1e-11)).toBe("0.0000000000")
    expect(formatCost(5e-10)).toBe("0.0000000005")
    expect(formatCost(1e-7)).toBe("0.0000001000")
    expect(formatCost(123456.789)).toBe("123456.7890000000")
    expect(formatCost(1e21)).toBe("1000000000000000000000.0000000000")
    expect(formatCost(-0.5)).toBe("0.0000000000")
    expect(formatCost(-1e-12)).toBe("0.0000000000")
    expect(formatCost(Number.NaN)).toBe("0.0000000000")
    expect(formatCost(Number.POSITIVE_INFINITY)).toBe("0.0000000000")
  })
})

describe("Pricing service", () => {
  it.effect("catalog prices by exact model id; unknown provider or model: undefined", () =>
    Effect.gen(function* () {
      const pricing = yield* Pricing
      expect(pricing.priceOf("anthropic", "claude-sonnet-4-5")).toEqual({ input: 3, output: 15, cachedInput: 0.3 })
      expect(pricing.priceOf("openrouter", "openai/gpt-4o-mini")).toEqual({ input: 0.15, output: 0.6 })
      expect(pricing.priceOf("anthropic", "claude-sonnet")).toBeUndefined()
      expect(pricing.priceOf("nowhere", "gpt-4o")).toBeUndefined()
      const rows = yield* pricing.list
      expect(rows.find((r) => r.provider === "openai" && r.model === "text-embedding-3-small")).toMatchObject({
        kind: "embedding",
        input: 0.02,
        output: 0,
        source: "catalog"
      })
      expect(rows.every((r) => r.source === "catalog")).toBe(true)
    }).pipe(Effect.provide(pricingLayer()))
  )

  it.effect("an override wins field by field; overrides of unknown models are listed; remove restores the catalog", () =>
    Effect.gen(function* () {
      const pricing = yield* Pricing
      const row = yield* pricing.setOverride({ provider: "Anthropic", model: "claude-sonnet-4-5", output: 10 })
      expect(row).toMatchObject({
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        input: 3,
        output: 10,
        cachedInput: 0.3,
        cacheWrite: null,
        source: "catalog+override"
      })
      expect(pricing.priceOf("anthropic", "claude-sonnet-4-5")).toEqual({ input: 3, output: 10, cachedInput: 0.3 })
      expect(tokenCost(pricing.priceOf("anthropic", "claude-sonnet-4-5"), { inputTokens: 1000, outputTokens: 500 })).toBeCloseTo(0.008, 15)

      const img = yield* pricing.setOverride({ provider: "openai-compatible", model: "my-image-model", perImage: 0.04 })
      expect(img).toMatchObject({ kind: null, input: 0, output: 0, perImage: 0.04, source: "override" })
      expect(mediaCost(pricing.priceOf("openai-compatible", "my-image-model"), { images: 2 })).toBeCloseTo(0.08, 15)
      const rows = yield* pricing.list
      expect(rows.filter((r) => r.source !== "catalog").map((r) => `${r.provider}/${r.model}:${r.source}`)).toEqual([
        "anthropic/claude-sonnet-4-5:catalog+override",
        "openai-compatible/my-image-model:override"
      ])

      // PUT replaces the whole override: output is no longer overridden.
      yield* pricing.setOverride({ provider: "anthropic", model: "claude-sonnet-4-5", cacheWrite: 4 })
      expect(pricing.priceOf("anthropic", "claude-sonnet-4-5")).toEqual({ input: 3, output: 15, cachedInput: 0.3, cacheWrite: 4 })

      expect(yield* pricing.removeOverride("anthropic", "claude-sonnet-4-5")).toBe(true)
      expect(yield* pricing.removeOverride("anthropic", "claude-sonnet-4-5")).toBe(false)
      expect(pricing.priceOf("anthropic", "claude-sonnet-4-5")).toEqual({ input: 3, output: 15, cachedInput: 0.3 })
    }).pipe(Effect.provide(pricingLayer()))
  )

  it.effect("override validation: 400 messages", () =>
    Effect.gen(function* () {
      const pricing = yield* Pricing
      const message = (input: unknown) => Effect.map(Effect.flip(pricing.setOverride(input)), (e) => `${e._tag}: ${e.message}`)
      expect(yield* message({ provider: "openai", model: "gpt-4o" })).toBe(
        "BadRequest: set at least one price: input, output, cachedInput, cacheWrite, perImage, perSecond, perCharacter, perSearch"
      )
      expect(yield* message({ provider: "openai", model: "gpt-4o", input: -1 })).toBe(
        "BadRequest: input: input must be a non-negative number of USD per 1M tokens"
      )
      expect(yield* message({ provider: "nope", model: "gpt-4o", input: 1 })).toMatch(
        /^BadRequest: provider: provider 'nope' is not a known provider id; known: openai, anthropic/
      )
      expect(yield* message({ provider: "openai", model: "gpt-4o", inputPrice: 1 })).toMatch(/^BadRequest: inputPrice: is unexpected/)
      expect(yield* message({ provider: "openai", model: " ", input: 1 })).toBe("BadRequest: model: model must not be empty")
    }).pipe(Effect.provide(pricingLayer()))
  )
})
