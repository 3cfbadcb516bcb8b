import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Connections } from "../../../upstream/providers/Connections.js"
import { Resilience } from "../../../services/resilience/Resilience.js"
import { RoutingMemory } from "../../../services/routing/RoutingMemory.js"
import { Cooldowns } from "../../../services/resilience/Cooldowns.js"
import { monitoringHealth } from "../../../services/usage/monitoringHealth.js"
import { UsageQueries } from "../../../services/usage/UsageQueries.js"
import { ManagementApi } from "../Api.js"

/** `/api/usage/{history,logs,request-logs,<connection>}`, `/api/telemetry/summary`, `/api/monitoring/health`. */
export const layer = HttpApiBuilder.group(ManagementApi, "usage", (handlers) =>
  Effect.gen(function* () {
    const queries = yield* UsageQueries
    const connections = yield* Connections
    const cooldowns = yield* Cooldowns
    const resilience = yield* Resilience
    const memory = yield* RoutingMemory
    const health = monitoringHealth({ connections, cooldowns, resilience, memory, queries })
    return handlers
      .handle("history", ({ urlParams }) => queries.history(urlParams))
      .handle("logs", ({ urlParams }) => queries.logs(urlParams))
      .handle("requestLogs", ({ urlParams }) => queries.requestLogs(urlParams))
      .handle("connection", ({ path }) =>
        Effect.flatMap(connections.get(path.id), (c) => queries.connection({ id: c.id, name: c.name, provider: c.provider.id }))
      )
      .handle("telemetry", ({ urlParams }) => queries.telemetry(urlParams.hours ?? 24))
      .handle("health", () => health)
  })
)
