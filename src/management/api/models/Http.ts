import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { ProviderModels } from "../../../upstream/providers/ProviderModels.js"
import { Aliases } from "../../../services/routing/Aliases.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** `/api/models/catalog`, `/api/models/alias` and `/api/provider-models` (docs/operations.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "models", (handlers) =>
  Effect.gen(function* () {
    const models = yield* ProviderModels
    const aliases = yield* Aliases
    return handlers
      .handle("catalog", ({ urlParams }) => Effect.map(models.catalog(urlParams), (list) => ({ models: list })))
      .handle("aliases", () => aliases.list)
      .handle("setAlias", ({ payload }) => Effect.flatMap(actor, (a) => aliases.set(payload, a)))
      .handle("removeAlias", ({ urlParams }) =>
        Effect.flatMap(actor, (a) => Effect.map(aliases.remove(urlParams.alias, a), (removed) => ({ removed })))
      )
      .handle("customModels", ({ urlParams }) => Effect.map(models.list(urlParams), (list) => ({ models: list })))
      .handle("addModel", ({ payload }) => Effect.flatMap(actor, (a) => models.create(payload, a)))
      .handle("updateModel", ({ payload }) => Effect.flatMap(actor, (a) => models.patch(payload, a)))
      .handle("removeModel", ({ urlParams }) =>
        Effect.flatMap(actor, (a) => Effect.map(models.remove(urlParams.provider, urlParams.model, a), (removed) => ({ removed })))
      )
  })
)
