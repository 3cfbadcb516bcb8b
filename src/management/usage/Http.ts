import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { PROVIDERS } from "../../providers/catalog.js"
import { Connections } from "../../providers/Connections.js"
import { Resilience } from "../../resilience/Resilience.js"
import { candidateOf } from "../../routing/plan.js"
import { RoutingMemory } from "../../routing/RoutingMemory.js"
import { Cooldowns } from "../../resilience/Cooldowns.js"
import { UsageQueries } from "../../usage/UsageQueries.js"
import { ManagementApi } from "../Api.js"

/** `/api/usage/{history,logs,request-logs,<connection>}`, `/api/telemetry/summary`, `/api/monitoring/health`. */
export const UsageLive = HttpApiBuilder.group(ManagementApi, "usage", (handlers) =>
  Effect.gen(function* () {
    const queries = yield* UsageQueries
    const connections = yield* Connections
    const cooldowns = yield* Cooldowns
    const resilience = yield* Resilience
    const memory = yield* RoutingMemory
    return handlers
      .handle("history", ({ urlParams }) => queries.history(urlParams))
      .handle("logs", ({ urlParams }) => queries.logs(urlParams))
      .handle("requestLogs", ({ urlParams }) => queries.requestLogs(urlParams))
      .handle("connection", ({ path }) =>
        Effect.flatMap(connections.get(path.id), (c) => queries.connection({ id: c.id, name: c.name, provider: c.provider.id }))
      )
      .handle("telemetry", ({ urlParams }) => queries.telemetry(urlParams.hours ?? 24))
      .handle("health", () =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const all = yield* connections.list
          const recent = yield* queries.recentByConnection
          const providers = all.map((c) => {
            const a = cooldowns.availability(c.id, now)
            const model = c.defaultModel ?? c.provider.models[0]?.id ?? ""
            const breaker = resilience.breakerState(candidateOf({ connection: c, model }), now)
            const r = recent.get(c.id)
            return {
              connection: c.name,
              provider: c.provider.id,
              enabled: c.enabled,
              state: !c.enabled ? "disabled" : breaker === "OPEN" ? "circuit_open" : a.state,
              breaker,
              requests24h: r?.requests ?? 0,
              errorRate24h: r && r.requests > 0 ? r.errors / r.requests : 0
            }
          })
          const enabled = providers.filter((p) => p.enabled)
          const active = enabled.filter((p) => p.state === "available")
          // Connections the gateway has evidence about: traffic in the last day or resilience state.
          const monitored = providers.filter((p) => p.requests24h > 0 || p.breaker !== "CLOSED" || p.state !== "available" || memory.inFlight(all.find((c) => c.name === p.connection)!.id) > 0)
          return {
            status: enabled.length === 0 || active.length === 0 ? ("down" as const) : active.length < enabled.length ? ("degraded" as const) : ("ok" as const),
            catalogCount: PROVIDERS.length,
            configuredCount: all.length,
            activeCount: active.length,
            monitoredCount: monitored.length,
            providers
          }
        })
      )
  })
)
