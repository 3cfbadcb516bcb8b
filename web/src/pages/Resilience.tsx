import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import type { paths } from "../api/schema"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Empty,
  fmtDate,
  fmtMs,
  Form,
  Loader,
  NumberInput,
  Page,
  Section,
  Table,
  TextInput,
  useAction,
  useInterval,
  useLoad
} from "../ui"

type Status = paths["/api/resilience"]["get"]["responses"][200]["content"]["application/json"]
type Settings = Status["settings"]
type Patch = NonNullable<paths["/api/resilience"]["patch"]["requestBody"]>["content"]["application/json"]

const stateKind = (s: string): "ok" | "warn" | "bad" | "muted" =>
  s === "CLOSED" || s === "active" || s === "ok"
    ? "ok"
    : s === "DEGRADED" || s === "HALF_OPEN" || s === "cooldown" || s === "rate_limited"
      ? "warn"
      : s === "OPEN" || s === "error" || s === "expired" || s === "unauthorized"
        ? "bad"
        : "muted"

const until = (iso: string | null) => {
  if (!iso) return "—"
  const ms = new Date(iso).getTime() - Date.now()
  return ms > 0 ? `in ${fmtMs(ms)}` : fmtDate(iso)
}

/** The settings form: every knob of PATCH /api/resilience, sent whole (the API merges it). */
const SettingsForm = (p: { settings: Settings; onSaved: () => void }) => {
  const [s, setS] = useState<Settings>(() => structuredClone(p.settings))
  const [run, busy] = useAction()
  const num =
    <G extends keyof Settings>(group: G, key: keyof Settings[G]) =>
    (v: number | undefined) =>
      setS((x) => ({ ...x, [group]: { ...x[group], [key]: v ?? 0 } }))
  const bool =
    <G extends keyof Settings>(group: G, key: keyof Settings[G]) =>
    (v: boolean) =>
      setS((x) => ({ ...x, [group]: { ...x[group], [key]: v } }))
  const breaker =
    (cls: "apikey" | "oauth", key: "failureThreshold" | "degradationThreshold" | "resetTimeoutMs") => (v: number | undefined) =>
      setS((x) => ({ ...x, providerBreaker: { ...x.providerBreaker, [cls]: { ...x.providerBreaker[cls], [key]: v ?? 1 } } }))
  const [codes, setCodes] = useState(p.settings.modelLockout.errorCodes.join(", "))
  const save = () =>
    run(async () => {
      const body: Patch = {
        providerBreaker: { apikey: s.providerBreaker.apikey, oauth: s.providerBreaker.oauth },
        connectionCooldown: s.connectionCooldown,
        modelLockout: {
          ...s.modelLockout,
          errorCodes: codes
            .split(/[\s,]+/)
            .filter(Boolean)
            .map(Number)
        },
        comboCooldownWait: s.comboCooldownWait,
        quotaShareConcurrencyLimit: s.quotaShareConcurrencyLimit,
        quotaQueue: { maxParked: s.quotaQueue?.maxParked ?? 100 }
      }
      await ok(api.PATCH("/api/resilience", { body }))
      p.onSaved()
    }, "Resilience settings saved")
  const ms = "milliseconds"
  return (
    <Form onSubmit={() => void save()} label="Resilience settings">
      <h3 class="full">Circuit breakers (API-key providers)</h3>
      <NumberInput
        label="Failures to open (API key)"
        value={s.providerBreaker.apikey.failureThreshold}
        onInput={breaker("apikey", "failureThreshold")}
        min={1}
        step={1}
      />
      <NumberInput
        label="Failures to degrade (API key)"
        value={s.providerBreaker.apikey.degradationThreshold}
        onInput={breaker("apikey", "degradationThreshold")}
        min={1}
        step={1}
      />
      <NumberInput
        label="Reset timeout (API key)"
        value={s.providerBreaker.apikey.resetTimeoutMs}
        onInput={breaker("apikey", "resetTimeoutMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <h3 class="full">Circuit breakers (OAuth providers)</h3>
      <NumberInput
        label="Failures to open (OAuth)"
        value={s.providerBreaker.oauth.failureThreshold}
        onInput={breaker("oauth", "failureThreshold")}
        min={1}
        step={1}
      />
      <NumberInput
        label="Failures to degrade (OAuth)"
        value={s.providerBreaker.oauth.degradationThreshold}
        onInput={breaker("oauth", "degradationThreshold")}
        min={1}
        step={1}
      />
      <NumberInput
        label="Reset timeout (OAuth)"
        value={s.providerBreaker.oauth.resetTimeoutMs}
        onInput={breaker("oauth", "resetTimeoutMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <h3 class="full">Connection cooldown</h3>
      <NumberInput
        label="Base cooldown, API key"
        value={s.connectionCooldown.apiKeyBaseMs}
        onInput={num("connectionCooldown", "apiKeyBaseMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <NumberInput
        label="Base cooldown, OAuth"
        value={s.connectionCooldown.oauthBaseMs}
        onInput={num("connectionCooldown", "oauthBaseMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <NumberInput
        label="Longest cooldown"
        value={s.connectionCooldown.maxCooldownMs}
        onInput={num("connectionCooldown", "maxCooldownMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <h3 class="full">Model lockout</h3>
      <Checkbox label="Lock out a failing model" checked={s.modelLockout.enabled} onChange={bool("modelLockout", "enabled")} />
      <Checkbox
        label="Exponential backoff"
        checked={s.modelLockout.useExponentialBackoff}
        onChange={bool("modelLockout", "useExponentialBackoff")}
      />
      <NumberInput
        label="Base lockout"
        value={s.modelLockout.baseCooldownMs}
        onInput={num("modelLockout", "baseCooldownMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <NumberInput
        label="Longest lockout"
        value={s.modelLockout.maxCooldownMs}
        onInput={num("modelLockout", "maxCooldownMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <NumberInput
        label="Backoff steps"
        value={s.modelLockout.maxBackoffSteps}
        onInput={num("modelLockout", "maxBackoffSteps")}
        min={0}
        max={30}
        step={1}
      />
      <TextInput label="Status codes that lock a model out" value={codes} onInput={setCodes} hint="HTTP statuses, separated by commas." />
      <h3 class="full">Combos wait for a cooldown</h3>
      <Checkbox
        label="Wait instead of failing when every target cools down"
        checked={s.comboCooldownWait.enabled}
        onChange={bool("comboCooldownWait", "enabled")}
      />
      <NumberInput
        label="Longest single wait"
        value={s.comboCooldownWait.maxWaitMs}
        onInput={num("comboCooldownWait", "maxWaitMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <NumberInput
        label="Total wait budget"
        value={s.comboCooldownWait.budgetMs}
        onInput={num("comboCooldownWait", "budgetMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <NumberInput
        label="Wait attempts"
        value={s.comboCooldownWait.maxAttempts}
        onInput={num("comboCooldownWait", "maxAttempts")}
        min={0}
        max={10}
        step={1}
      />
      <h3 class="full">Queue at a connection's concurrency limit</h3>
      <Checkbox
        label="Queue requests when a connection is full"
        checked={s.quotaShareConcurrencyLimit.enabled}
        onChange={bool("quotaShareConcurrencyLimit", "enabled")}
      />
      <NumberInput
        label="Queue length"
        value={s.quotaShareConcurrencyLimit.maxQueue}
        onInput={num("quotaShareConcurrencyLimit", "maxQueue")}
        min={0}
        step={1}
      />
      <NumberInput
        label="Queue wait"
        value={s.quotaShareConcurrencyLimit.waitTimeoutMs}
        onInput={num("quotaShareConcurrencyLimit", "waitTimeoutMs")}
        min={0}
        step={1}
        hint={ms}
      />
      <h3 class="full">Requests waiting for a quota to reset</h3>
      <NumberInput
        label="Most requests parked at once"
        value={s.quotaQueue?.maxParked ?? 100}
        onInput={(v) => setS((x) => ({ ...x, quotaQueue: { maxParked: v ?? 0 } }))}
        min={0}
        step={1}
        hint="A combo or key with a longest wait (maxQueueWaitSeconds) parks its requests until the quota resets; beyond this many, one is refused at once."
      />
      <Button kind="primary" type="submit" busy={busy}>
        Save settings
      </Button>
    </Form>
  )
}

export default function ResiliencePage() {
  const status = useLoad(() => ok(api.GET("/api/resilience")))
  useInterval(status.reload, 5000)
  const [run, busy] = useAction()
  const [settingsKey, setSettingsKey] = useState(0)
  const reset = (provider?: string) =>
    run(
      () => ok(api.POST("/api/resilience/reset", { body: provider ? { provider, connections: true } : { connections: true } })),
      (r) =>
        `Reset ${r.breakersReset} breaker${r.breakersReset === 1 ? "" : "s"} and ${r.connectionsReset} connection${r.connectionsReset === 1 ? "" : "s"}`
    ).then(status.reload)
  const clearCooldowns = () =>
    run(
      () => ok(api.DELETE("/api/resilience/model-cooldowns", { body: { all: true } })),
      (r) => `Cleared ${r.cleared} model cooldown${r.cleared === 1 ? "" : "s"}`
    ).then(status.reload)
  const clearOne = (m: Status["modelCooldowns"][number]) =>
    run(
      () => ok(api.DELETE("/api/resilience/model-cooldowns", { body: { provider: m.provider, model: m.model, connection: m.connection } })),
      `Cleared ${m.model}`
    ).then(status.reload)
  return (
    <Page
      title="Resilience"
      description="How the gateway protects itself from failing upstreams: circuit breakers, cooldowns and model lockouts. Refreshed every 5 s."
      actions={
        <Button kind="danger" busy={busy} onClick={() => void reset()}>
          Reset all
        </Button>
      }
    >
      <Loader of={status}>
        {(d) => (
          <>
            <Section title="Circuit breakers">
              <Table
                caption="Circuit breakers"
                rowKey={(b) => b.key}
                rows={d.breakers}
                empty={
                  <Empty title="No breakers yet">
                    A breaker appears for each upstream once a request has been sent to it. Nothing is failing.
                  </Empty>
                }
                columns={[
                  {
                    label: "Upstream",
                    render: (b) => (
                      <>
                        <strong>{b.provider}</strong>
                        {b.origin ? <span class="muted"> @ {b.origin}</span> : null}
                      </>
                    )
                  },
                  { label: "State", render: (b) => <Badge kind={stateKind(b.state)}>{b.state}</Badge> },
                  { label: "Failures", class: "num", render: (b) => `${b.consecutiveFailures} / ${b.failureThreshold}` },
                  { label: "Last status", class: "num", render: (b) => b.lastStatus ?? "—" },
                  { label: "Last failure", render: (b) => fmtDate(b.lastFailureAt) },
                  { label: "Retry", render: (b) => until(b.retryAt) },
                  {
                    label: "Actions",
                    render: (b) => (
                      <Button onClick={() => void reset(b.key)} disabled={busy} aria-label={`Reset ${b.key}`}>
                        Reset
                      </Button>
                    )
                  }
                ]}
              />
            </Section>
            <Section title="Connections">
              <Table
                caption="Connection states"
                rowKey={(c) => c.id}
                rows={d.connections}
                empty={
                  <Empty title="No connections">
                    <Link to="/providers">Add a provider</Link> first.
                  </Empty>
                }
                columns={[
                  {
                    label: "Connection",
                    render: (c) => (
                      <>
                        <strong>{c.name}</strong> <span class="muted">{c.provider}</span>
                      </>
                    )
                  },
                  { label: "State", render: (c) => <Badge kind={stateKind(c.state)}>{c.state}</Badge> },
                  { label: "In flight", class: "num", render: (c) => `${c.inFlight}${c.max_concurrent ? ` / ${c.max_concurrent}` : ""}` },
                  { label: "Cooling down until", render: (c) => until(c.rateLimitedUntil) },
                  { label: "Backoff level", class: "num", render: (c) => c.backoffLevel },
                  { label: "Last error", render: (c) => c.lastError ?? "—" },
                  {
                    label: "Actions",
                    render: (c) => (
                      <Button
                        onClick={() => void reset(c.provider)}
                        disabled={busy}
                        aria-label={`Reset provider ${c.provider} (${c.name})`}
                      >
                        Reset provider
                      </Button>
                    )
                  }
                ]}
              />
            </Section>
            <Section title="Waiting for a quota to reset">
              <p class="muted">
                {d.queue.parked} of at most {d.queue.maxParked} parked
                {d.queue.oldestWaitMs !== null ? `, the oldest for ${fmtMs(d.queue.oldestWaitMs)}` : ""}
                {d.queue.nextResetAt ? `, next reset ${until(d.queue.nextResetAt)}` : ""}. Since the start: {d.queue.served} served after
                waiting, {d.queue.dropped} dropped (client left), {d.queue.refused} refused (queue full).
              </p>
              <Table
                caption="Requests waiting for a quota to reset"
                rowKey={(g) => `${g.scope}/${g.apiKeyId ?? ""}`}
                rows={d.queue.groups}
                empty={
                  <Empty title="Nothing is waiting">
                    A request of a combo or key with a longest wait (maxQueueWaitSeconds) waits here when every target is out of quota.
                  </Empty>
                }
                columns={[
                  { label: "Combo or model", render: (g) => <code>{g.scope}</code> },
                  { label: "Key", render: (g) => g.apiKeyId ?? "—" },
                  { label: "Parked", class: "num", render: (g) => g.parked },
                  { label: "Oldest wait", render: (g) => fmtMs(g.oldestWaitMs) },
                  { label: "Next reset", render: (g) => until(g.nextResetAt) }
                ]}
              />
            </Section>
            <Section
              title="Model cooldowns"
              actions={
                d.modelCooldowns.length > 0 && (
                  <Button onClick={() => void clearCooldowns()} busy={busy}>
                    Clear all model cooldowns
                  </Button>
                )
              }
            >
              <Table
                caption="Model cooldowns"
                rowKey={(m) => `${m.connection}/${m.model}`}
                rows={d.modelCooldowns}
                empty={
                  <Empty title="No model is locked out">
                    A model that keeps failing on a connection is locked out for a while; it would be listed here.
                  </Empty>
                }
                columns={[
                  { label: "Model", render: (m) => <code>{m.model}</code> },
                  { label: "Connection", render: (m) => `${m.connection} (${m.provider})` },
                  { label: "Reason", render: (m) => `${m.reason} (HTTP ${m.status})` },
                  { label: "Failures", class: "num", render: (m) => m.failures },
                  { label: "Remaining", render: (m) => fmtMs(m.remainingMs) },
                  {
                    label: "Actions",
                    render: (m) => (
                      <Button onClick={() => void clearOne(m)} disabled={busy} aria-label={`Clear ${m.model} on ${m.connection}`}>
                        Clear
                      </Button>
                    )
                  }
                ]}
              />
            </Section>
            <Section title="Auto exclusions">
              <Table
                caption="Auto exclusions"
                rowKey={(a) => a.key}
                rows={d.autoExclusions}
                empty={
                  <Empty title="Nothing excluded">
                    Auto routing leaves out a target that keeps failing; such targets are listed here until they are tried again.
                  </Empty>
                }
                columns={[
                  { label: "Target", render: (a) => <code>{a.key}</code> },
                  { label: "Level", class: "num", render: (a) => a.level },
                  { label: "Until", render: (a) => until(a.until) }
                ]}
              />
            </Section>
            <Section title="Settings">
              <SettingsForm key={settingsKey} settings={d.settings} onSaved={() => (status.reload(), setSettingsKey((k) => k + 1))} />
            </Section>
          </>
        )}
      </Loader>
    </Page>
  )
}
