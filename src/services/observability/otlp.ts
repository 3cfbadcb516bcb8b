/**
 * The OTLP exporters for a target (docs/observability.md): http/protobuf or http/json, loaded
 * only when a target is configured (the exporter packages and the SDK take about a second to
 * load, which a gateway without OpenTelemetry should not pay at start).
 */
import type { Resource } from "@opentelemetry/resources"
import type { PushMetricExporter } from "@opentelemetry/sdk-metrics"
import type { SpanExporter } from "@opentelemetry/sdk-trace-base"
import { VERSION } from "../../kernel/version.js"
import { parseHeaders, type OtlpTarget } from "./otelConfig.js"

const options = (target: OtlpTarget) => ({ url: target.url, headers: { ...target.headers }, timeoutMillis: target.timeoutMillis })

export const loadTraceExporter = async (target: OtlpTarget): Promise<SpanExporter> =>
  target.protocol === "http/json"
    ? new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter(options(target))
    : new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter(options(target))

export const loadMetricExporter = async (target: OtlpTarget): Promise<PushMetricExporter> =>
  target.protocol === "http/json"
    ? new (await import("@opentelemetry/exporter-metrics-otlp-http")).OTLPMetricExporter(options(target))
    : new (await import("@opentelemetry/exporter-metrics-otlp-proto")).OTLPMetricExporter(options(target))

/**
 * The process's resource: `service.name` from `OTEL_SERVICE_NAME` (default `gateway`),
 * `service.version`, and `OTEL_RESOURCE_ATTRIBUTES` (`k=v,k2=v2`, percent-decoded).
 */
export const resourceAttributes = (serviceName: string | undefined, attributes: string | undefined): Record<string, string> => ({
  ...parseHeadersKeepCase(attributes),
  "service.name": serviceName || "gateway",
  "service.version": VERSION
})

const parseHeadersKeepCase = (text: string | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  if (!text) return out
  const lower = parseHeaders(text)
  // parseHeaders lower-cases names (HTTP headers); resource attribute names keep their case.
  for (const part of text.split(",")) {
    const eq = part.indexOf("=")
    if (eq <= 0) continue
    const key = part.slice(0, eq).trim()
    const value = lower[key.toLowerCase()]
    if (key && value !== undefined) out[key] = value
  }
  return out
}

export const loadResource = async (attributes: Record<string, string>): Promise<Resource> =>
  (await import("@opentelemetry/resources")).resourceFromAttributes(attributes)
