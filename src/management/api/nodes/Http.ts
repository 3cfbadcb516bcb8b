import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { ProviderNodes } from "../../../upstream/providers/ProviderNodes.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** `/api/provider-nodes*` (docs/operations.md, "Provider nodes"). */
export const layer = HttpApiBuilder.group(ManagementApi, "nodes", (handlers) =>
  Effect.gen(function* () {
    const nodes = yield* ProviderNodes
    return handlers
      .handle("list", () => Effect.map(nodes.list, (list) => ({ nodes: list })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => nodes.create(payload, a)))
      .handle("get", ({ path }) => nodes.get(path.id))
      .handle("replace", ({ path, payload }) => Effect.flatMap(actor, (a) => nodes.replace(path.id, payload, a)))
      .handle("update", ({ path, payload }) => Effect.flatMap(actor, (a) => nodes.patch(path.id, payload, a)))
      .handle("remove", ({ path }) => Effect.flatMap(actor, (a) => Effect.map(nodes.remove(path.id, a), (removed) => ({ removed }))))
      .handle("test", ({ path, payload }) => Effect.flatMap(actor, (a) => nodes.test(path.id, payload, a)))
  })
)
