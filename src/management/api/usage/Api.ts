import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import {
  ConnectionUsage,
  ExportQuery,
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

/** Usage as CSV (`GET /api/usage/export`). */
const Csv = HttpApiSchema.Text({ contentType: "text/csv; charset=utf-8" })

export class UsageGroup extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("history", "/api/usage/history")
      .setUrlParams(HistoryQuery)
      .addSuccess(UsageHistory)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("export", "/api/usage/export")
      .setUrlParams(ExportQuery)
      .addSuccess(Csv)
      .addError(BadRequest)
      .addError(NotFound)
      .annotate(
        OpenApi.Summary,
        "Usage as CSV: with groupBy the history's groups (with the key's, team's or user's name), without one line per request with its key's owner (user, teams)."
      )
  )
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
