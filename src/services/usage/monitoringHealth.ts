import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { MonitoringHealth } from "../../domain/usage.js"
import { PROVIDERS } from "../../domain/catalog/catalog.js"
import type { ConnectionsShape } from "../../upstream/providers/Connections.js"
import type { CooldownsShape } from "../resilience/Cooldowns.js"
import type { ResilienceShape } from "../resilience/Resilience.js"
import { candidateOf } from "../routing/plan.js"
import type { RoutingMemoryShape } from "../routing/RoutingMemory.js"
import type { UsageQueriesShape } from "./UsageQueries.js"

export interface MonitoringHealthDeps {
  readonly connections: ConnectionsShape
  readonly cooldowns: CooldownsShape
  readonly resilience: ResilienceShape
  readonly memory: RoutingMemoryShape
  readonly queries: UsageQueriesShape
}

/**
 * The provider health summary of `GET /api/monitoring/health` (and the MCP health tool): each
 * connection's state from its cooldown and circuit breaker, its last day's traffic, and an
 * overall `ok`, `degraded` or `down`.
 */
export const monitoringHealth = (deps: MonitoringHealthDeps): Effect.Effect<typeof MonitoringHealth.Type> =>
  Effect.gen(function* () {
    const { connections, cooldowns, resilience, memory, queries } = deps
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
    const monitored = providers.filter(
      (p) =>
        p.requests24h > 0 ||
        p.breaker !== "CLOSED" ||
        p.state !== "available" ||
        memory.inFlight(all.find((c) => c.name === p.connection)!.id) > 0
    )
    return {
      status:
        enabled.length === 0 || active.length === 0
          ? ("down" as const)
          : active.length < enabled.length
            ? ("degraded" as const)
            : ("ok" as const),
      catalogCount: PROVIDERS.length,
      configuredCount: all.length,
      activeCount: active.length,
      monitoredCount: monitored.length,
      providers
    }
  })
