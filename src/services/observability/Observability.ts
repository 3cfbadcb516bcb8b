/**
 * Observability of the inference plane: metrics of every request and attempt, spans only with an OTLP traces endpoint,
 * and the trace id of log lines, from four lifecycle listener points; with tracing off, no span, context or Effect is made
 * and the OpenTelemetry SDK is not loaded until `/metrics` is read (docs/observability.md#what-it-costs).
 */
import type * as OtelApi from "@opentelemetry/api"
import type { Sampler } from "@opentelemetry/sdk-trace-base"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Types from "effect/Types"
import { type LifecycleListener } from "../../kernel/hooks.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { type RequestContext, requestHeader } from "../../kernel/request.js"
import { CircuitBreakers } from "../resilience/CircuitBreakers.js"
import { QuotaQueue } from "../resilience/QuotaQueue.js"
import { StoreHealth } from "../../platform/store/StoreHealth.js"
import { SharedState } from "../../platform/state/SharedState.js"
import * as Config from "effect/Config"
import { ATTR, operationName, statusErrorType } from "./genai.js"
import { type AttemptMeasure, GatewayMetrics, type GatewayMetricsShape, makeGatewayMetrics, type RequestMeasure } from "./GatewayMetrics.js"
import { readOtelSettings, type OtelSettings } from "./otelConfig.js"
import { loadResource, loadTraceExporter, resourceAttributes } from "./otlp.js"

export interface ObservabilityShape {
  readonly metrics: GatewayMetricsShape
  /** Whether spans are made (an OTLP traces endpoint is configured). */
  readonly tracing: boolean
  /**
   * What observability listens to on the lifecycle seam (src/kernel/hooks.ts), registered by the
   * layer: a request's begin (in flight, its span) and end (its metrics), each attempt's end (its
   * metrics); with tracing, the route plan and each attempt's start (spans).
   */
  readonly listener: LifecycleListener
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The W3C `traceparent` a client sent, when it is well formed (and not the all-zero ids). */
export const parseTraceparent = (
  header: string | Array<string> | undefined
): { readonly traceId: string; readonly spanId: string; readonly flags: number } | undefined => {
  if (typeof header !== "string") return undefined
  const m = TRACEPARENT.exec(header.trim().toLowerCase())
  if (!m || m[1] === "ff" || /^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined
  return { traceId: m[2]!, spanId: m[3]!, flags: parseInt(m[4]!, 16) }
}

interface Tracing {
  readonly api: typeof OtelApi
  readonly tracer: OtelApi.Tracer
}

const samplerOf = (sdk: typeof import("@opentelemetry/sdk-trace-base"), s: OtelSettings["sampler"]): Sampler => {
  const ratio = new sdk.TraceIdRatioBasedSampler(s.ratio)
  switch (s.name) {
    case "always_on":
      return new sdk.AlwaysOnSampler()
    case "always_off":
      return new sdk.AlwaysOffSampler()
    case "traceidratio":
      return ratio
    case "parentbased_always_off":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() })
    case "parentbased_traceidratio":
      return new sdk.ParentBasedSampler({ root: ratio })
    default:
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() })
  }
}

/** The tracer over @effect/opentelemetry's tracer provider layer (a batch span processor to the OTLP exporter), for this layer's scope. */
const loadTracing = (
  target: NonNullable<OtelSettings["traces"]>,
  settings: OtelSettings,
  resource: () => Promise<import("@opentelemetry/resources").Resource>
) =>
  Effect.gen(function* () {
    const [api, sdk, NodeSdk, Tracer, EffectResource, exporter, res] = yield* Effect.promise(() =>
      Promise.all([
        import("@opentelemetry/api"),
        import("@opentelemetry/sdk-trace-base"),
        import("@effect/opentelemetry/NodeSdk"),
        import("@effect/opentelemetry/Tracer"),
        import("@effect/opentelemetry/Resource"),
        loadTraceExporter(target),
        resource()
      ])
    )
    const processor = new sdk.BatchSpanProcessor(exporter, settings.batch)
    const tracerLayer = Tracer.layerTracer.pipe(
      Layer.provide(NodeSdk.layerTracerProvider(processor, { sampler: samplerOf(sdk, settings.sampler), shutdownTimeout: "5 seconds" })),
      Layer.provide(Layer.succeed(EffectResource.Resource, res))
    )
    const built = yield* Layer.build(tracerLayer)
    return { api, tracer: Context.get(built, Tracer.OtelTracer) } satisfies Tracing
  })

const setUsage = (
  span: OtelApi.Span,
  u: {
    readonly input?: number | null | undefined
    readonly output?: number | null | undefined
    readonly cached?: number | null | undefined
    readonly cacheWrite?: number | null | undefined
    readonly reasoning?: number | null | undefined
  }
) => {
  if (u.input != null) span.setAttribute(ATTR.inputTokens, u.input)
  if (u.output != null) span.setAttribute(ATTR.outputTokens, u.output)
  if (u.cached != null) span.setAttribute(ATTR.cacheReadTokens, u.cached)
  if (u.cacheWrite != null) span.setAttribute(ATTR.cacheCreationTokens, u.cacheWrite)
  if (u.reasoning != null) span.setAttribute(ATTR.reasoningTokens, u.reasoning)
}

/** The trace id a request's log lines carry: its span's, else the one its caller sent (`traceparent`). */
export const traceIdOf = (ctx: RequestContext): string | undefined =>
  ctx.span?.spanContext().traceId ?? parseTraceparent(requestHeader(ctx, "traceparent"))?.traceId

const make = (metrics: GatewayMetricsShape, tracing: Tracing | undefined): ObservabilityShape => {
  const api = tracing?.api
  const tracer = tracing?.tracer
  /**
   * What the metrics are told of a request's end and of an attempt's: one object of each, filled in
   * every time, since the metrics read it at once and keep nothing of it (two objects and their
   * figures every request otherwise). The row is let go once told.
   */
  const request: Types.Mutable<RequestMeasure> = {
    route: "",
    status: 0,
    keyId: null,
    seconds: 0,
    upstreamSeconds: undefined,
    row: undefined,
    errorCode: undefined
  }
  const attempt: Types.Mutable<AttemptMeasure> = {
    operation: "",
    provider: "",
    requestModel: "",
    responseModel: "",
    seconds: 0,
    errorType: "",
    usage: undefined,
    ttftMs: null
  }
  const listener: Types.Mutable<LifecycleListener> = {
    name: "observability",
    begin: (ctx) => {
      metrics.requestStarted()
      if (tracer === undefined || api === undefined) return
      const remote = parseTraceparent(requestHeader(ctx, "traceparent"))
      const parent = remote
        ? api.trace.setSpanContext(api.ROOT_CONTEXT, {
            traceId: remote.traceId,
            spanId: remote.spanId,
            traceFlags: remote.flags & 1,
            isRemote: true
          })
        : api.ROOT_CONTEXT
      const method = ctx.method
      const span = tracer.startSpan(
        `${method} ${ctx.route}`,
        {
          kind: api.SpanKind.SERVER,
          startTime: ctx.startedAt,
          attributes: { [ATTR.httpMethod]: method, [ATTR.httpRoute]: ctx.route ?? "", [ATTR.requestId]: ctx.requestId }
        },
        parent
      )
      ctx.span = span
    },
    end: (ctx, status, error) => {
      const now = Date.now()
      const row = ctx.usageRow
      request.route = ctx.route ?? "unmatched"
      request.status = status
      request.keyId = ctx.apiKeyId
      request.seconds = (now - ctx.startedAt) / 1000
      request.upstreamSeconds = ctx.upstreamMs === undefined ? undefined : ctx.upstreamMs / 1000
      request.row = row
      request.errorCode = error === undefined ? undefined : (error.code ?? "error")
      metrics.requestEnded(request)
      request.row = undefined
      const span = ctx.span
      if (span === undefined || api === undefined) return
      span.setAttribute(ATTR.httpStatus, status)
      if (ctx.apiKeyId !== null) span.setAttribute(ATTR.apiKeyId, ctx.apiKeyId)
      if (row !== undefined) {
        span.setAttribute(ATTR.endpoint, row.endpoint)
        span.setAttribute(ATTR.operationName, operationName(row.endpoint))
        if (row.provider) span.setAttribute(ATTR.providerName, row.provider)
        span.setAttribute(ATTR.requestModel, row.requestedModel ?? row.model ?? "")
        if (row.model) span.setAttribute(ATTR.responseModel, row.model)
        span.setAttribute(ATTR.stream, row.stream)
        setUsage(span, row.usage)
        span.setAttribute(ATTR.fallbackAttempts, row.fallbackAttempts ?? 0)
        span.setAttribute(ATTR.cacheHit, row.cacheHit ?? false)
        if (row.costUsd != null) span.setAttribute(ATTR.costUsd, row.costUsd)
        if (row.ttftMs != null) span.setAttribute(ATTR.ttftSeconds, row.ttftMs / 1000)
      }
      const errorType = statusErrorType(status)
      if (errorType !== "") {
        span.setAttribute(ATTR.errorType, error?.code ?? errorType)
        span.setStatus({
          code: api.SpanStatusCode.ERROR,
          message: error?.message ?? (status === 499 ? "client closed the request" : `status ${status}`)
        })
      }
      span.end(now)
      ctx.span = undefined
    },
    attemptEnd: (_ctx, started, e) => {
      attempt.operation = operationName(e.endpoint)
      attempt.provider = e.candidate.connection.provider.id
      attempt.requestModel = e.candidate.model
      attempt.responseModel = e.candidate.model
      attempt.seconds = e.latencyMs / 1000
      attempt.errorType = e.errorType
      attempt.usage = e.usage
      attempt.ttftMs = e.ttftMs
      metrics.attemptEnded(attempt)
      attempt.usage = undefined
      const span = started as OtelApi.Span | undefined
      if (span === undefined || api === undefined) return
      span.setAttribute(ATTR.responseModel, e.candidate.model)
      const u = e.usage
      if (u)
        setUsage(span, {
          input: u.inputTokens,
          output: u.outputTokens,
          cached: u.cachedInputTokens,
          cacheWrite: u.cacheCreationTokens,
          reasoning: u.reasoningTokens
        })
      if (e.ttftMs !== null) span.setAttribute(ATTR.ttftSeconds, e.ttftMs / 1000)
      if (e.costUsd !== undefined) span.setAttribute(ATTR.costUsd, e.costUsd)
      if (e.errorType !== "") {
        span.setAttribute(ATTR.errorType, e.errorType)
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: e.message ?? e.errorType })
      }
      span.end()
    }
  }
  if (tracer === undefined || api === undefined) return { metrics, tracing: false, listener }
  // Spans only: the plan a request is tried over, and each attempt's own span.
  listener.routed = (ctx, plan) => {
    const span = ctx.span
    if (span === undefined) return
    span.setAttribute(ATTR.routeKind, plan.kind)
    span.setAttribute(ATTR.strategy, plan.strategy)
    if (plan.kind !== "direct") span.setAttribute(ATTR.combo, plan.scope)
  }
  listener.attemptStart = (ctx, { endpoint, candidate, attempt, probe }) => {
    const operation = operationName(endpoint)
    return tracer.startSpan(
      `${operation} ${candidate.model}`,
      {
        kind: api.SpanKind.CLIENT,
        attributes: {
          [ATTR.operationName]: operation,
          [ATTR.providerName]: candidate.connection.provider.id,
          [ATTR.requestModel]: candidate.model,
          [ATTR.connection]: candidate.connection.name,
          [ATTR.attempt]: attempt,
          [ATTR.probe]: probe,
          ...(ctx.span ? {} : { [ATTR.requestId]: ctx.requestId })
        }
      },
      ctx.span ? api.trace.setSpan(api.ROOT_CONTEXT, ctx.span) : api.ROOT_CONTEXT
    )
  }
  return { metrics, tracing: true, listener }
}

/**
 * Observability's layer: reads the `OTEL_*` settings, builds the metrics (and their OTLP push
 * when configured) and, with a traces endpoint, the tracer. Provides `GatewayMetrics` too (the
 * `/metrics` route reads it). Spans are flushed, and metrics pushed a last time, when it closes.
 */
export class Observability extends Context.Tag("gateway/Observability")<Observability, ObservabilityShape>() {
  static readonly layer = Layer.scopedContext(
    Effect.gen(function* () {
      const settings = yield* readOtelSettings
      for (const w of settings.warnings) yield* Effect.logWarning(`OpenTelemetry: ${w}`)
      const serviceName = Option.getOrUndefined(yield* Effect.orDie(Config.option(Config.string("OTEL_SERVICE_NAME"))))
      const attributes = Option.getOrUndefined(yield* Effect.orDie(Config.option(Config.string("OTEL_RESOURCE_ATTRIBUTES"))))
      let resource: Promise<import("@opentelemetry/resources").Resource> | undefined
      const loadedResource = () => (resource ??= loadResource(resourceAttributes(serviceName, attributes)))
      const breakers = yield* Effect.serviceOption(CircuitBreakers)
      const store = Option.getOrUndefined(yield* Effect.serviceOption(StoreHealth))
      const shared = Option.getOrUndefined(yield* Effect.serviceOption(SharedState))
      const made = makeGatewayMetrics({
        resource: loadedResource,
        breakers: Option.getOrUndefined(breakers),
        queue: Option.getOrUndefined(yield* Effect.serviceOption(QuotaQueue)),
        store,
        sharedReachable: shared?.reachable,
        runtime: yield* Effect.runtime<never>(),
        push: settings.metrics
      })
      yield* Effect.addFinalizer(() => Effect.promise(made.close))
      // Pushing starts now (loading the SDK in the background); `/metrics` alone loads it when first read.
      if (settings.metrics) void made.start().catch(() => undefined)
      const tracing = settings.traces ? yield* loadTracing(settings.traces, settings, loadedResource) : undefined
      if (settings.traces || settings.metrics) {
        yield* Effect.logInfo(
          `OpenTelemetry: ${[settings.traces && `traces to ${settings.traces.url} (${settings.traces.protocol})`, settings.metrics && `metrics to ${settings.metrics.url} (${settings.metrics.protocol}, every ${settings.metrics.intervalMillis} ms)`].filter(Boolean).join(", ")}`
        )
      }
      const observability = make(made.metrics, tracing)
      // A listener on the lifecycle seam like any other (the dispatcher and the guarded attempt do not name it).
      const hooks = yield* RequestHooks
      const unlisten = hooks.listen(observability.listener)
      yield* Effect.addFinalizer(() => Effect.sync(unlisten))
      return Context.make(Observability, observability).pipe(Context.add(GatewayMetrics, made.metrics))
    })
  )
}
