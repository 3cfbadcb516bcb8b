import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { decodeSetPrice, PRICE_FIELDS, type PriceField, type PriceRow, type PriceSource } from "../../domain/accounting.js"
import type { BadRequest } from "../../domain/errors.js"
import { findProvider, type ModelPricing, PROVIDERS } from "../../domain/catalog/catalog.js"
import { toIso } from "../../platform/store/Db.js"
import { upsert } from "../../platform/store/dialect.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import type { ModelPrice } from "./cost.js"
import { type Connection, Connections } from "../../upstream/providers/Connections.js"

/** A stored override: only the fields that were set. */
export interface PriceOverride {
  readonly provider: string
  readonly model: string
  readonly fields: Partial<Record<PriceField, number>>
  readonly updatedAt: number
}

export interface PricingShape {
  /**
   * The effective price of `model` at `provider` (a provider id), from the last loaded snapshot:
   * synchronous, no query. An override wins field by field over the catalog; unknown: undefined.
   */
  readonly priceOf: (provider: string, model: string) => ModelPrice | undefined
  /**
   * Brings the snapshot up to date. Cheap: it queries only when another process committed to the
   * database (`StoreVersion`, at most one check per second). The request path runs
   * it before `priceOf`; this process's own writes refresh it at once.
   */
  readonly refresh: Effect.Effect<void>
  /** `GET /api/pricing`: every catalog model (chat, embedding and media, each with its kind), then overrides of unknown models. */
  readonly list: Effect.Effect<ReadonlyArray<PriceRow>>
  /** `PUT /api/pricing`: decodes `SetPrice` and replaces the override of (provider, model). */
  readonly setOverride: (input: unknown) => Effect.Effect<PriceRow, BadRequest>
  /** `DELETE /api/pricing`: whether an override was removed. */
  readonly removeOverride: (provider: string, model: string) => Effect.Effect<boolean>
  /**
   * Replaces the synced price layer (the pricing sync): between the built-in catalog and the
   * overrides, below the custom models' own prices. In memory; an empty list removes it.
   */
  readonly setSynced: (prices: ReadonlyArray<SyncedPrice>) => Effect.Effect<void>
}

/** One synced price: the fields the price list gave for a provider's model (USD per 1M tokens, per image...). */
export interface SyncedPrice {
  readonly provider: string
  readonly model: string
  readonly fields: Partial<ModelPricing>
}

interface Row {
  readonly provider: string
  readonly model: string
  readonly input: number | null
  readonly output: number | null
  readonly cached_input: number | null
  readonly cache_write: number | null
  readonly per_image: number | null
  readonly per_second: number | null
  readonly per_character: number | null
  readonly per_search: number | null
  readonly updated_at: number
}

const COLUMN: Record<PriceField, keyof Row> = {
  input: "input",
  output: "output",
  cachedInput: "cached_input",
  cacheWrite: "cache_write",
  perImage: "per_image",
  perSecond: "per_second",
  perCharacter: "per_character",
  perSearch: "per_search"
}

/** Bounds of `priceOf`'s cache: providers, and models per provider. */
const PRICED_PROVIDERS = 256
const PRICED_MODELS = 1024

const keyOf = (provider: string, model: string) => `${provider.toLowerCase()}\u0000${model}`

/**
 * The price of a provider's model (exact model id): what the connections' specs say (the catalog
 * with the custom models and overrides of `/api/provider-models` applied, and the provider
 * nodes' models), else the provider catalog's. `specs` maps a provider id to its models' prices.
 */
export const catalogPrice = (
  provider: string,
  model: string,
  specs?: ReadonlyMap<string, ReadonlyMap<string, ModelPricing>>
): ModelPricing | undefined =>
  specs?.get(provider.toLowerCase())?.get(model) ?? findProvider(provider)?.models.find((m) => m.id === model)?.pricing

/**
 * Each provider's model prices as its connections see them (custom models and overrides applied;
 * a node's models), best priority first: a connection's own entry for a model counts when no
 * connection before it prices that model.
 */
export const connectionPrices = (all: ReadonlyArray<Connection>): Map<string, Map<string, ModelPricing>> => {
  const out = new Map<string, Map<string, ModelPricing>>()
  for (const c of [...all].sort((a, b) => Number(b.enabled) - Number(a.enabled) || a.priority - b.priority)) {
    const mine = out.get(c.provider.id) ?? new Map<string, ModelPricing>()
    for (const m of c.provider.models) if (!mine.has(m.id)) mine.set(m.id, m.pricing)
    out.set(c.provider.id, mine)
  }
  return out
}

/**
 * An override on top of the catalog, field by field. A model only an override knows starts
 * from input 0 and output 0.
 */
export const effectivePrice = (
  catalog: ModelPricing | undefined,
  override: Partial<Record<PriceField, number>> | undefined
): ModelPrice | undefined => {
  if (!catalog && !override) return undefined
  const base: Record<string, number> = { input: catalog?.input ?? 0, output: catalog?.output ?? 0 }
  if (catalog?.cachedInput !== undefined) base["cachedInput"] = catalog.cachedInput
  for (const f of ["perImage", "perSecond", "perCharacter", "perSearch"] as const) {
    const v = catalog?.[f]
    if (v !== undefined) base[f] = v
  }
  for (const f of PRICE_FIELDS) {
    const v = override?.[f]
    if (v !== undefined) base[f] = v
  }
  // The catalog's per-kind image prices, unless an override set one price per image for all.
  const byKind = override?.perImage === undefined ? catalog?.perImageBy : undefined
  return (byKind ? { ...base, perImageBy: byKind } : base) as unknown as ModelPrice
}

const fromRow = (row: Row): PriceOverride => {
  const fields: Partial<Record<PriceField, number>> = {}
  for (const f of PRICE_FIELDS) {
    const v = row[COLUMN[f]]
    if (typeof v === "number") fields[f] = v
  }
  return { provider: row.provider, model: row.model, fields, updatedAt: row.updated_at }
}

const toPriceRow = (
  provider: string,
  model: string,
  kind: string | null,
  price: ModelPrice,
  source: PriceSource,
  override: PriceOverride | undefined
): PriceRow => ({
  provider,
  model,
  kind,
  input: price.input,
  output: price.output,
  cachedInput: price.cachedInput ?? null,
  cacheWrite: price.cacheWrite ?? null,
  perImage: price.perImage ?? null,
  perSecond: price.perSecond ?? null,
  perCharacter: price.perCharacter ?? null,
  perSearch: price.perSearch ?? null,
  source,
  overrideUpdatedAt: toIso(override?.updatedAt)
})

/** Model prices: the catalog plus operator overrides (`pricing_overrides`), kept in memory. */
export class Pricing extends Context.Tag("gateway/Pricing")<Pricing, PricingShape>() {
  static readonly layer = Layer.effect(
    Pricing,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      // Custom models' and nodes' prices, from the connections snapshot (rebuilt when it changes).
      // Optional: Pricing built alone (unit tests) prices from the catalog and overrides only.
      const connections = Option.getOrUndefined(yield* Effect.serviceOption(Connections))
      let seenList: ReadonlyArray<Connection> | undefined
      let specs: ReadonlyMap<string, ReadonlyMap<string, ModelPricing>> = new Map()
      const currentSpecs = () => {
        // The list last loaded when it is not known fresh this instant: the request being priced
        // has just routed through it (a node or custom model added a moment ago is in it), while
        // the specs built before could predate it (a cost of 0 for the new node's model).
        const list = connections?.peekList() ?? connections?.lastList()
        if (list !== undefined && list !== seenList) {
          seenList = list
          specs = connectionPrices(list)
        }
        return specs
      }

      const loaded = makeCachedLoad(
        version,
        Effect.map(sql<Row>`SELECT * FROM pricing_overrides ORDER BY provider, model`.pipe(Effect.orDie), (rows) => {
          const all = rows.map(fromRow)
          return { all, byKey: new Map(all.map((o) => [keyOf(o.provider, o.model), o])) }
        })
      )
      let snapshot = yield* loaded.get
      const refresh = Effect.suspend(() => {
        if (connections && connections.peekList() === undefined) return Effect.zipRight(connections.list, refreshOverrides)
        return refreshOverrides
      })
      const refreshOverrides = Effect.suspend(() => {
        const fresh = loaded.peek()
        if (fresh !== undefined) {
          snapshot = fresh
          return Effect.void
        }
        return Effect.map(loaded.get, (s) => {
          snapshot = s
        })
      })

      let synced: ReadonlyMap<string, Partial<ModelPricing>> = new Map()

      /**
       * Below the overrides: a custom model's or a provider-models override's own price (a spec price
       * that is not the built-in one), else the synced price over the built-in one, else the built-in.
       */
      const basePrice = (provider: string, model: string): ModelPricing | undefined => {
        const builtin = findProvider(provider)?.models.find((m) => m.id === model)?.pricing
        const own = catalogPrice(provider, model, currentSpecs())
        if (own !== undefined && own !== builtin) return own
        if (synced.size > 0) {
          const s = synced.get(keyOf(provider, model))
          if (s !== undefined) return { ...(builtin ?? { input: 0, output: 0 }), ...s }
        }
        return builtin
      }

      const priceOfNow = (provider: string, model: string) =>
        effectivePrice(basePrice(provider, model), snapshot.byKey.get(keyOf(provider, model))?.fields)

      /**
       * Every request is priced: each (provider, model)'s price is kept until one of the layers it
       * comes from changes (the overrides' snapshot, the connections' specs, the synced prices),
       * instead of building it anew (keys, lookups and the price object) each time. Bounded: a
       * pass-through provider's models come from clients.
       */
      const priced = new Map<string, Map<string, ModelPrice | undefined>>()
      let pricedFrom: { snapshot: typeof snapshot; specs: typeof specs; synced: typeof synced } = { snapshot, specs, synced }
      const priceOf = (provider: string, model: string): ModelPrice | undefined => {
        const specsNow = currentSpecs()
        if (pricedFrom.snapshot !== snapshot || pricedFrom.specs !== specsNow || pricedFrom.synced !== synced) {
          priced.clear()
          pricedFrom = { snapshot, specs: specsNow, synced }
        }
        let byModel = priced.get(provider)
        if (byModel === undefined) {
          if (priced.size >= PRICED_PROVIDERS) priced.clear()
          byModel = new Map()
          priced.set(provider, byModel)
        }
        const known = byModel.get(model)
        if (known !== undefined || byModel.has(model)) return known
        const price = priceOfNow(provider, model)
        if (byModel.size < PRICED_MODELS) byModel.set(model, price)
        return price
      }

      const rowFor = (provider: string, model: string): PriceRow | undefined => {
        const spec = findProvider(provider)?.models.find((m) => m.id === model)
        const override = snapshot.byKey.get(keyOf(provider, model))
        const fromSync = synced.get(keyOf(provider, model))
        const base = fromSync && spec ? { ...spec.pricing, ...fromSync } : spec?.pricing
        const price = effectivePrice(base, override?.fields)
        if (!price) return undefined
        const source: PriceSource = spec
          ? fromSync
            ? override
              ? "synced+override"
              : "synced"
            : override
              ? "catalog+override"
              : "catalog"
          : "override"
        return toPriceRow(findProvider(provider)?.id ?? provider, model, spec?.kind ?? null, price, source, override)
      }

      const setSynced = (prices: ReadonlyArray<SyncedPrice>) =>
        Effect.sync(() => {
          synced = new Map(prices.map((p) => [keyOf(findProvider(p.provider)?.id ?? p.provider, p.model), p.fields]))
        })

      const list = Effect.map(refresh, () => {
        const out: Array<PriceRow> = []
        for (const p of PROVIDERS) {
          for (const m of p.models) {
            const row = rowFor(p.id, m.id)
            if (row) out.push(row)
          }
        }
        for (const o of snapshot.all) {
          if (!catalogPrice(o.provider, o.model)) out.push(rowFor(o.provider, o.model)!)
        }
        return out
      })

      const setOverride = (input: unknown) =>
        Effect.gen(function* () {
          const p = yield* decodeSetPrice(input)
          const provider = findProvider(p.provider)?.id ?? p.provider.toLowerCase()
          const t = yield* Clock.currentTimeMillis
          const values: Record<string, number | null | string> = { provider, model: p.model, updated_at: t }
          for (const f of PRICE_FIELDS) values[COLUMN[f]] = p[f] ?? null
          // Every column is set: the override replaces the previous one whole.
          yield* upsert(sql, "pricing_overrides", values, ["provider", "model"]).pipe(Effect.orDie)
          yield* loaded.invalidate
          yield* refresh
          return rowFor(provider, p.model)!
        })

      const removeOverride = (provider: string, model: string) =>
        Effect.gen(function* () {
          const id = findProvider(provider)?.id ?? provider.toLowerCase()
          const before = yield* sql<{
            n: number
          }>`SELECT COUNT(*) AS n FROM pricing_overrides WHERE provider = ${id} AND model = ${model}`.pipe(Effect.orDie)
          if ((before[0]?.n ?? 0) === 0) return false
          yield* sql`DELETE FROM pricing_overrides WHERE provider = ${id} AND model = ${model}`.pipe(Effect.orDie)
          yield* loaded.invalidate
          yield* refresh
          return true
        })

      return { priceOf, refresh, list, setOverride, removeOverride, setSynced }
    })
  )
}
