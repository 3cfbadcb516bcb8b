import { api, ok } from "../api/client"
import { type LiveEvent, useLiveFeed } from "../live"
import { Link } from "../router"
import { Badge, Empty, ErrorBox, fmtMoney, fmtNumber, Loader, Page, Section, Stat, Table, useInterval, useLoad } from "../ui"

const startOfToday = () => {
  const d = new Date()
  d.setHours(0, 0, 0, 0)
  return d.toISOString()
}

const stateKind = (s: string): "ok" | "warn" | "bad" | "muted" =>
  s === "ok" || s === "CLOSED" || s === "active"
    ? "ok"
    : s === "degraded" || s === "DEGRADED" || s === "HALF_OPEN" || s === "cooldown"
      ? "warn"
      : s === "down" || s === "OPEN" || s === "expired" || s === "error"
        ? "bad"
        : "muted"

const describe = (e: LiveEvent): string => {
  const d = e.data as Record<string, string | number | null | undefined>
  switch (e.event) {
    case "request.completed":
    case "request.failed":
      return `${d.model ?? d.requested_model ?? "?"}${d.provider ? ` via ${d.provider}` : ""} · ${d.status} · ${fmtNumber(Number(d.tokens_in ?? 0))} in / ${fmtNumber(Number(d.tokens_out ?? 0))} out${Number(d.cost_usd) > 0 ? ` · ${fmtMoney(Number(d.cost_usd))}` : ""}${d.error ? ` · ${d.error}` : ""}`
    case "provider.error":
    case "provider.recovered":
      return `${d.provider ?? ""} ${d.origin ?? ""} ${d.state ?? ""}`.trim()
    case "quota.exceeded":
      return `${d.source ?? "quota"} for key ${d.api_key_id ?? "?"}`
    case "combo.switched":
      return `${d.combo ?? d.name ?? "combo"}: ${d.from ?? "?"} → ${d.to ?? "?"}`
    default:
      return Object.entries(d)
        .slice(0, 4)
        .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
        .join(" ")
  }
}

const eventKind = (name: string): "ok" | "bad" | "warn" | "info" =>
  name === "request.completed" || name === "provider.recovered"
    ? "ok"
    : name === "request.failed" || name === "provider.error"
      ? "bad"
      : name === "quota.exceeded"
        ? "warn"
        : "info"

const LiveFeed = () => {
  const { events, state, detail } = useLiveFeed()
  return (
    <Section
      title="Live requests"
      actions={
        <Badge kind={state === "open" ? "ok" : state === "off" ? "muted" : "warn"}>
          {state === "open" ? "live" : state === "off" ? "off" : state === "connecting" ? "connecting…" : "reconnecting…"}
        </Badge>
      }
    >
      {state === "off" && <p class="muted">{detail}</p>}
      {events.length === 0 ? (
        <Empty title="No requests yet">
          Point a client at this gateway's base URL with one of your <Link to="/keys">API keys</Link>; each request appears here as it
          finishes.
        </Empty>
      ) : (
        <ul class="feed" aria-label="Live events" aria-live="off">
          {events.map((e, i) => (
            <li key={`${e.timestamp}-${i}`}>
              <Badge kind={eventKind(e.event)}>{e.event}</Badge>
              <span class="feed-text" title={describe(e)}>
                {describe(e)}
              </span>
              <time class="when" dateTime={e.timestamp}>
                {new Date(e.timestamp).toLocaleTimeString()}
              </time>
            </li>
          ))}
        </ul>
      )}
    </Section>
  )
}

export default function OverviewPage() {
  const init = useLoad(() => ok(api.GET("/api/init")))
  const today = useLoad(() => ok(api.GET("/api/usage/history", { params: { query: { from: startOfToday() } } })))
  const health = useLoad(() => ok(api.GET("/api/monitoring/health")))
  const resilience = useLoad(() => ok(api.GET("/api/resilience")))
  useInterval(() => {
    today.reload()
    health.reload()
    resilience.reload()
  }, 10_000)
  const t = today.data?.totals
  return (
    <Page title="Overview" description="What the gateway is doing now.">
      {init.data && !init.data.setupComplete && (
        <Section title="Get started">
          <ol>
            <li>
              {init.data.providersConfigured ? "✓ " : ""}
              <Link to="/providers">Add a provider</Link> with its API key, and test it.
            </li>
            <li>
              {init.data.keysConfigured ? "✓ " : ""}
              <Link to="/keys">Create an API key</Link> for your clients.
            </li>
            <li>
              Set up a coding tool in one click on <Link to="/tools">Coding tools</Link>, or point any OpenAI, Anthropic, Gemini or Ollama
              client at <code>{location.origin}/v1</code>.
            </li>
          </ol>
        </Section>
      )}
      <ErrorBox error={today.error} retry={today.reload} />
      <div class="stats" aria-label="Today">
        <Stat label="Requests today" value={fmtNumber(t?.requests)} />
        <Stat label="Errors today" value={fmtNumber(t?.errors)} />
        <Stat label="Spend today" value={fmtMoney(t?.costUsd)} />
        <Stat
          label="Tokens today"
          value={t ? fmtNumber(t.tokensIn + t.tokensOut) : "—"}
          hint={t ? `${fmtNumber(t.tokensIn)} in, ${fmtNumber(t.tokensOut)} out` : undefined}
        />
        <Stat
          label="Health"
          value={health.data ? <Badge kind={stateKind(health.data.status)}>{health.data.status}</Badge> : "—"}
          hint={health.data ? `${health.data.activeCount} of ${health.data.configuredCount} connections usable` : undefined}
        />
      </div>
      <LiveFeed />
      <div class="grid">
        <Section title="Connections" actions={<Link to="/providers">Manage</Link>}>
          <Loader of={health}>
            {(h) => (
              <Table
                caption="Connection health"
                rowKey={(r) => r.connection}
                rows={h.providers}
                empty={
                  <Empty title="No provider connections">
                    <Link to="/providers">Add a provider</Link> to start routing requests.
                  </Empty>
                }
                columns={[
                  { label: "Connection", render: (r) => r.connection },
                  { label: "Provider", render: (r) => r.provider },
                  {
                    label: "State",
                    render: (r) => <Badge kind={r.enabled ? stateKind(r.state) : "muted"}>{r.enabled ? r.state : "disabled"}</Badge>
                  },
                  { label: "Breaker", render: (r) => <Badge kind={stateKind(r.breaker)}>{r.breaker}</Badge> },
                  {
                    label: "24 h",
                    class: "num",
                    render: (r) => `${fmtNumber(r.requests24h)} (${(r.errorRate24h * 100).toFixed(1)} % errors)`
                  }
                ]}
              />
            )}
          </Loader>
        </Section>
        <Section title="Circuit breakers" actions={<Link to="/resilience">Resilience</Link>}>
          <Loader of={resilience}>
            {(r) => (
              <Table
                caption="Circuit breakers"
                rowKey={(b) => b.key}
                rows={r.breakers}
                empty={<Empty title="No breakers yet">A breaker appears for each upstream once it has been called.</Empty>}
                columns={[
                  { label: "Upstream", render: (b) => `${b.provider}${b.origin ? ` @ ${b.origin}` : ""}` },
                  { label: "State", render: (b) => <Badge kind={stateKind(b.state)}>{b.state}</Badge> },
                  { label: "Failures", class: "num", render: (b) => `${b.consecutiveFailures} / ${b.failureThreshold}` }
                ]}
              />
            )}
          </Loader>
        </Section>
      </div>
    </Page>
  )
}
