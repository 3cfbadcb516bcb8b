import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import {
  ConnectionUsage,
  HistoryQuery,
  LogsQuery,
  MonitoringHealth,
  RequestLogs,
  TelemetryQuery,
  TelemetrySummary,
  UsageHistory,
  UsageLogs
} from "../../../domain/usage.js"
import { ManagementAuth, IdPath } from "../Principal.js"

export class UsageGroup extends HttpApiGroup.make("usage")
  .add(HttpApiEndpoint.get("history", "/api/usage/history").setUrlParams(HistoryQuery).addSuccess(UsageHistory).addError(BadRequest))
  .add(HttpApiEndpoint.get("logs", "/api/usage/logs").setUrlParams(LogsQuery).addSuccess(UsageLogs).addError(BadRequest))
  .add(HttpApiEndpoint.get("requestLogs", "/api/usage/request-logs").setUrlParams(LogsQuery).addSuccess(RequestLogs).addError(BadRequest))
  .add(HttpApiEndpoint.get("connection", "/api/usage/:id").setPath(IdPath).addSuccess(ConnectionUsage).addError(NotFound))
  .add(
    HttpApiEndpoint.get("telemetry", "/api/telemetry/summary")
      .setUrlParams(TelemetryQuery)
      .addSuccess(TelemetrySummary)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("health", "/api/monitoring/health").addSuccess(MonitoringHealth))
  .middleware(ManagementAuth) {}
