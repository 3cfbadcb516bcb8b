import { useMemo, useState } from "preact/hooks"
import { can } from "../access"
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
  type Loaded,
  Loader,
  Page,
  Section,
  Select,
  Stat,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import "./Usage.css"

// Usage & cost: requests, tokens and cost over a range (by hour or day), rankings by team, user,
// model, provider, key, connection and endpoint, and latency per provider. GET /api/usage/history,
// GET /api/usage/export (the CSV downloads) and GET /api/telemetry/summary only. The range and the
// team or user shown are in the URL (?range=7d, or ?from=…&to=…; &team=<id>, &user=<id>).

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

type GroupBy = "hour" | "day" | "model" | "requestedModel" | "provider" | "apiKey" | "connection" | "endpoint" | "team" | "user"
/** The range, and the team or user the page is narrowed to. */
type Scope = { from: string; to: string; teamId?: string; userId?: string }
type History = Awaited<ReturnType<typeof history>>
const history = (q: Scope & { groupBy: GroupBy }) => ok(api.GET("/api/usage/history", { params: { query: q } }))

/** Saves a download: a temporary object URL on a link with `download`, named as the API names it. */
const saveBlob = (blob: Blob, response: Response, fallback: string) => {
  const m = /filename="?([^";]+)"?/i.exec(response.headers.get("content-disposition") ?? "")
  const a = document.createElement("a")
  a.href = URL.createObjectURL(blob)
  a.download = m?.[1] ?? fallback
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000)
}

/** CSV downloads of the range (GET /api/usage/export): one line per request with its key's owner, or the teams' or users' totals. */
const Downloads = (p: { scope: Scope }) => {
  const [run, busy] = useAction()
  const download = (groupBy?: "team" | "user") =>
    void run(async () => {
      const r = await api.GET("/api/usage/export", { params: { query: groupBy ? { ...p.scope, groupBy } : p.scope }, parseAs: "blob" })
      const blob = await ok(Promise.resolve(r))
      saveBlob(blob as unknown as Blob, r.response, "usage.csv")
    }, "Download started")
  return (
    <div class="usage-downloads" role="group" aria-label="Download CSV">
      <Button kind="plain" busy={busy} onClick={() => download()}>
        CSV per request
      </Button>
      <Button kind="plain" busy={busy} onClick={() => download("team")}>
        CSV by team
      </Button>
      <Button kind="plain" busy={busy} onClick={() => download("user")}>
        CSV by user
      </Button>
    </div>
  )
}

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

/** The page's URL with one parameter changed (others kept). */
const withParam = (query: URLSearchParams, name: string, value: string | undefined) => {
  const q = new URLSearchParams(query)
  if (value) q.set(name, value)
  else q.delete(name)
  const text = q.toString()
  return text ? `/usage?${text}` : "/usage"
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

/**
 * The team or user the page is narrowed to, chosen from those with usage in the range (the
 * groups' names, so the page needs no directory call).
 */
const OwnerPicker = (p: { query: URLSearchParams; teams: History | undefined; users: History | undefined }) => {
  const team = p.query.get("team") ?? ""
  const user = p.query.get("user") ?? ""
  const options = (h: History | undefined, current: string, none: string) => [
    { value: "", label: none },
    ...(h?.rows ?? []).flatMap((r) => (r.key === null ? [] : [{ value: r.key, label: r.name ?? r.key }])),
    ...(current && !h?.rows.some((r) => r.key === current) ? [{ value: current, label: current }] : [])
  ]
  return (
    <>
      <Select
        label="Team"
        value={team}
        options={options(p.teams, team, "Every team")}
        onChange={(v) => navigate(withParam(p.query, "team", v), true)}
      />
      <Select
        label="User"
        value={user}
        options={options(p.users, user, "Every user")}
        onChange={(v) => navigate(withParam(p.query, "user", v), true)}
      />
    </>
  )
}

const RangePicker = (p: { range: RangeName; fromText: string; toText: string }) => {
  const { query } = useLocation()
  /** A new range keeps the team or user chosen. */
  const withOwner = (path: string) =>
    ["team", "user"].reduce((to, name) => (query.get(name) ? `${to}&${name}=${encodeURIComponent(query.get(name)!)}` : to), path)
  const [from, setFrom] = useState(p.fromText || new Date(Date.now() - 7 * DAY).toISOString().slice(0, 10))
  const [to, setTo] = useState(p.toText || new Date().toISOString().slice(0, 10))
  return (
    <div class="usage-range">
      <Select
        label="Range"
        value={p.range}
        options={RANGES.map((r) => ({ value: r.value, label: r.label }))}
        onChange={(v) => navigate(withOwner(v === "custom" ? `/usage?from=${from}&to=${to}` : `/usage?range=${v}`), true)}
      />
      {p.range === "custom" && (
        <Form label="Custom range" onSubmit={() => navigate(withOwner(`/usage?from=${from}&to=${to}`), true)}>
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
  const { query } = useLocation()
  const fromIso = new Date(r.from).toISOString()
  const toIso = new Date(r.to).toISOString()
  const teamId = query.get("team") ?? undefined
  const userId = query.get("user") ?? undefined
  const scope: Scope = { from: fromIso, to: toIso, ...(teamId ? { teamId } : {}), ...(userId ? { userId } : {}) }
  const deps = [fromIso, toIso, teamId, userId]
  const series = useLoad(() => history({ ...scope, groupBy: r.bucket }), [...deps, r.bucket])
  const byTeam = useLoad(() => history({ ...scope, groupBy: "team" }), deps)
  const byUser = useLoad(() => history({ ...scope, groupBy: "user" }), deps)
  // The pickers offer every team and user with usage in the range, whatever is chosen.
  const allTeams = useLoad(() => history({ from: fromIso, to: toIso, groupBy: "team" }), [fromIso, toIso])
  const allUsers = useLoad(() => history({ from: fromIso, to: toIso, groupBy: "user" }), [fromIso, toIso])
  const byModel = useLoad(() => history({ ...scope, groupBy: "model" }), deps)
  const byProvider = useLoad(() => history({ ...scope, groupBy: "provider" }), deps)
  const byKey = useLoad(() => history({ ...scope, groupBy: "apiKey" }), deps)
  const byEndpoint = useLoad(() => history({ ...scope, groupBy: "endpoint" }), deps)
  const byConnection = useLoad(() => history({ ...scope, groupBy: "connection" }), deps)
  const byRequested = useLoad(() => history({ ...scope, groupBy: "requestedModel" }), deps)
  const hours = Math.min(24 * 90, Math.max(1, Math.round((r.to - r.from) / HOUR)))
  // Latency and connection names are the gateway's configuration: read by the roles that may (docs/teams.md).
  const telemetry = useLoad(
    () =>
      can("usage.telemetry")
        ? ok(api.GET("/api/telemetry/summary", { params: { query: { hours: String(hours) } } }))
        : new Promise<never>(() => {}),
    [hours]
  )
  const keys = useLoad(() => ok(api.GET("/api/keys")))
  const providers = useLoad(() => (can("providers.list") ? ok(api.GET("/api/providers")) : Promise.resolve({ connections: [] })))
  const keyName = (id: string | null) => (id === null ? "no key" : (keys.data?.keys.find((k) => k.id === id)?.name ?? id))
  /** A team's or user's name as the history gives it (null: usage of keys without one). */
  const ownerName = (h: History | undefined, none: string) => (id: string | null) =>
    id === null ? none : (h?.rows.find((x) => x.key === id)?.name ?? id)
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
      actions={
        <div class="usage-filters">
          <RangePicker range={r.range} fromText={r.fromText} toText={r.toText} />
          <OwnerPicker query={query} teams={allTeams.data} users={allUsers.data} />
        </div>
      }
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
        <Section title="By team" actions={<Downloads scope={scope} />}>
          <Bars title="Cost by team" rows={rank(byTeam.data, ownerName(byTeam.data, "no team"), (x) => x.costUsd)} format={fmtMoney} />
          <Bars
            title="Requests by team"
            rows={rank(byTeam.data, ownerName(byTeam.data, "no team"), (x) => x.requests)}
            format={fmtNumber}
          />
        </Section>
        <Section title="By user">
          <Bars title="Cost by user" rows={rank(byUser.data, ownerName(byUser.data, "no user"), (x) => x.costUsd)} format={fmtMoney} />
          <Bars
            title="Requests by user"
            rows={rank(byUser.data, ownerName(byUser.data, "no user"), (x) => x.requests)}
            format={fmtNumber}
          />
        </Section>
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
      <Section title="Teams and users in detail">
        <p class="muted">
          A key counts for its owner as it is now: a user's key for the user and for each of the user's teams, a team's key for the team (so
          the teams can add up to more than the total).
        </p>
        <div class="grid">
          <OwnerTable of={byTeam} kind="team" none="Keys without a team" query={query} />
          <OwnerTable of={byUser} kind="user" none="Keys without a user" query={query} />
        </div>
      </Section>
      <Section title="Prompt cache">
        <p class="muted">
          Input tokens the providers read from their prompt cache, over all input tokens. A conversation stays on the account whose cache
          holds its beginning (docs/routing.md, "Prompt-cache affinity").
        </p>
        <div class="grid">
          <CacheTable of={byConnection} title="By connection" label={connName} />
          <CacheTable of={byRequested} title="By model or combo asked for" label={plain} />
          <CacheTable of={byKey} title="By API key" label={keyName} />
        </div>
      </Section>
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
      {can("usage.telemetry") && (
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
      )}
    </Page>
  )
}

/** Requests, tokens and cost per team or per user, each name a link narrowing the page to it. */
const OwnerTable = (p: { of: Loaded<History>; kind: "team" | "user"; none: string; query: URLSearchParams }) => (
  <Loader of={p.of}>
    {(h) => (
      <Table
        caption={p.kind === "team" ? "Usage by team" : "Usage by user"}
        rowKey={(x) => x.key ?? "(none)"}
        rows={[...h.rows].sort((a, b) => b.costUsd - a.costUsd || b.requests - a.requests)}
        empty={<Empty title="Nothing yet">{p.kind === "team" ? "Teams" : "Users"} appear here once their keys make requests.</Empty>}
        columns={[
          {
            label: p.kind === "team" ? "Team" : "User",
            render: (x) => (x.key ? <Link to={withParam(p.query, p.kind, x.key)}>{x.name ?? x.key}</Link> : p.none)
          },
          { label: "Requests", class: "num", render: (x) => fmtNumber(x.requests) },
          { label: "Tokens in", class: "num", render: (x) => fmtNumber(x.tokensIn) },
          { label: "Tokens out", class: "num", render: (x) => fmtNumber(x.tokensOut) },
          { label: "Cost", class: "num", render: (x) => fmtMoney(x.costUsd) }
        ]}
      />
    )}
  </Loader>
)

/** The prompt cache's hit ratio per connection, requested model (combo) or key: the groups that had input. */
const CacheTable = (p: { of: Loaded<History>; title: string; label: (k: string | null) => string }) => (
  <Loader of={p.of}>
    {(h) => (
      <Table
        caption={`Prompt cache ${p.title.toLowerCase()}`}
        rowKey={(x) => x.key ?? "(none)"}
        rows={h.rows.filter((x) => x.tokensIn > 0).sort((a, b) => b.tokensIn - a.tokensIn)}
        empty={<Empty title="Nothing yet">Input tokens appear here once requests go through.</Empty>}
        columns={[
          { label: p.title.replace(/^By /, "").replace(/^./, (c) => c.toUpperCase()), render: (x) => p.label(x.key) },
          { label: "Tokens in", class: "num", render: (x) => fmtNumber(x.tokensIn) },
          { label: "Cached", class: "num", render: (x) => fmtNumber(x.tokensCached) },
          {
            label: "Hit ratio",
            class: "num",
            render: (x) => (x.cachedInputRatio === null ? "–" : `${(x.cachedInputRatio * 100).toFixed(1)}%`)
          }
        ]}
      />
    )}
  </Loader>
)
