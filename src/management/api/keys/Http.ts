import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { ApiKeys } from "../../../services/auth/ApiKeys.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

export const layer = HttpApiBuilder.group(ManagementApi, "keys", (handlers) =>
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    return handlers
      .handle("list", () => Effect.map(keys.list, (list) => ({ keys: list })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => keys.create(payload, { actor: a })))
      .handle("update", ({ path, payload }) => Effect.flatMap(actor, (a) => keys.update(path.id, payload, a)))
      .handle("remove", ({ path }) => Effect.flatMap(actor, (a) => Effect.map(keys.remove(path.id, a), (removed) => ({ removed }))))
  })
)
