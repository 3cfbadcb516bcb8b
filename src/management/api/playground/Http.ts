import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Playground } from "../../../services/playground/Playground.js"
import { ManagementApi } from "../Api.js"
import { Principal } from "../Principal.js"

/** The playground's backend (docs/playground.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "playground", (handlers) =>
  Effect.map(Playground, (playground) =>
    handlers
      .handle("improve", ({ payload }) =>
        // Made for the API key that called (its budget, limits and usage rows); the gateway's own otherwise.
        Effect.flatMap(Principal, (who) => playground.improve(payload, who.kind === "api-key" ? who.id : null))
      )
      .handle("listPresets", () => Effect.map(playground.list, (presets) => ({ presets })))
      .handle("createPreset", ({ payload }) => playground.create(payload))
      .handle("getPreset", ({ path }) => playground.get(path.id))
      .handle("updatePreset", ({ path, payload }) => playground.update(path.id, payload))
      .handle("removePreset", ({ path }) => playground.remove(path.id))
  )
)
