import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { BadRequest, Forbidden, NotFound } from "../../../domain/errors.js"
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
import { CONFIGURATION, EVERY_ROLE, Roles } from "../Roles.js"

/** Usage as CSV (`GET /api/usage/export`). */
const Csv = HttpApiSchema.Text({ contentType: "text/csv; charset=utf-8" })

export class UsageGroup extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("history", "/api/usage/history")
      .annotate(Roles, EVERY_ROLE)
      .setUrlParams(HistoryQuery)
      .addSuccess(UsageHistory)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.get("export", "/api/usage/export")
      .annotate(Roles, EVERY_ROLE)
      .setUrlParams(ExportQuery)
      .addSuccess(Csv)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(
        OpenApi.Summary,
        "Usage as CSV: with groupBy the history's groups (with the key's, team's or user's name), without one line per request with its key's owner (user, teams)."
      )
  )
  .add(
    HttpApiEndpoint.get("logs", "/api/usage/logs")
      .annotate(Roles, EVERY_ROLE)
      .setUrlParams(LogsQuery)
      .addSuccess(UsageLogs)
      .addError(BadRequest)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.get("requestLogs", "/api/usage/request-logs")
      .annotate(Roles, EVERY_ROLE)
      .setUrlParams(LogsQuery)
      .addSuccess(RequestLogs)
      .addError(BadRequest)
      .addError(Forbidden)
  )
  .add(HttpApiEndpoint.get("connection", "/api/usage/:id").setPath(IdPath).addSuccess(ConnectionUsage).addError(NotFound))
  .add(
    HttpApiEndpoint.get("telemetry", "/api/telemetry/summary")
      .setUrlParams(TelemetryQuery)
      .addSuccess(TelemetrySummary)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("health", "/api/monitoring/health").addSuccess(MonitoringHealth))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
