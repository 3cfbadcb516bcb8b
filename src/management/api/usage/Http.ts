import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { Connections } from "../../../upstream/providers/Connections.js"
import { Resilience } from "../../../services/resilience/Resilience.js"
import { RoutingMemory } from "../../../services/routing/RoutingMemory.js"
import { Cooldowns } from "../../../services/resilience/Cooldowns.js"
import { monitoringHealth } from "../../../services/usage/monitoringHealth.js"
import { UsageQueries } from "../../../services/usage/UsageQueries.js"
import { ApiKeys } from "../../../services/auth/ApiKeys.js"
import { Directory } from "../../../services/teams/Directory.js"
import { ManagementApi } from "../Api.js"
import { makeUsageScope } from "./scope.js"

/** `usage-<from day>-<to day>[-<groupBy>].csv`, the name an export is saved under. */
const exportName = (q: { readonly from?: string | undefined; readonly to?: string | undefined; readonly groupBy?: string | undefined }) =>
  `usage${q.from ? `-${q.from.slice(0, 10)}` : ""}${q.to ? `-${q.to.slice(0, 10)}` : ""}${q.groupBy ? `-by-${q.groupBy}` : ""}.csv`.replace(
    /[^\w.-]/g,
    "_"
  )

/** `/api/usage/{history,export,logs,request-logs,<connection>}`, `/api/telemetry/summary`, `/api/monitoring/health`. */
export const layer = HttpApiBuilder.group(ManagementApi, "usage", (handlers) =>
  Effect.gen(function* () {
    const queries = yield* UsageQueries
    const connections = yield* Connections
    const cooldowns = yield* Cooldowns
    const resilience = yield* Resilience
    const memory = yield* RoutingMemory
    const health = monitoringHealth({ connections, cooldowns, resilience, memory, queries })
    // Each caller reads the usage their role may (docs/teams.md, "Roles and access").
    const scope = makeUsageScope(yield* ApiKeys, yield* Directory)
    return handlers
      .handle("history", ({ urlParams }) => Effect.flatMap(scope(urlParams), queries.history))
      .handle("export", ({ urlParams }) =>
        Effect.map(Effect.flatMap(scope(urlParams), queries.export), (text) =>
          HttpServerResponse.text(text, {
            contentType: "text/csv; charset=utf-8",
            headers: { "content-disposition": `attachment; filename="${exportName(urlParams)}"` }
          })
        )
      )
      .handle("logs", ({ urlParams }) => Effect.flatMap(scope(urlParams), queries.logs))
      .handle("requestLogs", ({ urlParams }) => Effect.flatMap(scope(urlParams), queries.requestLogs))
      .handle("connection", ({ path }) =>
        Effect.flatMap(connections.get(path.id), (c) => queries.connection({ id: c.id, name: c.name, provider: c.provider.id }))
      )
      .handle("telemetry", ({ urlParams }) => queries.telemetry(urlParams.hours ?? 24))
      .handle("health", () => health)
  })
)
