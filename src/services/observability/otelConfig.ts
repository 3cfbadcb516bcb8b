/**
 * The standard `OTEL_*` environment variables the gateway honours (docs/observability.md),
 * read through Effect's `Config` (so tests can pass them as a map) and turned into the options
 * of the OTLP exporters, the batch span processor, the sampler and the metric reader.
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

export type OtlpProtocol = "http/protobuf" | "http/json"

export interface OtlpTarget {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly protocol: OtlpProtocol
  readonly timeoutMillis: number
}

export type SamplerName =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio"

export interface OtelSettings {
  /** Where spans go; undefined: tracing is off (no span is made). */
  readonly traces: OtlpTarget | undefined
  /** Where metrics go (OTLP push); undefined: only `GET /metrics`. */
  readonly metrics: (OtlpTarget & { readonly intervalMillis: number }) | undefined
  readonly sampler: { readonly name: SamplerName; readonly ratio: number }
  readonly batch: {
    readonly scheduledDelayMillis: number
    readonly maxExportBatchSize: number
    readonly maxQueueSize: number
    readonly exportTimeoutMillis: number
  }
  /** Things the operator should hear about (an unsupported protocol, a bad value), logged at start. */
  readonly warnings: ReadonlyArray<string>
}

/** `k1=v1,k2=v2` (values percent-decoded), as the OTLP exporter specification writes headers. */
export const parseHeaders = (text: string | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  if (!text) return out
  for (const part of text.split(",")) {
    const eq = part.indexOf("=")
    if (eq <= 0) continue
    const key = part.slice(0, eq).trim()
    const raw = part.slice(eq + 1).trim()
    let value = raw
    try {
      value = decodeURIComponent(raw)
    } catch {
      // kept as written
    }
    if (key) out[key.toLowerCase()] = value
  }
  return out
}

const SAMPLERS: ReadonlyArray<SamplerName> = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
]

/** The settings from a variable lookup (undefined or "" is unset). */
export const otelSettings = (get: (name: string) => string | undefined): OtelSettings => {
  const env = (name: string): string | undefined => {
    const v = get(name)?.trim()
    return v === undefined || v === "" ? undefined : v
  }
  const warnings: Array<string> = []
  const num = (name: string, fallback: number): number => {
    const v = env(name)
    if (v === undefined) return fallback
    const n = Number(v)
    if (Number.isFinite(n) && n >= 0) return n
    warnings.push(`${name}=${v} is not a number; using ${fallback}`)
    return fallback
  }
  const disabled = env("OTEL_SDK_DISABLED")?.toLowerCase() === "true"
  const target = (signal: "TRACES" | "METRICS", path: string): OtlpTarget | undefined => {
    if (disabled) return undefined
    const exporter = env(`OTEL_${signal}_EXPORTER`)?.toLowerCase()
    if (exporter === "none") return undefined
    if (exporter !== undefined && exporter !== "otlp")
      warnings.push(`OTEL_${signal}_EXPORTER=${exporter} is not supported (only otlp or none); using otlp`)
    const specific = env(`OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`)
    const base = env("OTEL_EXPORTER_OTLP_ENDPOINT")
    const url = specific ?? (base === undefined ? undefined : `${base.replace(/\/+$/, "")}${path}`)
    if (url === undefined) return undefined
    let protocol = (env(`OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`) ?? env("OTEL_EXPORTER_OTLP_PROTOCOL") ?? "http/protobuf").toLowerCase()
    if (protocol !== "http/protobuf" && protocol !== "http/json") {
      warnings.push(
        `OTLP protocol ${protocol} is not supported for ${signal.toLowerCase()} (http/protobuf or http/json); using http/protobuf`
      )
      protocol = "http/protobuf"
    }
    return {
      url,
      headers: { ...parseHeaders(env("OTEL_EXPORTER_OTLP_HEADERS")), ...parseHeaders(env(`OTEL_EXPORTER_OTLP_${signal}_HEADERS`)) },
      protocol: protocol as OtlpProtocol,
      timeoutMillis: num(`OTEL_EXPORTER_OTLP_${signal}_TIMEOUT`, num("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000))
    }
  }
  const traces = target("TRACES", "/v1/traces")
  const metrics = target("METRICS", "/v1/metrics")
  let sampler = (env("OTEL_TRACES_SAMPLER") ?? "parentbased_always_on").toLowerCase() as SamplerName
  if (!SAMPLERS.includes(sampler)) {
    warnings.push(`OTEL_TRACES_SAMPLER=${sampler} is not supported; using parentbased_always_on`)
    sampler = "parentbased_always_on"
  }
  const ratio = Math.min(1, num("OTEL_TRACES_SAMPLER_ARG", 1))
  return {
    traces,
    metrics: metrics && { ...metrics, intervalMillis: Math.max(100, num("OTEL_METRIC_EXPORT_INTERVAL", 60_000)) },
    sampler: { name: sampler, ratio },
    batch: {
      scheduledDelayMillis: num("OTEL_BSP_SCHEDULE_DELAY", 5000),
      maxExportBatchSize: Math.max(1, num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)),
      maxQueueSize: Math.max(1, num("OTEL_BSP_MAX_QUEUE_SIZE", 2048)),
      exportTimeoutMillis: num("OTEL_BSP_EXPORT_TIMEOUT", 30_000)
    },
    warnings
  }
}

const NAMES = [
  "OTEL_SDK_DISABLED",
  "OTEL_TRACES_EXPORTER",
  "OTEL_METRICS_EXPORTER",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
  "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
  "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
  "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
  "OTEL_EXPORTER_OTLP_TIMEOUT",
  "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
  "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
  "OTEL_METRIC_EXPORT_INTERVAL",
  "OTEL_TRACES_SAMPLER",
  "OTEL_TRACES_SAMPLER_ARG",
  "OTEL_BSP_SCHEDULE_DELAY",
  "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
  "OTEL_BSP_MAX_QUEUE_SIZE",
  "OTEL_BSP_EXPORT_TIMEOUT"
] as const

/** The settings from the configuration (the environment, or a test's map). */
export const readOtelSettings: Effect.Effect<OtelSettings> = Effect.map(
  Effect.all(
    NAMES.map((name) => Effect.map(Effect.orDie(Config.option(Config.string(name))), (v) => [name, Option.getOrUndefined(v)] as const))
  ),
  (pairs) => {
    const values = new Map<string, string | undefined>(pairs)
    return otelSettings((name) => values.get(name))
  }
)
