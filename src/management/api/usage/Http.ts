import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { Connections } from "../../../upstream/providers/Connections.js"
import { Resilience } from "../../../services/resilience/Resilience.js"
import { RoutingMemory } from "../../../services/routing/RoutingMemory.js"
import { Cooldowns } from "../../../services/resilience/Cooldowns.js"
import { monitoringHealth } from "../../../services/usage/monitoringHealth.js"
import { UsageQueries } from "../../../services/usage/UsageQueries.js"
import { ManagementApi } from "../Api.js"

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
    return handlers
      .handle("history", ({ urlParams }) => queries.history(urlParams))
      .handle("export", ({ urlParams }) =>
        Effect.map(queries.export(urlParams), (text) =>
          HttpServerResponse.text(text, {
            contentType: "text/csv; charset=utf-8",
            headers: { "content-disposition": `attachment; filename="${exportName(urlParams)}"` }
          })
        )
      )
      .handle("logs", ({ urlParams }) => queries.logs(urlParams))
      .handle("requestLogs", ({ urlParams }) => queries.requestLogs(urlParams))
      .handle("connection", ({ path }) =>
        Effect.flatMap(connections.get(path.id), (c) => queries.connection({ id: c.id, name: c.name, provider: c.provider.id }))
      )
      .handle("telemetry", ({ urlParams }) => queries.telemetry(urlParams.hours ?? 24))
      .handle("health", () => health)
  })
)
