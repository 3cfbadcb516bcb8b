import { useEffect, useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Link, navigate, useLocation } from "../router"
import {
  Badge,
  Button,
  Dialog,
  Empty,
  ErrorBox,
  fmtDate,
  fmtMoney,
  fmtMs,
  fmtNumber,
  Form,
  Loader,
  Loading,
  Page,
  Section,
  Select,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import "./Logs.css"

// Request log: GET /api/usage/request-logs with filters, newest first, older pages by `before`
// (the previous page's nextBefore). The filters live in the URL query, so a filtered view is a
// link. A row opens its details, with its connection's usage (GET /api/usage/{connection id}).

type RequestRow = Awaited<ReturnType<typeof fetchPage>>["requests"][number]
const PAGE = 50
const FILTERS = ["model", "provider", "key", "status", "requestId"] as const
type Filters = Record<(typeof FILTERS)[number], string>

const fetchPage = (f: Filters, before?: number) =>
  ok(
    api.GET("/api/usage/request-logs", {
      params: {
        query: {
          limit: String(PAGE),
          ...(before !== undefined ? { before: String(before) } : {}),
          ...(f.model ? { model: f.model } : {}),
          ...(f.provider ? { provider: f.provider } : {}),
          ...(f.key ? { apiKeyId: f.key } : {}),
          ...(f.status ? { status: f.status } : {}),
          ...(f.requestId ? { requestId: f.requestId } : {})
        }
      }
    })
  )

const filtersOf = (q: URLSearchParams): Filters => Object.fromEntries(FILTERS.map((k) => [k, q.get(k) ?? ""])) as Filters
const queryOf = (f: Filters) => {
  const q = new URLSearchParams()
  for (const k of FILTERS) if (f[k].trim()) q.set(k, f[k].trim())
  const s = q.toString()
  return s ? `/logs?${s}` : "/logs"
}

const statusKind = (s: number) => (s >= 200 && s < 300 ? "ok" : s === 429 || (s >= 400 && s < 500) ? "warn" : "bad")

const FilterForm = (p: { value: Filters; keys: ReadonlyArray<{ id: string; name: string }> }) => {
  const [f, setF] = useState<Filters>(p.value)
  useEffect(() => setF(p.value), [queryOf(p.value)])
  const set = (k: keyof Filters) => (v: string) => setF((x) => ({ ...x, [k]: v }))
  const statusChoice = f.status === "" || f.status === "ok" || f.status === "error" ? f.status : "code"
  return (
    <Form label="Filter requests" onSubmit={() => navigate(queryOf(f))}>
      <TextInput label="Model" type="search" value={f.model} onInput={set("model")} placeholder="e.g. a combo or provider/model" />
      <TextInput label="Provider" type="search" value={f.provider} onInput={set("provider")} placeholder="e.g. openai" />
      <Select
        label="API key"
        value={f.key}
        options={[
          { value: "", label: "any key" },
          ...p.keys.map((k) => ({ value: k.id, label: k.name })),
          ...(f.key && !p.keys.some((k) => k.id === f.key) ? [{ value: f.key, label: f.key }] : [])
        ]}
        onChange={set("key")}
      />
      <Select
        label="Status"
        value={statusChoice}
        options={[
          { value: "", label: "any" },
          { value: "ok", label: "ok (2xx)" },
          { value: "error", label: "error (not 2xx)" },
          { value: "code", label: "one status code…" }
        ]}
        onChange={(v) => set("status")(v === "code" ? "429" : v)}
      />
      {statusChoice === "code" && <TextInput label="Status code" value={f.status} onInput={set("status")} placeholder="429" />}
      <TextInput label="Request id" type="search" value={f.requestId} onInput={set("requestId")} />
      <div class="actions">
        <Button kind="primary" type="submit">
          Search
        </Button>
        <Button onClick={() => navigate("/logs")}>Clear filters</Button>
      </div>
    </Form>
  )
}

const Detail = (p: { row: RequestRow; keyName: string }) => {
  const r = p.row
  const conn = useLoad(
    () => (r.connectionId ? ok(api.GET("/api/usage/{id}", { params: { path: { id: r.connectionId } } })) : Promise.resolve(undefined)),
    [r.connectionId]
  )
  const facts: Array<[string, string | number | null | undefined]> = [
    ["Time", fmtDate(r.time)],
    ["Request id", r.requestId],
    ["Status", r.status],
    ["Endpoint", r.endpoint],
    ["Requested model", r.requestedModel],
    ["Served model", r.model],
    ["Provider", r.provider],
    ["Connection", r.connectionId],
    ["API key", p.keyName],
    ["Streamed", r.stream ? "yes" : "no"],
    ["Cache hit", r.cacheHit ? "yes" : "no"],
    ["Fallback attempts", r.fallbackAttempts],
    ["Tokens in", fmtNumber(r.tokensIn)],
    ["Tokens out", fmtNumber(r.tokensOut)],
    ["Cached tokens", fmtNumber(r.tokensCached)],
    ["Reasoning tokens", fmtNumber(r.tokensReasoning)],
    ["Cache-write tokens", fmtNumber(r.tokensCacheWrite)],
    ["Cost", fmtMoney(r.costUsd)],
    ["Latency", fmtMs(r.latencyMs)],
    ["First token", fmtMs(r.ttftMs)]
  ]
  return (
    <>
      {r.error && (
        <p class="error-box" role="note">
          {r.error}
        </p>
      )}
      <dl class="logs-facts">
        {facts.map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{v === null || v === undefined || v === "" ? "—" : String(v)}</dd>
          </div>
        ))}
      </dl>
      {r.connectionId && (
        <>
          <h3>This connection</h3>
          <Loader of={conn}>
            {(c) =>
              c && (
                <dl class="logs-facts">
                  <div>
                    <dt>Name</dt>
                    <dd>
                      {c.name} ({c.provider})
                    </dd>
                  </div>
                  <div>
                    <dt>Last 24 h</dt>
                    <dd>
                      {fmtNumber(c.last24h.requests)} requests, {(c.last24h.errorRate * 100).toFixed(1)} % errors, p95{" "}
                      {fmtMs(c.last24h.p95LatencyMs)}
                    </dd>
                  </div>
                  <div>
                    <dt>Last 7 days</dt>
                    <dd>
                      {fmtNumber(c.last7d.requests)} requests, {fmtMoney(c.last7d.costUsd)}
                    </dd>
                  </div>
                </dl>
              )
            }
          </Loader>
        </>
      )}
      <div class="actions">
        <Link to={`/logs?requestId=${encodeURIComponent(r.requestId)}`}>Link to this request</Link>
        {r.model && <Link to={`/logs?model=${encodeURIComponent(r.model)}`}>All requests of {r.model}</Link>}
      </div>
    </>
  )
}

export default function LogsPage() {
  const { query } = useLocation()
  const filters = filtersOf(query)
  const key = queryOf(filters)
  const keys = useLoad(() => ok(api.GET("/api/keys")))
  const first = useLoad(() => fetchPage(filters), [key])
  const [older, setOlder] = useState<{ rows: RequestRow[]; next: number | null } | undefined>()
  const [open, setOpen] = useState<RequestRow | undefined>()
  const [run, busy] = useAction()
  useEffect(() => {
    // A new filter (a search, Back, or a link in the details) starts from its newest page.
    setOlder(undefined)
    setOpen(undefined)
  }, [key])
  const keyName = (id: string | null) => (id === null ? "—" : (keys.data?.keys.find((k) => k.id === id)?.name ?? id))
  const rows = [...(first.data?.requests ?? []), ...(older?.rows ?? [])]
  const next = older ? older.next : (first.data?.nextBefore ?? null)
  const filtered = FILTERS.some((k) => filters[k])
  return (
    <Page
      title="Request log"
      description="Every request through the gateway, newest first."
      actions={
        <Button
          onClick={() => {
            setOlder(undefined)
            first.reload()
          }}
        >
          Refresh
        </Button>
      }
    >
      <Section title="Search">
        <FilterForm value={filters} keys={keys.data?.keys ?? []} />
      </Section>
      <Section title={filtered ? "Matching requests" : "Requests"}>
        <ErrorBox error={first.error} retry={first.reload} />
        {first.data === undefined ? (
          first.loading && <Loading />
        ) : (
          <>
            <Table
              caption="Request log"
              rowKey={(r) => String(r.id)}
              rows={rows}
              empty={
                filtered ? (
                  <Empty title="No request matches these filters">
                    Change or <Link to="/logs">clear the filters</Link>.
                  </Empty>
                ) : (
                  <Empty title="No requests yet">
                    Send a request with one of your <Link to="/keys">API keys</Link>; it appears here with its tokens, cost and latency.
                  </Empty>
                )
              }
              columns={[
                {
                  label: "Time",
                  render: (r) => (
                    <button type="button" class="linklike" onClick={() => setOpen(r)}>
                      {fmtDate(r.time)}
                      <span class="sr-only"> (details of request {r.requestId})</span>
                    </button>
                  )
                },
                {
                  label: "Model",
                  render: (r) =>
                    r.requestedModel && r.requestedModel !== r.model
                      ? `${r.requestedModel} → ${r.model ?? "?"}`
                      : (r.model ?? r.requestedModel ?? "—")
                },
                { label: "Provider", render: (r) => r.provider ?? "—" },
                { label: "Key", render: (r) => keyName(r.apiKeyId) },
                { label: "Status", render: (r) => <Badge kind={statusKind(r.status)}>{r.status}</Badge> },
                { label: "Tokens", class: "num", render: (r) => `${fmtNumber(r.tokensIn)} / ${fmtNumber(r.tokensOut)}` },
                { label: "Cost", class: "num", render: (r) => fmtMoney(r.costUsd) },
                { label: "Latency", class: "num", render: (r) => fmtMs(r.latencyMs) }
              ]}
            />
            {next !== null && rows.length > 0 && (
              <div class="actions logs-more">
                <Button
                  busy={busy}
                  onClick={() =>
                    void run(() => fetchPage(filters, next)).then((p) => {
                      if (p) setOlder({ rows: [...(older?.rows ?? []), ...p.requests], next: p.nextBefore })
                    })
                  }
                >
                  Load older requests
                </Button>
              </div>
            )}
          </>
        )}
      </Section>
      <Dialog open={!!open} title={`Request ${open?.requestId ?? ""}`} onClose={() => setOpen(undefined)}>
        {open && <Detail row={open} keyName={keyName(open.apiKeyId)} />}
      </Dialog>
    </Page>
  )
}
