import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { Forbidden, Unauthorized } from "../../../domain/errors.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** The Prometheus text exposition format, version 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

/**
 * Who may scrape `GET /metrics`: `Authorization: Bearer <GATEWAY_METRICS_TOKEN>` when that is set,
 * or whatever the management API accepts (an admin key, an admin session, or, with `requireLogin`
 * off, a direct caller on this machine). docs/observability.md, "Auth of /metrics".
 */
export class MetricsAuth extends HttpApiMiddleware.Tag<MetricsAuth>()("gateway/MetricsAuth", {
  failure: Schema.Union(Unauthorized, Forbidden)
}) {}

/** `GET /metrics`: every metric of this process in the Prometheus text format (docs/observability.md). */
export class MetricsGroup extends HttpApiGroup.make("metrics")
  .add(HttpApiEndpoint.get("scrape", "/metrics").addSuccess(HttpApiSchema.Text({ contentType: PROMETHEUS_CONTENT_TYPE })))
  .middleware(MetricsAuth)
  .annotate(Roles, CONFIGURATION) {}
