/**
 * The gateway's metrics: GenAI client metrics per upstream attempt and the gateway's own per request, updated
 * synchronously in `metricStore.ts` families that `GET /metrics` and the OTLP reader both read (docs/observability.md#metrics).
 */
import * as v8 from "node:v8"
import { turnsDeferred } from "../../platform/http/turnBudget.js"
import { sentToPrimary } from "../../platform/state/clusterIpc.js"
import type { Resource } from "@opentelemetry/resources"
import type { MetricReader } from "@opentelemetry/sdk-metrics"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import type { Usage } from "../../domain/canonical.js"
import type { CircuitBreakersShape } from "../resilience/CircuitBreakers.js"
import type { QuotaQueueShape } from "../resilience/QuotaQueue.js"
import type { UsageRecord } from "../usage/Usage.js"
import type { StoreHealthShape } from "../../platform/store/StoreHealth.js"
import { VERSION } from "../../kernel/version.js"
import { Counter, Histogram, metricProducer, ObservedGauge, UpDown } from "./metricStore.js"
import type { OtelSettings } from "./otelConfig.js"
import { loadMetricExporter } from "./otlp.js"

/** Semconv's advised boundaries for `gen_ai.client.token.usage`. */
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
/** Semconv's advised boundaries for `gen_ai.client.operation.duration` (seconds); also the request duration's. */
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
/** Semconv's advised boundaries for time to first chunk (seconds). */
const TTFC_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
/** The gateway's own added latency (seconds): finer, it is meant to be well under a millisecond. */
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

const BREAKER_VALUE: Readonly<Record<string, number>> = { CLOSED: 0, DEGRADED: 1, HALF_OPEN: 2, OPEN: 3 }

const GENAI = ["gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model"] as const

/** What one upstream attempt did, as the GenAI client metrics record it. */
export interface AttemptMeasure {
  readonly operation: string
  readonly provider: string
  readonly requestModel: string
  readonly responseModel: string
  readonly seconds: number
  /** Empty when the attempt answered. */
  readonly errorType: string
  readonly usage: Partial<Usage> | undefined
  /** Streams only. */
  readonly ttftMs: number | null
}

/** What one request was, as the gateway's own metrics record it. */
export interface RequestMeasure {
  /** The route's template (`/v1/chat/completions`, `/v1/providers/{provider}/embeddings`, `unmatched`). */
  readonly route: string
  readonly status: number
  readonly keyId: string | null
  readonly seconds: number
  /** Time spent in upstream attempts (the rest is the gateway's own); undefined when none was made. */
  readonly upstreamSeconds: number | undefined
  /** The request's usage row, when it wrote one. */
  readonly row: UsageRecord | undefined
  /** The error code it was answered with (`guardrail_unavailable`, `upstream_timeout`, ...), when it failed. */
  readonly errorCode?: string | undefined
}

export interface GatewayMetricsShape {
  readonly requestStarted: () => void
  readonly requestEnded: (m: RequestMeasure) => void
  readonly attemptEnded: (m: AttemptMeasure) => void
  /**
   * Which path a request of a common route took (docs/ARCHITECTURE.md, "The common path"):
   * `common`, or `pipeline` with the rule's reason (src/inference/commonPath.ts).
   */
  readonly requestPath: (path: "common" | "pipeline", reason: string) => void
  /** One call through `/v1/mcp` (a tool, a resource read, a prompt), ended: `outcome` is ok, tool_error, refused, rate_limited or failed. */
  readonly mcpCallEnded: (m: { readonly server: string; readonly kind: string; readonly outcome: string; readonly seconds: number }) => void
  /** The Prometheus text exposition of every metric now. */
  readonly scrape: Effect.Effect<string>
}

export class GatewayMetrics extends Context.Tag("gateway/GatewayMetrics")<GatewayMetrics, GatewayMetricsShape>() {}

const families = () => {
  const tokenUsage = new Histogram(
    {
      name: "gen_ai.client.token.usage",
      description: "Input and output tokens per upstream call",
      unit: "{token}",
      labels: [...GENAI, "gen_ai.token.type"]
    },
    TOKEN_BUCKETS
  )
  const operationDuration = new Histogram(
    {
      name: "gen_ai.client.operation.duration",
      description: "Duration of each upstream call (an attempt, fallbacks included)",
      unit: "s",
      labels: [...GENAI, "error.type"]
    },
    DURATION_BUCKETS
  )
  const firstChunk = new Histogram(
    {
      name: "gen_ai.client.operation.time_to_first_chunk",
      description: "Time from sending a streamed upstream call to its first chunk",
      unit: "s",
      labels: GENAI
    },
    TTFC_BUCKETS
  )
  const requests = new Counter({
    name: "gateway.requests",
    description: "Requests of the inference plane",
    unit: "{request}",
    labels: ["route", "status", "provider", "model", "key_id"]
  })
  const requestDuration = new Histogram(
    { name: "gateway.request.duration", description: "Time from a request's arrival to its end", unit: "s", labels: ["route", "status"] },
    DURATION_BUCKETS
  )
  const overhead = new Histogram(
    {
      name: "gateway.overhead.duration",
      description: "What the gateway added to a request: its duration less the time in upstream calls",
      unit: "s",
      labels: ["route"]
    },
    OVERHEAD_BUCKETS
  )
  const tokens = new Counter({
    name: "gateway.tokens",
    description: "Tokens recorded in usage rows",
    unit: "{token}",
    labels: ["provider", "model", "key_id", "type"]
  })
  const cost = new Counter({
    name: "gateway.cost.usd",
    description: "Cost of the answers, in US dollars",
    unit: "USD",
    labels: ["provider", "model", "key_id"]
  })
  const promptCache = new Counter({
    name: "gateway.prompt_cache.input_tokens",
    description:
      "Input tokens of answered requests (type input) and the part the upstream read from its prompt cache (type cached), by connection, requested model (a combo's name) and key: cached over input is the prompt cache's hit ratio",
    unit: "{token}",
    labels: ["connection_id", "requested_model", "key_id", "type"]
  })
  const fallbacks = new Counter({
    name: "gateway.fallback.attempts",
    description: "Failed attempts that fell back to another target",
    unit: "{attempt}",
    labels: ["requested_model", "provider", "model"]
  })
  const cacheHits = new Counter({
    name: "gateway.cache.hits",
    description: "Answers served from the response cache",
    unit: "{request}",
    labels: ["route", "model"]
  })
  const errors = new Counter({
    name: "gateway.errors",
    description: "Requests answered with an error, by its code",
    unit: "{request}",
    labels: ["route", "status", "code"]
  })
  const paths = new Counter({
    name: "gateway.requests.path",
    description: "Requests of the routes the common path serves, by the path they took: common, or pipeline and the reason",
    unit: "{request}",
    labels: ["path", "reason"]
  })
  const mcpCalls = new Counter({
    name: "gateway.mcp.calls",
    description: "Calls through /v1/mcp to the registered MCP servers, by server, kind (tool, resource, prompt) and outcome",
    unit: "{call}",
    labels: ["server", "kind", "outcome"]
  })
  const mcpDuration = new Histogram(
    { name: "gateway.mcp.call.duration", description: "Duration of calls through /v1/mcp", unit: "s", labels: ["server", "kind"] },
    DURATION_BUCKETS
  )
  const inFlight = new UpDown({
    name: "gateway.requests.in_flight",
    description: "Inference requests being served",
    unit: "{request}",
    labels: []
  })
  inFlight.add([], 0)
  return {
    tokenUsage,
    operationDuration,
    firstChunk,
    requests,
    requestDuration,
    overhead,
    tokens,
    promptCache,
    cost,
    fallbacks,
    cacheHits,
    errors,
    paths,
    mcpCalls,
    mcpDuration,
    inFlight
  }
}

const NO_LABELS: ReadonlyArray<string> = []

/**
 * One reused label array per length, for the updates every request makes: a family reads the
 * labels during the update and keeps none of them (a new series copies them into its attributes),
 * so filling one of these where it is passed spares the dozen arrays a request's updates made.
 */
const L1: Array<string> = [""]
const L2: Array<string> = ["", ""]
const L3: Array<string> = ["", "", ""]
const L4: Array<string> = ["", "", "", ""]
const L5: Array<string> = ["", "", "", "", ""]
const labels1 = (a: string): ReadonlyArray<string> => {
  L1[0] = a
  return L1
}
const labels2 = (a: string, b: string): ReadonlyArray<string> => {
  L2[0] = a
  L2[1] = b
  return L2
}
const labels3 = (a: string, b: string, c: string): ReadonlyArray<string> => {
  L3[0] = a
  L3[1] = b
  L3[2] = c
  return L3
}
const labels4 = (a: string, b: string, c: string, d: string): ReadonlyArray<string> => {
  L4[0] = a
  L4[1] = b
  L4[2] = c
  L4[3] = d
  return L4
}
const labels5 = (a: string, b: string, c: string, d: string, e: string): ReadonlyArray<string> => {
  L5[0] = a
  L5[1] = b
  L5[2] = c
  L5[3] = d
  L5[4] = e
  return L5
}

/** Status codes as label values, one string each (the metric store's lookups then hash nothing new). */
const STATUS: Array<string> = []
const statusText = (status: number): string => (STATUS[status] ??= String(status))

/**
 * The metrics and their readers. The readers (the OpenTelemetry SDK's Prometheus serializer and,
 * with `push`, the OTLP periodic reader) are loaded when metrics are first read, or at once when
 * they are pushed; `close` flushes and stops them.
 */
export const makeGatewayMetrics = (options: {
  readonly resource: () => Promise<Resource>
  readonly breakers: CircuitBreakersShape | undefined
  /** The requests parked until a quota resets (absent in tests that build no resilience area). */
  readonly queue?: Pick<QuotaQueueShape, "counts"> | undefined
  /** The store's state and the rows waiting for it (absent in tests that build no store). */
  readonly store?: StoreHealthShape | undefined
  /** Whether the shared-state transport (Redis) is reachable; absent: always. */
  readonly sharedReachable?: (() => boolean) | undefined
  readonly runtime: Runtime.Runtime<never>
  readonly push: OtelSettings["metrics"]
}): { readonly metrics: GatewayMetricsShape; readonly start: () => Promise<unknown>; readonly close: () => Promise<void> } => {
  const f = families()
  const breakers = options.breakers
  const breakerState = new ObservedGauge(
    {
      name: "gateway.circuit_breaker.state",
      description: "Circuit breaker per provider and origin: 0 closed, 1 degraded, 2 half-open, 3 open",
      unit: "1",
      labels: ["provider", "origin"]
    },
    async () =>
      breakers === undefined
        ? []
        : (await Runtime.runPromise(options.runtime)(breakers.list)).map((b) => ({
            labels: [b.provider, b.origin ?? ""],
            value: BREAKER_VALUE[b.state] ?? 0
          }))
  )
  const store = options.store
  const sharedReachable = options.sharedReachable
  const queue = options.queue
  const queueCount = (description: string, name: string, pick: (c: ReturnType<QuotaQueueShape["counts"]>) => number, kind?: "counter") =>
    new ObservedGauge(
      { name, description, unit: "{request}", labels: [] },
      async () => (queue === undefined ? [] : [{ labels: [], value: pick(queue.counts()) }]),
      kind
    )
  /**
   * The process's memory, read when collected (nothing on the request path): its RSS, what V8's
   * heap spaces hold, have reserved and have in memory, and the memory outside the heap that JS
   * objects hold (Buffers). With them a scrape tells a V8 heap that grows from memory held
   * elsewhere (docs/observability.md; the bench's soak reads them). The heap figures are the main
   * thread's isolate's (the store's writer thread has its own, counted only in the RSS).
   */
  let spaces: ReadonlyArray<v8.HeapSpaceInfo> | undefined
  /** One reading of the heap spaces for all the gauges of a scrape (read in one turn), so they agree with each other. */
  const heapSpaces = (): ReadonlyArray<v8.HeapSpaceInfo> => {
    if (spaces === undefined) {
      spaces = v8.getHeapSpaceStatistics()
      setImmediate(() => {
        spaces = undefined
      })
    }
    return spaces
  }
  const heapGauge = (name: string, description: string, pick: (s: v8.HeapSpaceInfo) => number) =>
    new ObservedGauge({ name, description, unit: "By", labels: ["v8js.heap.space.name"] }, async () =>
      heapSpaces().map((s) => ({ labels: [s.space_name], value: pick(s) }))
    )
  const processMemory = [
    new ObservedGauge(
      { name: "process.memory.usage", description: "The process's resident set size (RSS)", unit: "By", labels: [] },
      async () => [{ labels: [], value: process.memoryUsage.rss() }]
    ),
    heapGauge("v8js.memory.heap.used", "Bytes the V8 heap space holds in objects", (s) => s.space_used_size),
    heapGauge("v8js.memory.heap.space.size", "Bytes V8 has reserved for the heap space", (s) => s.space_size),
    heapGauge("v8js.memory.heap.space.physical_size", "Bytes of the heap space in memory", (s) => s.physical_space_size),
    new ObservedGauge(
      {
        name: "gateway.memory.external",
        description: "Bytes outside V8's heap that JS objects hold (Buffers, ArrayBuffers), as process.memoryUsage() reports them",
        unit: "By",
        labels: []
      },
      async () => [{ labels: [], value: process.memoryUsage().external }]
    )
  ]
  const health = [
    queueCount("Requests parked until a quota resets (docs/resilience.md)", "gateway.quota_queue.parked", (c) => c.parked),
    queueCount("Parked requests sent after the reset and answered", "gateway.quota_queue.served", (c) => c.served, "counter"),
    queueCount("Parked requests dropped because their client went away", "gateway.quota_queue.dropped", (c) => c.dropped, "counter"),
    queueCount("Requests refused at once because the quota queue was full", "gateway.quota_queue.refused", (c) => c.refused, "counter"),
    new ObservedGauge(
      {
        name: "gateway.shared_state.up",
        description:
          "1 while the shared state reaches the other gateway processes (Redis connected), 0 while each process serves from its own state",
        unit: "1",
        labels: []
      },
      async () => [{ labels: [], value: sharedReachable === undefined || sharedReachable() ? 1 : 0 }]
    ),
    new ObservedGauge(
      {
        name: "gateway.store.up",
        description: "1 while the store takes writes, 0 from a write it refused for being unavailable until one goes through",
        unit: "1",
        labels: []
      },
      async () => (store === undefined ? [] : [{ labels: [], value: store.up() ? 1 : 0 }])
    ),
    new ObservedGauge(
      {
        name: "gateway.store.backlog",
        description: "Rows held in memory for the store (queued, or waiting for it to take writes again)",
        unit: "{row}",
        labels: []
      },
      async () => (store === undefined ? [] : [{ labels: [], value: store.held() }])
    ),
    new ObservedGauge(
      {
        name: "gateway.store.rows_dropped",
        description:
          "Rows that never reached the store: past GATEWAY_STORE_BACKLOG_MAX_ROWS, rows it refused, rows held at a shutdown it was down for",
        unit: "{row}",
        labels: ["table"]
      },
      async () => (store === undefined ? [] : [...store.dropped()].map(([table, n]) => ({ labels: [table], value: n }))),
      "counter"
    ),
    new ObservedGauge(
      {
        name: "gateway.node.messages",
        description: "Messages this worker of `gateway --workers N` sent to its primary, by what they carry (pub:<topic>, call:<op>)",
        unit: "{message}",
        labels: ["kind"]
      },
      async () => [...sentToPrimary].map(([kind, n]) => ({ labels: [kind], value: n })),
      "counter"
    ),
    new ObservedGauge(
      {
        name: "gateway.requests.deferred",
        description: "New requests that waited for a later turn of the event loop, past a turn's budget (GATEWAY_TURN_BUDGET_MS)",
        unit: "{request}",
        labels: []
      },
      async () => [{ labels: [], value: turnsDeferred.count }],
      "counter"
    ),
    ...processMemory
  ]
  let readers: Promise<{ readonly scrape: () => Promise<string>; readonly close: () => Promise<void> }> | undefined
  const start = () =>
    (readers ??= (async () => {
      const [{ PrometheusExporter, PrometheusSerializer }, { MeterProvider, PeriodicExportingMetricReader }, resource] = await Promise.all([
        import("@opentelemetry/exporter-prometheus"),
        import("@opentelemetry/sdk-metrics"),
        options.resource()
      ])
      const producer = metricProducer(resource, { name: "gateway", version: VERSION }, Object.values(f) as never, [breakerState, ...health])
      const prometheus = new PrometheusExporter({ preventServerStart: true, metricProducers: [producer], withoutScopeInfo: true })
      const all: Array<MetricReader> = [prometheus]
      const push = options.push
      if (push) {
        const exporter = await loadMetricExporter(push)
        all.push(
          new PeriodicExportingMetricReader({
            exporter,
            exportIntervalMillis: push.intervalMillis,
            exportTimeoutMillis: Math.min(push.timeoutMillis, push.intervalMillis),
            metricProducers: [producer]
          })
        )
      }
      const provider = new MeterProvider({ resource, readers: all })
      const serializer = new PrometheusSerializer(undefined, false, undefined, false, true)
      return {
        scrape: async () => serializer.serialize((await prometheus.collect()).resourceMetrics),
        close: () => provider.shutdown().catch(() => undefined)
      }
    })())

  const metrics: GatewayMetricsShape = {
    requestStarted: () => f.inFlight.add(NO_LABELS, 1),
    requestEnded: (m) => {
      f.inFlight.add(NO_LABELS, -1)
      const row = m.row
      const status = statusText(m.status)
      const key = m.keyId ?? ""
      const provider = row?.provider ?? ""
      // A row whose request reached no target names the model as the client wrote it: no label.
      const model = provider === "" ? "" : (row?.model ?? "")
      f.requests.add(labels5(m.route, status, provider, model, key))
      f.requestDuration.record(labels2(m.route, status), m.seconds)
      if (m.errorCode !== undefined) f.errors.add(labels3(m.route, status, m.errorCode))
      if (m.upstreamSeconds !== undefined) f.overhead.record(labels1(m.route), Math.max(0, m.seconds - m.upstreamSeconds))
      if (row === undefined) return
      const u = row.usage
      if (u.input) f.tokens.add(labels4(provider, model, key, "input"), u.input)
      if (u.output) f.tokens.add(labels4(provider, model, key, "output"), u.output)
      if (u.cached) f.tokens.add(labels4(provider, model, key, "cache_read"), u.cached)
      if (u.cacheWrite) f.tokens.add(labels4(provider, model, key, "cache_creation"), u.cacheWrite)
      if (u.reasoning) f.tokens.add(labels4(provider, model, key, "reasoning"), u.reasoning)
      if (u.input && row.connectionId !== null) {
        const requested = row.requestedModel ?? model
        f.promptCache.add(labels4(row.connectionId, requested, key, "input"), u.input)
        if (u.cached) f.promptCache.add(labels4(row.connectionId, requested, key, "cached"), u.cached)
      }
      if (row.costUsd) f.cost.add(labels3(provider, model, key), row.costUsd)
      if (row.fallbackAttempts) f.fallbacks.add(labels3(row.requestedModel ?? model, provider, model), row.fallbackAttempts)
      if (row.cacheHit) f.cacheHits.add(labels2(m.route, model))
    },
    attemptEnded: (m) => {
      f.operationDuration.record(labels5(m.operation, m.provider, m.requestModel, m.responseModel, m.errorType), m.seconds)
      if (m.errorType !== "") return
      const u = m.usage
      if (u?.inputTokens !== undefined)
        f.tokenUsage.record(labels5(m.operation, m.provider, m.requestModel, m.responseModel, "input"), u.inputTokens)
      if (u?.outputTokens !== undefined)
        f.tokenUsage.record(labels5(m.operation, m.provider, m.requestModel, m.responseModel, "output"), u.outputTokens)
      if (m.ttftMs !== null) f.firstChunk.record(labels4(m.operation, m.provider, m.requestModel, m.responseModel), m.ttftMs / 1000)
    },
    requestPath: (path, reason) => f.paths.add(labels2(path, reason)),
    mcpCallEnded: (m) => {
      f.mcpCalls.add(labels3(m.server, m.kind, m.outcome))
      f.mcpDuration.record(labels2(m.server, m.kind), m.seconds)
    },
    scrape: Effect.promise(async () => (await start()).scrape())
  }
  return { metrics, start, close: async () => (readers ? (await readers).close() : undefined) }
}
