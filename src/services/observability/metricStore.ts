/**
 * The gateway's metrics as plain in-memory series (a joined key and a `Map.get` per update, not the SDK's instruments),
 * read as OpenTelemetry metric data by both readers; label sets past `MAX_SERIES` go to one overflow series
 * (docs/observability.md#what-it-costs).
 */
import type { Attributes, HrTime, ValueType } from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { AggregationTemporality, CollectionResult, DataPointType, MetricData, MetricProducer } from "@opentelemetry/sdk-metrics"

// The SDK's enum values, written out: this module is on the request path's start-up, and loading
// the SDK costs more than half a second; it is loaded only when metrics are first read.
const CUMULATIVE = 1 as AggregationTemporality.CUMULATIVE
const HISTOGRAM = 0 as DataPointType.HISTOGRAM
const GAUGE = 2 as DataPointType.GAUGE
const SUM = 3 as DataPointType.SUM
const DOUBLE = 1 as ValueType.DOUBLE

/** Label sets kept per metric family before further ones go to the overflow series. */
export const MAX_SERIES = 2000

const OVERFLOW: Attributes = Object.freeze({ "otel.metric.overflow": true })

interface Descriptor {
  /** The OpenTelemetry name (`gen_ai.client.token.usage`); Prometheus gets it with `.` → `_`. */
  readonly name: string
  readonly description: string
  readonly unit: string
  /** Attribute names, in the order `labels` are passed to updates. */
  readonly labels: ReadonlyArray<string>
}

const hrTime = (ms: number): HrTime => [Math.floor(ms / 1000), (ms % 1000) * 1e6]

const attributesOf = (names: ReadonlyArray<string>, values: ReadonlyArray<string>): Attributes => {
  const out: Attributes = {}
  for (let i = 0; i < names.length; i++) out[names[i]!] = values[i] ?? ""
  return out
}

/** One level of the label trie: the next label's value → the level below (or, last, the series). */
type Level<S> = Map<string, Level<S> | Series<S>>
interface Series<S> {
  readonly attributes: Attributes
  readonly state: S
}

abstract class Family<S> {
  /**
   * Series by label values, one map level per label: a lookup hashes each value, and values that
   * come from configuration (provider ids, model names, route templates) are the same string
   * objects on every request, whose hash V8 keeps; a joined key would be a new string to hash.
   */
  private readonly root: Level<S> = new Map()
  protected readonly series: Array<Series<S>> = []
  private overflow: Series<S> | undefined
  constructor(readonly descriptor: Descriptor) {}
  protected abstract fresh(): S
  /**
   * The series of a label set (created on first use, or the overflow series past the bound).
   * `labels` is only read here, never kept (a new series copies it into its attributes): callers
   * pass one reused array per length (GatewayMetrics).
   */
  protected at(labels: ReadonlyArray<string>): S {
    const last = labels.length - 1
    if (last < 0) return (this.series[0] ??= { attributes: {}, state: this.fresh() }).state
    let level = this.root
    for (let i = 0; i < last; i++) {
      const value = labels[i]!
      let next = level.get(value) as Level<S> | undefined
      if (next === undefined) {
        next = new Map()
        level.set(value, next)
      }
      level = next
    }
    const found = level.get(labels[last]!) as Series<S> | undefined
    if (found !== undefined) return found.state
    if (this.series.length >= MAX_SERIES) {
      this.overflow ??= this.added({ attributes: OVERFLOW, state: this.fresh() })
      return this.overflow.state
    }
    const created = this.added({ attributes: attributesOf(this.descriptor.labels, labels), state: this.fresh() })
    level.set(labels[last]!, created)
    return created.state
  }
  private added(series: Series<S>): Series<S> {
    this.series.push(series)
    return series
  }
  abstract data(start: HrTime, now: HrTime): MetricData | undefined
  protected otelDescriptor() {
    return { name: this.descriptor.name, description: this.descriptor.description, unit: this.descriptor.unit, valueType: DOUBLE }
  }
}

/** A monotonic sum (Prometheus: `<name>_total`). */
export class Counter extends Family<{ value: number }> {
  protected fresh() {
    return { value: 0 }
  }
  add(labels: ReadonlyArray<string>, value = 1): void {
    this.at(labels).value += value
  }
  data(start: HrTime, now: HrTime): MetricData | undefined {
    if (this.series.length === 0) return undefined
    const dataPoints = this.series.map(({ attributes, state }) => ({ startTime: start, endTime: now, attributes, value: state.value }))
    return { descriptor: this.otelDescriptor(), aggregationTemporality: CUMULATIVE, dataPointType: SUM, isMonotonic: true, dataPoints }
  }
}

/** A value that goes up and down (in-flight requests). */
export class UpDown extends Family<{ value: number }> {
  protected fresh() {
    return { value: 0 }
  }
  add(labels: ReadonlyArray<string>, value: number): void {
    this.at(labels).value += value
  }
  data(start: HrTime, now: HrTime): MetricData | undefined {
    if (this.series.length === 0) return undefined
    const dataPoints = this.series.map(({ attributes, state }) => ({ startTime: start, endTime: now, attributes, value: state.value }))
    return { descriptor: this.otelDescriptor(), aggregationTemporality: CUMULATIVE, dataPointType: SUM, isMonotonic: false, dataPoints }
  }
}

interface Buckets {
  readonly counts: Array<number>
  sum: number
  count: number
  min: number
  max: number
}

/** Explicit-bucket histogram (Prometheus: `<name>_bucket`, `_sum`, `_count`). */
export class Histogram extends Family<Buckets> {
  constructor(
    descriptor: Descriptor,
    readonly boundaries: ReadonlyArray<number>
  ) {
    super(descriptor)
  }
  protected fresh(): Buckets {
    return { counts: new Array<number>(this.boundaries.length + 1).fill(0), sum: 0, count: 0, min: Infinity, max: -Infinity }
  }
  record(labels: ReadonlyArray<string>, value: number): void {
    if (!(value >= 0) || value === Infinity) return
    const b = this.at(labels)
    const bounds = this.boundaries
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    b.counts[i]!++
    b.sum += value
    b.count++
    if (value < b.min) b.min = value
    if (value > b.max) b.max = value
  }
  data(start: HrTime, now: HrTime): MetricData | undefined {
    if (this.series.length === 0) return undefined
    const boundaries = this.boundaries.slice()
    const dataPoints = this.series.map(({ attributes, state }) => ({
      startTime: start,
      endTime: now,
      attributes,
      value: { buckets: { boundaries, counts: state.counts.slice() }, sum: state.sum, count: state.count, min: state.min, max: state.max }
    }))
    return { descriptor: this.otelDescriptor(), aggregationTemporality: CUMULATIVE, dataPointType: HISTOGRAM, dataPoints }
  }
}

/** A gauge read when metrics are collected (breaker state). */
export class ObservedGauge {
  constructor(
    readonly descriptor: Descriptor,
    private readonly read: () => Promise<ReadonlyArray<{ readonly labels: ReadonlyArray<string>; readonly value: number }>>,
    /** `counter`: a total another service keeps (a monotonic sum, Prometheus `<name>_total`), read when collected. */
    private readonly kind: "gauge" | "counter" = "gauge"
  ) {}
  async data(start: HrTime, now: HrTime): Promise<MetricData | undefined> {
    const values = await this.read()
    if (values.length === 0) return undefined
    const dataPoints = values.map((v) => ({
      startTime: start,
      endTime: now,
      attributes: attributesOf(this.descriptor.labels, v.labels),
      value: v.value
    }))
    const descriptor = {
      name: this.descriptor.name,
      description: this.descriptor.description,
      unit: this.descriptor.unit,
      valueType: DOUBLE
    }
    return this.kind === "counter"
      ? { descriptor, aggregationTemporality: CUMULATIVE, dataPointType: SUM, isMonotonic: true, dataPoints }
      : { descriptor, aggregationTemporality: CUMULATIVE, dataPointType: GAUGE, dataPoints }
  }
}

/** The families as one OpenTelemetry `MetricProducer` (what both readers collect). */
export const metricProducer = (
  resource: Resource,
  scope: { readonly name: string; readonly version: string },
  families: ReadonlyArray<Family<unknown>>,
  gauges: ReadonlyArray<ObservedGauge>
): MetricProducer => {
  const start = hrTime(Date.now())
  return {
    collect: async (): Promise<CollectionResult> => {
      const now = hrTime(Date.now())
      const metrics: Array<MetricData> = []
      for (const f of families) {
        const d = f.data(start, now)
        if (d) metrics.push(d)
      }
      for (const g of gauges) {
        const d = await g.data(start, now).catch(() => undefined)
        if (d) metrics.push(d)
      }
      return { resourceMetrics: { resource, scopeMetrics: [{ scope, metrics }] }, errors: [] }
    }
  }
}

export type AnyFamily = Family<unknown>
