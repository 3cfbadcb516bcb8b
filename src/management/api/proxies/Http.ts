import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { ProxyRegistry } from "../../../upstream/egress/ProxyRegistry.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** `/api/v1/management/proxies` (docs/egress.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "proxies", (handlers) =>
  Effect.gen(function* () {
    const registry = yield* ProxyRegistry
    return handlers
      .handle("list", () => Effect.map(registry.list, (proxies) => ({ proxies })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => registry.create(payload, a)))
      .handle("get", ({ path }) => registry.get(path.id))
      .handle("update", ({ path, payload }) => Effect.flatMap(actor, (a) => registry.update(path.id, payload, a)))
      .handle("remove", ({ path }) => Effect.flatMap(actor, (a) => Effect.map(registry.remove(path.id, a), (removed) => ({ removed }))))
  })
)
