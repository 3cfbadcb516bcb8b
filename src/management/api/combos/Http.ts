import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { BadRequest } from "../../../domain/errors.js"
import { AUTO_CATEGORIES, AUTO_TIERS, ADVERTISED_AUTO_IDS, AUTO_VARIANT_IDS } from "../../../services/routing/auto/variants.js"
import { comboView, Combos } from "../../../services/routing/Combos.js"
import { Router } from "../../../services/routing/Router.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** `/api/combos*`: persisted combos, and the virtual auto models with their pools. */
export const layer = HttpApiBuilder.group(ManagementApi, "combos", (handlers) =>
  Effect.gen(function* () {
    const combos = yield* Combos
    const router = yield* Router
    return handlers
      .handle("list", () => Effect.map(combos.list, (list) => ({ combos: list.map(comboView) })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => Effect.map(combos.create(payload, a), comboView)))
      .handle("auto", () =>
        Effect.gen(function* () {
          const variants = yield* Effect.forEach(AUTO_VARIANT_IDS, (id) =>
            Effect.map(router.describeAuto(id).pipe(Effect.orDie), (d) => ({
              id,
              description: d.spec.description,
              routerStrategy: d.spec.routerStrategy,
              weights: { ...d.spec.weights } as Record<string, number>,
              explorationRate: d.spec.explorationRate,
              pool: d.pool.map((c) => ({
                model: c.key,
                provider: c.connection.provider.id,
                connection: c.connection.name,
                context_length: c.spec?.contextWindow ?? null,
                max_output_tokens: c.spec?.maxOutput ?? null,
                tier: c.spec?.tier ?? "standard",
                capabilities: {
                  tools: c.spec?.capabilities.tools ?? true,
                  vision: c.spec?.capabilities.vision ?? false,
                  reasoning: c.spec?.capabilities.reasoning ?? false
                }
              })),
              context_length: d.contextWindow,
              max_output_tokens: d.maxOutput
            }))
          )
          return { variants, advertised: [...ADVERTISED_AUTO_IDS], categories: [...AUTO_CATEGORIES], tiers: [...AUTO_TIERS] }
        })
      )
      .handle("get", ({ path }) => Effect.map(combos.get(path.id), comboView))
      .handle("update", ({ path, payload }) => Effect.flatMap(actor, (a) => Effect.map(combos.update(path.id, payload, a), comboView)))
      .handle("patch", ({ path, payload }) => Effect.flatMap(actor, (a) => Effect.map(combos.update(path.id, payload, a), comboView)))
      .handle("remove", ({ path }) =>
        Effect.flatMap(actor, (a) => Effect.map(combos.remove(path.id, a), (c) => ({ removed: comboView(c) })))
      )
  })
)

export { BadRequest }
