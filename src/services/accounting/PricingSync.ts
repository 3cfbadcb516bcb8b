/**
 * The pricing sync: a periodic download of a public price list, applied as the `synced` price layer; it runs only when
 * the `PRICING_SYNC_ENABLED` flag AND the same-named environment variable are both on (docs/accounting.md#pricing-sync).
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { backgroundJob } from "../../platform/flags/background.js"
import { isTruthy } from "../../platform/flags/catalog.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { findProvider, type ModelPricing } from "../../domain/catalog/catalog.js"
import { periodic } from "../../platform/system/periodic.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { Pricing, type SyncedPrice } from "./Pricing.js"

export const DEFAULT_PRICING_SYNC_URL = "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json"

const SyncConfig = Config.all({
  url: Config.string("GATEWAY_PRICING_SYNC_URL").pipe(Config.withDefault(DEFAULT_PRICING_SYNC_URL)),
  seconds: Config.number("GATEWAY_PRICING_SYNC_INTERVAL_SECONDS").pipe(Config.withDefault(86_400)),
  /** The same-named environment variable, read apart from the flag (the flag's own value may come from the database). */
  envSwitch: Config.option(Config.string("PRICING_SYNC_ENABLED"))
})

/** LiteLLM's provider names that differ from this catalog's ids (others are taken as they are when the catalog has them). */
const LITELLM_PROVIDERS: Readonly<Record<string, string>> = {
  together_ai: "together",
  fireworks_ai: "fireworks",
  "vertex_ai-language-models": "gemini",
  cohere_chat: "cohere",
  text_completion_openai: "openai"
}

const perMillion = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.round(v * 1e6 * 1e6) / 1e6 : undefined
const plain = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined)

/**
 * The prices a LiteLLM-shaped list gives for models of providers this catalog knows, per 1M tokens
 * (its figures are per token). A key `<provider>/<model>` names the model without the prefix.
 */
export const parseLiteLlmPrices = (json: unknown): ReadonlyArray<SyncedPrice> => {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return []
  const out: Array<SyncedPrice> = []
  for (const [key, raw] of Object.entries(json as Record<string, unknown>)) {
    if (key === "sample_spec" || raw === null || typeof raw !== "object") continue
    const e = raw as Record<string, unknown>
    const litellm = typeof e["litellm_provider"] === "string" ? e["litellm_provider"] : undefined
    if (!litellm) continue
    const provider = findProvider(LITELLM_PROVIDERS[litellm] ?? litellm)?.id
    if (!provider) continue
    const model = key.startsWith(`${litellm}/`) ? key.slice(litellm.length + 1) : key
    const fields: Record<string, number> = {}
    const set = (name: keyof ModelPricing, v: number | undefined) => {
      if (v !== undefined) fields[name] = v
    }
    set("input", perMillion(e["input_cost_per_token"]))
    set("output", perMillion(e["output_cost_per_token"]))
    set("cachedInput", perMillion(e["cache_read_input_token_cost"]))
    set("perImage", plain(e["output_cost_per_image"]))
    set("perCharacter", plain(e["input_cost_per_character"]))
    set("perSecond", plain(e["output_cost_per_second"]))
    if (Object.keys(fields).length > 0) out.push({ provider, model, fields: fields as Partial<ModelPricing> })
  }
  return out
}

const retry = Schedule.exponential("500 millis").pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(3)))

export const PricingSync = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* SyncConfig.pipe(Effect.orDie)
    if (config.seconds <= 0) return
    if (!(yield* backgroundJob("pricing sync"))) return
    const flags = yield* FeatureFlags
    const pricing = yield* Pricing
    const http = yield* UpstreamHttp
    const envOn = Option.match(config.envSwitch, { onNone: () => false, onSome: isTruthy })

    const download = http
      .request({
        url: config.url,
        method: "GET",
        headers: { accept: "application/json", "user-agent": http.userAgent },
        headersTimeout: Duration.seconds(30),
        readWhole: true,
        maxBodyBytes: 64 * 1024 * 1024
      })
      .pipe(
        Effect.flatMap((res) =>
          res.status >= 200 && res.status < 300
            ? Effect.succeed(res.bytes?.toString("utf8") ?? "")
            : Effect.fail(new Error(`HTTP ${res.status}`))
        ),
        Effect.timeout(Duration.seconds(30)),
        Effect.retry(retry)
      )

    const round = Effect.gen(function* () {
      if (!envOn || !(yield* flags.enabled("PRICING_SYNC_ENABLED"))) return
      const text = yield* Effect.either(download)
      if (text._tag === "Left")
        return yield* Effect.logWarning(`pricing sync: ${config.url} could not be read (${text.left.message}); the last synced prices stay`)
      let json: unknown
      try {
        json = JSON.parse(text.right)
      } catch {
        return yield* Effect.logWarning(`pricing sync: ${config.url} did not answer JSON; the last synced prices stay`)
      }
      const prices = parseLiteLlmPrices(json)
      if (prices.length === 0)
        return yield* Effect.logWarning(`pricing sync: ${config.url} listed no price of a known provider; the last synced prices stay`)
      yield* pricing.setSynced(prices)
      yield* Effect.logInfo(`pricing sync: ${prices.length} prices from ${config.url}`)
    })

    yield* periodic("pricing sync", config.seconds, round, { immediately: true })
  })
)
