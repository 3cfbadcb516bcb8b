import { useMemo, useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Bars, TimeChart } from "../chart"
import { Link, navigate, useLocation } from "../router"
import {
  Badge,
  Button,
  ErrorBox,
  Empty,
  fmtMoney,
  fmtMs,
  fmtNumber,
  Form,
  Loader,
  Page,
  Section,
  Select,
  Stat,
  Table,
  TextInput,
  useLoad
} from "../ui"
import "./Usage.css"

// Usage & cost: requests, tokens and cost over a range (by hour or day), rankings by model,
// provider, key, connection and endpoint, and latency per provider. GET /api/usage/history and
// GET /api/telemetry/summary only. The range is in the URL (?range=7d, or ?from=…&to=…).

const HOUR = 3_600_000
const DAY = 24 * HOUR
const RANGES = [
  { value: "24h", label: "Last 24 hours", ms: DAY, bucket: "hour" as const },
  { value: "7d", label: "Last 7 days", ms: 7 * DAY, bucket: "day" as const },
  { value: "30d", label: "Last 30 days", ms: 30 * DAY, bucket: "day" as const },
  { value: "90d", label: "Last 90 days", ms: 90 * DAY, bucket: "day" as const },
  { value: "custom", label: "Custom dates", ms: 0, bucket: "day" as const }
]
type RangeName = (typeof RANGES)[number]["value"]

type History = Awaited<ReturnType<typeof history>>
const history = (q: { from: string; to: string; groupBy: "hour" | "day" | "model" | "provider" | "apiKey" | "connection" | "endpoint" }) =>
  ok(api.GET("/api/usage/history", { params: { query: q } }))

/** The bucket's start (ms) of an hour or day label ("2026-11-23" or "2026-11-23T10:00:00Z"), UTC. */
const bucketMs = (label: string) => Date.parse(label.length === 10 ? `${label}T00:00:00Z` : label)

/** Every bucket from `from` to `to` with its row (zeros where nothing happened), so the chart has no gaps. */
const fillBuckets = (h: History, unit: "hour" | "day", from: number, to: number) => {
  const step = unit === "hour" ? HOUR : DAY
  const start = Math.floor(from / step) * step
  const byStart = new Map(h.rows.filter((r) => r.key !== null).map((r) => [bucketMs(r.key!), r]))
  const xs: number[] = []
  const rows = []
  for (let t = start; t <= to; t += step) {
    xs.push(t / 1000)
    rows.push(byStart.get(t))
  }
  return { xs, rows }
}

const useQueryRange = () => {
  const { query } = useLocation()
  const range = (RANGES.find((r) => r.value === query.get("range"))?.value ?? (query.get("from") ? "custom" : "7d")) as RangeName
  const now = Date.now()
  if (range === "custom") {
    const from = query.get("from") ?? new Date(now - 7 * DAY).toISOString().slice(0, 10)
    const to = query.get("to") ?? new Date(now).toISOString().slice(0, 10)
    const fromMs = Date.parse(`${from}T00:00:00Z`)
    const toMs = Math.max(fromMs, Date.parse(`${to}T23:59:59Z`))
    return {
      range,
      fromText: from,
      toText: to,
      from: fromMs,
      to: toMs,
      bucket: (toMs - fromMs <= 2 * DAY ? "hour" : "day") as "hour" | "day"
    }
  }
  const r = RANGES.find((x) => x.value === range)!
  // Rounded to the minute, so re-renders reuse the same query.
  const to = Math.ceil(now / 60_000) * 60_000
  return { range, fromText: "", toText: "", from: to - r.ms, to, bucket: r.bucket }
}

const RangePicker = (p: { range: RangeName; fromText: string; toText: string }) => {
  const [from, setFrom] = useState(p.fromText || new Date(Date.now() - 7 * DAY).toISOString().slice(0, 10))
  const [to, setTo] = useState(p.toText || new Date().toISOString().slice(0, 10))
  return (
    <div class="usage-range">
      <Select
        label="Range"
        value={p.range}
        options={RANGES.map((r) => ({ value: r.value, label: r.label }))}
        onChange={(v) => navigate(v === "custom" ? `/usage?from=${from}&to=${to}` : `/usage?range=${v}`, true)}
      />
      {p.range === "custom" && (
        <Form label="Custom range" onSubmit={() => navigate(`/usage?from=${from}&to=${to}`, true)}>
          <TextInput label="From (UTC)" type="date" value={from} onInput={setFrom} required />
          <TextInput label="To (UTC)" type="date" value={to} onInput={setTo} required />
          <Button type="submit">Show</Button>
        </Form>
      )}
    </div>
  )
}

export default function UsagePage() {
  const r = useQueryRange()
  const fromIso = new Date(r.from).toISOString()
  const toIso = new Date(r.to).toISOString()
  const deps = [fromIso, toIso]
  const series = useLoad(() => history({ from: fromIso, to: toIso, groupBy: r.bucket }), [...deps, r.bucket])
  const byModel = useLoad(() => history({ from: fromIso, to: toIso, groupBy: "model" }), deps)
  const byProvider = useLoad(() => history({ from: fromIso, to: toIso, groupBy: "provider" }), deps)
  const byKey = useLoad(() => history({ from: fromIso, to: toIso, groupBy: "apiKey" }), deps)
  const byEndpoint = useLoad(() => history({ from: fromIso, to: toIso, groupBy: "endpoint" }), deps)
  const byConnection = useLoad(() => history({ from: fromIso, to: toIso, groupBy: "connection" }), deps)
  const hours = Math.min(24 * 90, Math.max(1, Math.round((r.to - r.from) / HOUR)))
  const telemetry = useLoad(() => ok(api.GET("/api/telemetry/summary", { params: { query: { hours: String(hours) } } })), [hours])
  const keys = useLoad(() => ok(api.GET("/api/keys")))
  const providers = useLoad(() => ok(api.GET("/api/providers")))
  const keyName = (id: string | null) => (id === null ? "no key" : (keys.data?.keys.find((k) => k.id === id)?.name ?? id))
  const connName = (id: string | null) => (id === null ? "none" : (providers.data?.connections.find((c) => c.id === id)?.name ?? id))

  const chart = useMemo(() => {
    if (!series.data) return undefined
    const { xs, rows } = fillBuckets(series.data, r.bucket, r.from, r.to)
    return {
      xs,
      requests: [
        { label: "Requests", values: rows.map((x) => x?.requests ?? 0) },
        { label: "Errors", values: rows.map((x) => x?.errors ?? 0) }
      ],
      tokens: [
        { label: "Tokens in", values: rows.map((x) => x?.tokensIn ?? 0) },
        { label: "Tokens out", values: rows.map((x) => x?.tokensOut ?? 0) }
      ],
      cost: [{ label: "Cost (USD)", values: rows.map((x) => x?.costUsd ?? 0) }]
    }
  }, [series.data])

  const t = series.data?.totals
  const rank = (h: History | undefined, label: (k: string | null) => string, pick: (row: History["rows"][number]) => number) =>
    (h?.rows ?? [])
      .map((row) => ({ label: label(row.key), value: pick(row) }))
      .filter((x) => x.value > 0)
      .sort((a, b) => b.value - a.value)
      .slice(0, 12)
  const plain = (k: string | null) => k ?? "unknown"
  const unit = r.bucket === "hour" ? "hour" : "day"
  return (
    <Page
      title="Usage & cost"
      description="Requests, tokens and spend through this gateway."
      actions={<RangePicker range={r.range} fromText={r.fromText} toText={r.toText} />}
    >
      <ErrorBox error={series.error} retry={series.reload} />
      <div class="stats" aria-label="Totals for the range">
        <Stat label="Requests" value={fmtNumber(t?.requests)} hint={t ? `${fmtNumber(t.errors)} errors` : undefined} />
        <Stat label="Tokens in" value={fmtNumber(t?.tokensIn)} hint={t ? `${fmtNumber(t.tokensCached)} cached` : undefined} />
        <Stat label="Tokens out" value={fmtNumber(t?.tokensOut)} hint={t ? `${fmtNumber(t.tokensReasoning)} reasoning` : undefined} />
        <Stat label="Cost" value={fmtMoney(t?.costUsd)} />
        <Stat label="Average latency" value={fmtMs(t?.avgLatencyMs)} hint={t ? `${fmtNumber(t.cacheHits)} cache hits` : undefined} />
      </div>
      {t && t.requests === 0 && (
        <Empty title="No requests in this range">
          Send a request with one of your <Link to="/keys">API keys</Link>, or pick a longer range.
        </Empty>
      )}
      <Section title={`Over time (by ${unit}, UTC)`}>
        <Loader of={series}>
          {() =>
            chart && (
              <div class="grid">
                <TimeChart title={`Requests per ${unit}`} x={chart.xs} series={chart.requests} kind="bars" format={(v) => fmtNumber(v)} />
                <TimeChart title={`Tokens per ${unit}`} x={chart.xs} series={chart.tokens} kind="bars" format={(v) => fmtNumber(v)} />
                <TimeChart title={`Cost per ${unit}`} x={chart.xs} series={chart.cost} format={(v) => fmtMoney(v)} />
              </div>
            )
          }
        </Loader>
      </Section>
      <div class="grid">
        <Section title="By model">
          <Bars title="Requests by model" rows={rank(byModel.data, plain, (x) => x.requests)} format={fmtNumber} />
          <Bars title="Cost by model" rows={rank(byModel.data, plain, (x) => x.costUsd)} format={fmtMoney} />
        </Section>
        <Section title="By provider">
          <Bars title="Requests by provider" rows={rank(byProvider.data, plain, (x) => x.requests)} format={fmtNumber} />
          <Bars title="Tokens by provider" rows={rank(byProvider.data, plain, (x) => x.tokensIn + x.tokensOut)} format={fmtNumber} />
        </Section>
        <Section title="By API key">
          <Bars title="Requests by key" rows={rank(byKey.data, keyName, (x) => x.requests)} format={fmtNumber} />
          <Bars title="Cost by key" rows={rank(byKey.data, keyName, (x) => x.costUsd)} format={fmtMoney} />
        </Section>
        <Section title="By endpoint and connection">
          <Bars title="Requests by endpoint" rows={rank(byEndpoint.data, plain, (x) => x.requests)} format={fmtNumber} />
          <Bars title="Requests by connection" rows={rank(byConnection.data, connName, (x) => x.requests)} format={fmtNumber} />
        </Section>
      </div>
      <Section title="Models in detail">
        <Loader of={byModel}>
          {(h) => (
            <Table
              caption="Usage by model"
              rowKey={(x) => x.key ?? "(none)"}
              rows={[...h.rows].sort((a, b) => b.requests - a.requests)}
              empty={<Empty title="Nothing yet">Models appear here once requests go through.</Empty>}
              columns={[
                {
                  label: "Model",
                  render: (x) => (x.key ? <Link to={`/logs?model=${encodeURIComponent(x.key)}`}>{x.key}</Link> : "unknown")
                },
                { label: "Requests", class: "num", render: (x) => fmtNumber(x.requests) },
                { label: "Errors", class: "num", render: (x) => (x.errors > 0 ? <Badge kind="bad">{fmtNumber(x.errors)}</Badge> : "0") },
                { label: "Tokens in", class: "num", render: (x) => fmtNumber(x.tokensIn) },
                { label: "Tokens out", class: "num", render: (x) => fmtNumber(x.tokensOut) },
                { label: "Cost", class: "num", render: (x) => fmtMoney(x.costUsd) },
                { label: "Avg latency", class: "num", render: (x) => fmtMs(x.avgLatencyMs) }
              ]}
            />
          )}
        </Loader>
      </Section>
      <Section title="Latency by provider">
        <Loader of={telemetry}>
          {(s) => (
            <Table
              caption="Latency by provider"
              rowKey={(x) => x.provider}
              rows={s.providers}
              empty={<Empty title="No latency data yet">Each provider's latency appears after its first request in the range.</Empty>}
              columns={[
                { label: "Provider", render: (x) => x.provider },
                { label: "Requests", class: "num", render: (x) => fmtNumber(x.count) },
                { label: "Errors", class: "num", render: (x) => fmtNumber(x.errors) },
                { label: "p50", class: "num", render: (x) => fmtMs(x.p50) },
                { label: "p95", class: "num", render: (x) => fmtMs(x.p95) },
                { label: "p99", class: "num", render: (x) => fmtMs(x.p99) },
                { label: "p50 first token", class: "num", render: (x) => fmtMs(x.p50TtftMs) }
              ]}
            />
          )}
        </Loader>
      </Section>
    </Page>
  )
}
