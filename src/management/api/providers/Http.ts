import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { type Connection, Connections, connectionView } from "../../../upstream/providers/Connections.js"
import { liveConnectionView } from "../../../upstream/providers/liveView.js"
import { ProviderChecks } from "../../../upstream/providers/ProviderChecks.js"
import { Cooldowns } from "../../../services/resilience/Cooldowns.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

export const layer = HttpApiBuilder.group(ManagementApi, "providers", (handlers) =>
  Effect.gen(function* () {
    const connections = yield* Connections
    const checks = yield* ProviderChecks
    const cooldowns = yield* Cooldowns
    const live = (c: Connection) => liveConnectionView(cooldowns, c)
    return handlers
      .handle("list", () => Effect.map(connections.list, (list) => ({ connections: list.map(live) })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => Effect.map(connections.create(payload, a), connectionView)))
      .handle("validate", ({ payload }) => checks.validate(payload))
      .handle("get", ({ path }) => Effect.map(connections.get(path.id), live))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function* () {
          const updated = yield* connections.update(path.id, payload, yield* actor)
          // New credentials or endpoint: earlier failures (terminal states included) no longer apply.
          if (payload.apiKey !== undefined || payload.baseUrl !== undefined) yield* cooldowns.forget(updated.id)
          return live(updated)
        })
      )
      .handle("remove", ({ path }) =>
        Effect.flatMap(actor, (a) => Effect.map(connections.remove(path.id, a), (c) => ({ removed: connectionView(c) })))
      )
      .handle("test", ({ path }) => checks.test(path.id))
      .handle("models", ({ path }) => checks.models(path.id))
  })
)
