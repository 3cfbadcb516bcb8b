import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Confirm,
  Dialog,
  Empty,
  fmtDate,
  fmtMoney,
  fmtNumber,
  Form,
  Loader,
  NumberInput,
  Page,
  Section,
  SecretOnce,
  Select,
  Table,
  TextInput,
  useAction,
  useInterval,
  useLoad
} from "../ui"
import { can, currentRole } from "../access"
import "./Keys.css"

// API keys: the keys clients call the gateway with, their inbound rate limits, budgets (USD)
// and token limits, and the rate-limit state of this minute. Every call is a documented route.

type KeyView = Awaited<ReturnType<typeof loadKeys>>["keys"][number]
type Budget = Awaited<ReturnType<typeof loadBudgets>>["budgets"][number]
type TokenLimit = Awaited<ReturnType<typeof loadTokenLimits>>["limits"][number]

const loadKeys = () => ok(api.GET("/api/keys"))
// The accounting reads are for the roles that may make them (docs/teams.md): a member's page does not ask.
const loadBudgets = () => (can("accounting.budgets") ? ok(api.GET("/api/usage/budget")) : Promise.resolve({ budgets: [] }))
const loadTokenLimits = () => (can("accounting.tokenLimits") ? ok(api.GET("/api/usage/token-limits")) : Promise.resolve({ limits: [] }))
/** The people and teams a key may belong to (docs/teams.md), for the roles that may list them. */
const loadUsers = () => (can("users.list") ? ok(api.GET("/api/users")) : Promise.resolve({ users: [] }))
const loadTeams = () => (can("teams.list") ? ok(api.GET("/api/teams")) : Promise.resolve({ teams: [] }))
type Owners = {
  readonly users: Awaited<ReturnType<typeof loadUsers>>["users"]
  readonly teams: Awaited<ReturnType<typeof loadTeams>>["teams"]
}

/** Who a key belongs to, by name: a user, a team, or nobody (the gateway's own). */
const ownerOf = (k: KeyView, owners: Owners): string => {
  if (k.teamId) return `team ${owners.teams.find((t) => t.id === k.teamId)?.name ?? k.teamId}`
  if (k.userId) {
    const u = owners.users.find((x) => x.id === k.userId)
    return u ? u.name || u.email : k.userId
  }
  return "nobody"
}

const SCOPES = ["inference", "admin"] as const

const keyState = (k: KeyView): { kind: "ok" | "bad" | "muted"; text: string } =>
  !k.enabled
    ? { kind: "muted", text: "disabled" }
    : k.expiresAt && new Date(k.expiresAt).getTime() < Date.now()
      ? { kind: "bad", text: "expired" }
      : { kind: "ok", text: "active" }

/** A datetime-local value (local time) as ISO 8601, or null when empty. */
const isoOrNull = (local: string): string | null => (local ? new Date(local).toISOString() : null)

const CreateKey = (p: { owners: Owners; onCreated: () => void }) => {
  const [name, setName] = useState("")
  // "": the caller's own key (what a member always makes); "user:<id>" or "team:<id>" otherwise.
  const [owner, setOwner] = useState("")
  const [scope, setScope] = useState<(typeof SCOPES)[number]>("inference")
  const [expires, setExpires] = useState("")
  const [rpm, setRpm] = useState<number | undefined>()
  const [tpm, setTpm] = useState<number | undefined>()
  const [secret, setSecret] = useState<{ name: string; value: string } | undefined>()
  const [run, busy] = useAction()
  const submit = () =>
    void run(
      () =>
        ok(
          api.POST("/api/keys", {
            body: {
              name: name.trim() || undefined,
              scopes: [scope],
              expiresAt: isoOrNull(expires),
              rpm: rpm ?? null,
              tpm: tpm ?? null,
              ...(owner.startsWith("user:") ? { userId: owner.slice(5) } : owner.startsWith("team:") ? { teamId: owner.slice(5) } : {})
            }
          })
        ),
      "Key created"
    ).then((r) => {
      if (!r) return
      setSecret({ name: r.name, value: r.secret })
      setName("")
      setExpires("")
      setRpm(undefined)
      setTpm(undefined)
      p.onCreated()
    })
  return (
    <Section title="Create a key">
      <Form onSubmit={submit} label="Create a key">
        <TextInput
          label="Key name"
          value={name}
          onInput={setName}
          placeholder="laptop, ci, team-a"
          hint="Shown in logs and usage; the secret is never shown again."
        />
        {/* Admins and team-admins make keys for others too; a member's keys are their own. */}
        {currentRole() !== "member" && currentRole() !== "viewer" && p.owners.users.length + p.owners.teams.length > 0 && (
          <Select
            label="Owner"
            value={owner}
            options={[
              { value: "", label: "Me" },
              ...p.owners.users.map((u) => ({ value: `user:${u.id}`, label: `${u.name || u.email} (user)` })),
              ...p.owners.teams.map((t) => ({ value: `team:${t.id}`, label: `${t.name} (team)` }))
            ]}
            onChange={setOwner}
            hint="Its usage and cost count for its owner; a user's key also for the user's teams."
          />
        )}
        <Select
          label="Scope"
          value={scope}
          options={[
            { value: "inference", label: "inference (model routes)" },
            { value: "admin", label: "admin (also manages the gateway)" }
          ]}
          onChange={setScope}
        />
        <TextInput label="Expires" type="datetime-local" value={expires} onInput={setExpires} hint="Empty: never." />
        <NumberInput label="Requests per minute" value={rpm} onInput={setRpm} min={1} step={1} hint="Empty: no limit." />
        <NumberInput label="Tokens per minute" value={tpm} onInput={setTpm} min={1} step={1} hint="Input plus output." />
        <Button kind="primary" type="submit" busy={busy}>
          Create key
        </Button>
      </Form>
      {secret && <SecretOnce label={`Secret of ${secret.name}`} value={secret.value} />}
    </Section>
  )
}

/** An ISO date as a datetime-local value (local time), or "" for none. */
const localOf = (iso: string | null): string => {
  if (!iso) return ""
  const d = new Date(iso)
  const pad = (n: number) => String(n).padStart(2, "0")
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`
}

const EditKey = (p: { k: KeyView; onClose: () => void; onSaved: () => void }) => {
  const [name, setName] = useState(p.k.name)
  const [enabled, setEnabled] = useState(p.k.enabled)
  const [expires, setExpires] = useState(localOf(p.k.expiresAt))
  const [rpm, setRpm] = useState<number | undefined>(p.k.rpm ?? undefined)
  const [tpm, setTpm] = useState<number | undefined>(p.k.tpm ?? undefined)
  const [shadow, setShadow] = useState(p.k.shadow.map((t) => `${t.model}=${t.sampleRate}`).join(", "))
  const [run, busy] = useAction()
  // `model=rate, model=rate`: the API checks each (a missing rate is refused there, by name).
  const targets = shadow
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "")
    .map((t) => {
      const at = t.lastIndexOf("=")
      return at > 0 ? { model: t.slice(0, at).trim(), sampleRate: Number(t.slice(at + 1)) } : { model: t, sampleRate: Number.NaN }
    })
  return (
    <Form
      label="Edit key"
      onSubmit={() =>
        void run(
          () =>
            ok(
              api.PATCH("/api/keys/{id}", {
                params: { path: { id: p.k.id } },
                body: { name, enabled, expiresAt: isoOrNull(expires), rpm: rpm ?? null, tpm: tpm ?? null, shadow: targets }
              })
            ),
          "Key saved"
        ).then((r) => {
          if (!r) return
          p.onSaved()
          p.onClose()
        })
      }
    >
      <TextInput label="Key name" value={name} onInput={setName} required />
      <TextInput label="Expires" type="datetime-local" value={expires} onInput={setExpires} hint="Empty: never." />
      <NumberInput label="Requests per minute" value={rpm} onInput={setRpm} min={1} step={1} hint="Empty: no limit." />
      <NumberInput label="Tokens per minute" value={tpm} onInput={setTpm} min={1} step={1} hint="Empty: no limit." />
      <TextInput
        label="Shadow targets"
        value={shadow}
        onInput={setShadow}
        placeholder="e.g. anthropic/claude-sonnet-4=0.1"
        hint={
          <>
            <code>model=sampleRate</code>, comma-separated: a share of this key's requests also goes to each, compared on the Shadow traffic
            page (report <code>key:{p.k.id}</code>
            ).
          </>
        }
        wide
      />
      <Checkbox
        label="Enabled"
        checked={enabled}
        onChange={setEnabled}
        hint="A disabled key is refused at once; enable it again any time."
      />
      <div class="actions">
        <Button kind="primary" type="submit" busy={busy}>
          Save
        </Button>
        <Button onClick={p.onClose}>Cancel</Button>
      </div>
    </Form>
  )
}

const BudgetForm = (p: { keys: ReadonlyArray<KeyView>; apiKeyId?: string; current?: Budget; onSaved: () => void }) => {
  const [apiKeyId, setKey] = useState(p.apiKeyId ?? p.keys[0]?.id ?? "")
  const [daily, setDaily] = useState<number | undefined>(p.current?.dailyLimitUsd ?? undefined)
  const [weekly, setWeekly] = useState<number | undefined>(p.current?.weeklyLimitUsd ?? undefined)
  const [monthly, setMonthly] = useState<number | undefined>(p.current?.monthlyLimitUsd ?? undefined)
  const [warn, setWarn] = useState<number | undefined>(p.current ? Math.round(p.current.warningThreshold * 100) : 80)
  const [resetTime, setResetTime] = useState(p.current?.resetTime ?? "00:00")
  const [run, busy] = useAction()
  if (p.keys.length === 0) return <Empty title="No keys yet">Create a key above, then give it a budget.</Empty>
  return (
    <Form
      label="Set a budget"
      onSubmit={() =>
        void run(
          () =>
            ok(
              api.POST("/api/usage/budget", {
                body: {
                  apiKeyId,
                  ...(daily ? { dailyLimitUsd: daily } : {}),
                  ...(weekly ? { weeklyLimitUsd: weekly } : {}),
                  ...(monthly ? { monthlyLimitUsd: monthly } : {}),
                  ...(warn !== undefined ? { warningThreshold: warn / 100 } : {}),
                  resetTime
                }
              })
            ),
          "Budget saved"
        ).then((r) => r && p.onSaved())
      }
    >
      <Select label="Budget for key" value={apiKeyId} options={p.keys.map((k) => ({ value: k.id, label: k.name }))} onChange={setKey} />
      <NumberInput label="Daily limit (USD)" value={daily} onInput={setDaily} min={0} />
      <NumberInput label="Weekly limit (USD)" value={weekly} onInput={setWeekly} min={0} />
      <NumberInput label="Monthly limit (USD)" value={monthly} onInput={setMonthly} min={0} />
      <NumberInput label="Warn at (% of limit)" value={warn} onInput={setWarn} min={0} max={100} step={1} />
      <TextInput label="Windows reset at (UTC, HH:MM)" value={resetTime} onInput={setResetTime} />
      <Button kind="primary" type="submit" busy={busy}>
        Save budget
      </Button>
    </Form>
  )
}

const TokenLimitForm = (p: { keys: ReadonlyArray<KeyView>; onSaved: () => void }) => {
  const [apiKeyId, setKey] = useState(p.keys[0]?.id ?? "")
  const [scope, setScope] = useState<"global" | "provider" | "model">("global")
  const [target, setTarget] = useState("")
  const [maxTokens, setMax] = useState<number | undefined>()
  const [window, setWindow] = useState<"minute" | "hour" | "day" | "week" | "month">("day")
  const [run, busy] = useAction()
  if (p.keys.length === 0) return null
  return (
    <Form
      label="Add a token limit"
      onSubmit={() =>
        void run(
          () =>
            ok(
              api.POST("/api/usage/token-limits", {
                body: {
                  apiKeyId: apiKeyId || p.keys[0]!.id,
                  scope,
                  ...(scope === "provider" ? { provider: target } : scope === "model" ? { model: target } : {}),
                  maxTokens: maxTokens ?? 0,
                  window
                }
              })
            ),
          "Token limit added"
        ).then((r) => r && p.onSaved())
      }
    >
      <Select
        label="Limit for key"
        value={apiKeyId || p.keys[0]!.id}
        options={p.keys.map((k) => ({ value: k.id, label: k.name }))}
        onChange={setKey}
      />
      <Select label="Applies to" value={scope} options={["global", "provider", "model"]} onChange={setScope} />
      {scope !== "global" && (
        <TextInput
          label={scope === "provider" ? "Provider id" : "Model"}
          value={target}
          onInput={setTarget}
          required
          placeholder={scope === "provider" ? "openai" : "openai/gpt-4o-mini"}
        />
      )}
      <NumberInput label="Max tokens" value={maxTokens} onInput={setMax} min={1} step={1} />
      <Select label="Per" value={window} options={["minute", "hour", "day", "week", "month"]} onChange={setWindow} />
      <Button type="submit" busy={busy}>
        Add token limit
      </Button>
    </Form>
  )
}

const pct = (used: number, limit: number) => (limit > 0 ? Math.min(100, Math.round((used / limit) * 100)) : 0)

export default function KeysPage() {
  const keys = useLoad(loadKeys)
  const budgets = useLoad(loadBudgets)
  const limits = useLoad(loadTokenLimits)
  const rates = useLoad(() => (can("resilience.rateLimits") ? ok(api.GET("/api/rate-limits")) : new Promise<never>(() => {})))
  const rateConfig = useLoad(() => (can("resilience.rateLimit") ? ok(api.GET("/api/rate-limit")) : new Promise<never>(() => {})))
  const users = useLoad(loadUsers)
  const teams = useLoad(loadTeams)
  const owners: Owners = { users: users.data?.users ?? [], teams: teams.data?.teams ?? [] }
  const [editing, setEditing] = useState<KeyView | undefined>()
  const [budgetFor, setBudgetFor] = useState<KeyView | undefined>()
  const [confirm, setConfirm] = useState<KeyView | undefined>()
  const [showDisabled, setShowDisabled] = useState(true)
  const [run, busy] = useAction()
  useInterval(() => can("resilience.rateLimits") && rates.reload(), 10_000)
  const reloadAll = () => {
    keys.reload()
    budgets.reload()
    limits.reload()
    rates.reload()
  }
  const keyName = (id: string) => keys.data?.keys.find((k) => k.id === id)?.name ?? id
  const budgetOf = (id: string) => budgets.data?.budgets.find((b) => b.apiKeyId === id)
  return (
    <Page title="API keys" description="The keys your clients use to call this gateway, with their limits and budgets.">
      {can("keys.create") && <CreateKey owners={owners} onCreated={reloadAll} />}
      <Section title="Keys" actions={<Checkbox label="Show disabled and expired" checked={showDisabled} onChange={setShowDisabled} />}>
        <Loader of={keys}>
          {(d) => (
            <Table
              caption="API keys"
              rowKey={(k) => k.id}
              rows={d.keys.filter((k) => showDisabled || keyState(k).text === "active")}
              empty={
                <Empty title="No API keys yet">Create one above, then point a client at this gateway with it as the bearer token.</Empty>
              }
              columns={[
                { label: "Name", render: (k) => <strong>{k.name}</strong> },
                { label: "Owner", render: (k) => ownerOf(k, owners) },
                { label: "Key", render: (k) => <code class="mono">{k.key}</code> },
                { label: "Scopes", render: (k) => k.scopes.join(", ") },
                { label: "State", render: (k) => <Badge kind={keyState(k).kind}>{keyState(k).text}</Badge> },
                {
                  label: "Limits",
                  render: (k) =>
                    k.rpm || k.tpm
                      ? `${k.rpm ? `${fmtNumber(k.rpm)} rpm` : ""}${k.rpm && k.tpm ? " · " : ""}${k.tpm ? `${fmtNumber(k.tpm)} tpm` : ""}`
                      : "none"
                },
                {
                  label: "Budget spend",
                  render: (k) => {
                    const b = budgetOf(k.id)
                    return b ? (
                      <span class="keys-spend">
                        <meter min={0} max={b.limitUsd || 1} value={b.spentUsd} aria-label={`${k.name}: ${b.resetInterval} budget used`} />
                        {fmtMoney(b.spentUsd)} / {fmtMoney(b.limitUsd)} {b.resetInterval}
                        {b.exceeded ? <Badge kind="bad">exceeded</Badge> : b.warning ? <Badge kind="warn">warning</Badge> : null}
                      </span>
                    ) : (
                      <span class="muted">none</span>
                    )
                  }
                },
                {
                  label: "Shadow",
                  render: (k) => (k.shadow.length === 0 ? "none" : k.shadow.map((t) => `${t.model} (${t.sampleRate})`).join(", "))
                },
                { label: "Last used", render: (k) => fmtDate(k.lastUsedAt) },
                { label: "Expires", render: (k) => (k.expiresAt ? fmtDate(k.expiresAt) : "never") },
                {
                  label: "Actions",
                  render: (k) => (
                    <div class="actions">
                      {can("keys.update") && (
                        <Button onClick={() => setEditing(k)} aria-label={`Edit ${k.name}`}>
                          Edit
                        </Button>
                      )}
                      {can("keys.update") && (
                        <Button
                          busy={busy}
                          onClick={() =>
                            void run(
                              () => ok(api.PATCH("/api/keys/{id}", { params: { path: { id: k.id } }, body: { enabled: !k.enabled } })),
                              k.enabled ? "Key disabled" : "Key enabled"
                            ).then((r) => r && keys.reload())
                          }
                          aria-label={`${k.enabled ? "Disable" : "Enable"} ${k.name}`}
                        >
                          {k.enabled ? "Disable" : "Enable"}
                        </Button>
                      )}
                      {can("accounting.setBudget") && (
                        <Button onClick={() => setBudgetFor(k)} aria-label={`Budget of ${k.name}`}>
                          Budget
                        </Button>
                      )}
                      <Link to={`/logs?key=${encodeURIComponent(k.id)}`}>Requests</Link>
                      {can("keys.remove") && (
                        <Button kind="danger" onClick={() => setConfirm(k)} aria-label={`Delete ${k.name}`}>
                          Delete
                        </Button>
                      )}
                    </div>
                  )
                }
              ]}
            />
          )}
        </Loader>
      </Section>
      {/* Budgets, token limits and rate limits are the gateway's accounting: for the roles that read it (docs/teams.md). */}
      {can("accounting.budgets") && (
        <>
          <Section title="Budgets">
            <p class="muted">
              A budget stops a key's requests once its spend (USD, at catalog or override prices) reaches a limit, until the window resets.
            </p>
            <Loader of={budgets}>
              {(d) => (
                <Table
                  caption="Budgets"
                  rowKey={(b) => b.apiKeyId}
                  rows={d.budgets}
                  empty={<Empty title="No budgets">Set one below (or with the Budget button of a key).</Empty>}
                  columns={[
                    { label: "Key", render: (b) => keyName(b.apiKeyId) },
                    {
                      label: "Daily",
                      class: "num",
                      render: (b) =>
                        b.windows.daily ? `${fmtMoney(b.windows.daily.spentUsd)} / ${fmtMoney(b.windows.daily.limitUsd)}` : "—"
                    },
                    {
                      label: "Weekly",
                      class: "num",
                      render: (b) =>
                        b.windows.weekly ? `${fmtMoney(b.windows.weekly.spentUsd)} / ${fmtMoney(b.windows.weekly.limitUsd)}` : "—"
                    },
                    {
                      label: "Monthly",
                      class: "num",
                      render: (b) =>
                        b.windows.monthly ? `${fmtMoney(b.windows.monthly.spentUsd)} / ${fmtMoney(b.windows.monthly.limitUsd)}` : "—"
                    },
                    {
                      label: "Used",
                      render: (b) => (
                        <meter
                          min={0}
                          max={100}
                          value={pct(b.spentUsd, b.limitUsd)}
                          aria-label={`${keyName(b.apiKeyId)}: percent of budget used`}
                        />
                      )
                    },
                    {
                      label: "State",
                      render: (b) =>
                        b.exceeded ? (
                          <Badge kind="bad">exceeded</Badge>
                        ) : b.warning ? (
                          <Badge kind="warn">warning</Badge>
                        ) : (
                          <Badge kind="ok">ok</Badge>
                        )
                    },
                    { label: "Resets", render: (b) => fmtDate(b.resetsAt) },
                    {
                      label: "Actions",
                      render: (b) => (
                        <Button
                          kind="danger"
                          busy={busy}
                          aria-label={`Remove the budget of ${keyName(b.apiKeyId)}`}
                          onClick={() =>
                            void run(
                              () => ok(api.DELETE("/api/usage/budget/{id}", { params: { path: { id: b.apiKeyId } } })),
                              "Budget removed"
                            ).then((r) => r && budgets.reload())
                          }
                        >
                          Remove
                        </Button>
                      )
                    }
                  ]}
                />
              )}
            </Loader>
            {keys.data && <BudgetForm keys={keys.data.keys} onSaved={budgets.reload} />}
          </Section>
          <Section title="Token limits">
            <p class="muted">Caps on the tokens (input plus output) a key may use per window, for everything, one provider or one model.</p>
            <Loader of={limits}>
              {(d) => (
                <Table
                  caption="Token limits"
                  rowKey={(l) => l.id}
                  rows={d.limits}
                  empty={<Empty title="No token limits">Add one below to cap a key's tokens per window.</Empty>}
                  columns={[
                    { label: "Key", render: (l: TokenLimit) => keyName(l.apiKeyId) },
                    {
                      label: "Applies to",
                      render: (l) =>
                        l.scope === "global" ? "everything" : l.scope === "provider" ? `provider ${l.provider}` : `model ${l.model}`
                    },
                    {
                      label: "Used",
                      class: "num",
                      render: (l) => `${fmtNumber(l.usedTokens)} / ${fmtNumber(l.maxTokens)} per ${l.window}`
                    },
                    { label: "Resets", render: (l) => fmtDate(l.resetsAt) },
                    {
                      label: "Actions",
                      render: (l) => (
                        <Button
                          kind="danger"
                          busy={busy}
                          aria-label={`Remove token limit ${l.id}`}
                          onClick={() =>
                            void run(() => ok(api.DELETE("/api/usage/token-limits", { body: { id: l.id } })), "Token limit removed").then(
                              (r) => r && limits.reload()
                            )
                          }
                        >
                          Remove
                        </Button>
                      )
                    }
                  ]}
                />
              )}
            </Loader>
            {keys.data && <TokenLimitForm keys={keys.data.keys} onSaved={limits.reload} />}
          </Section>
          <Section title="Rate limits now">
            <Loader of={rateConfig}>
              {(c) => (
                <p class="muted">
                  Per-key limits count over {c.inbound.windowSeconds} s.{" "}
                  {c.inbound.autoEnabled
                    ? `Keys without their own limits get ${fmtNumber(c.inbound.defaultRpm)} rpm and ${fmtNumber(c.inbound.defaultTpm)} tpm (RATE_LIMIT_AUTO_ENABLE).`
                    : "Keys without their own limits are not limited."}{" "}
                  {fmtNumber(c.inbound.keys)} key(s) have a limit now.
                </p>
              )}
            </Loader>
            <Loader of={rates}>
              {(r) => (
                <div class="grid">
                  <Table
                    caption="Inbound key limits this window"
                    rowKey={(i) => i.apiKeyId}
                    rows={r.inbound}
                    empty={<Empty title="No key is limited">Set requests or tokens per minute on a key to see its use here.</Empty>}
                    columns={[
                      { label: "Key", render: (i) => i.name },
                      {
                        label: "Requests",
                        class: "num",
                        render: (i) =>
                          i.requests ? `${fmtNumber(i.requests.used)} / ${fmtNumber(i.requests.limit)} (${i.requests.source})` : "—"
                      },
                      {
                        label: "Tokens",
                        class: "num",
                        render: (i) => (i.tokens ? `${fmtNumber(i.tokens.used)} / ${fmtNumber(i.tokens.limit)} (${i.tokens.source})` : "—")
                      },
                      { label: "Resets in", class: "num", render: (i) => `${i.resetSeconds} s` }
                    ]}
                  />
                  <Table
                    caption="Upstream connections' rate-limit state"
                    rowKey={(a) => a.id}
                    rows={r.accounts}
                    empty={<Empty title="No connections">Add a provider to see its upstream rate-limit state.</Empty>}
                    columns={[
                      { label: "Connection", render: (a) => `${a.name} (${a.provider})` },
                      {
                        label: "State",
                        render: (a) => (
                          <Badge
                            kind={
                              a.state === "ok" || a.state === "active" || a.state === "available"
                                ? "ok"
                                : a.rateLimitedUntil
                                  ? "warn"
                                  : "muted"
                            }
                          >
                            {a.state}
                          </Badge>
                        )
                      },
                      { label: "Limited until", render: (a) => fmtDate(a.rateLimitedUntil) },
                      {
                        label: "In flight",
                        class: "num",
                        render: (a) => `${a.inFlight}${a.max_concurrent ? ` / ${a.max_concurrent}` : ""}`
                      },
                      {
                        label: "Quota left",
                        class: "num",
                        render: (a) =>
                          a.quota
                            ? `${fmtNumber(a.quota.remainingCount ?? a.quota.remaining)}${a.quota.limit ? ` / ${fmtNumber(a.quota.limit)}` : ""}`
                            : "—"
                      }
                    ]}
                  />
                </div>
              )}
            </Loader>
          </Section>
        </>
      )}
      <Dialog open={!!editing} title={`Edit ${editing?.name ?? "key"}`} onClose={() => setEditing(undefined)}>
        {editing && <EditKey k={editing} onClose={() => setEditing(undefined)} onSaved={reloadAll} />}
      </Dialog>
      <Dialog open={!!budgetFor} title={`Budget of ${budgetFor?.name ?? "key"}`} onClose={() => setBudgetFor(undefined)}>
        {budgetFor && keys.data && (
          <BudgetForm
            keys={keys.data.keys}
            apiKeyId={budgetFor.id}
            current={budgetOf(budgetFor.id)}
            onSaved={() => {
              budgets.reload()
              setBudgetFor(undefined)
            }}
          />
        )}
      </Dialog>
      <Confirm
        item={confirm}
        title="Delete this key?"
        action="Delete key"
        onClose={() => setConfirm(undefined)}
        remove={(key) => ok(api.DELETE("/api/keys/{id}", { params: { path: { id: key.id } } }))}
        done="Key deleted"
        onRemoved={reloadAll}
      >
        {(key) => (
          <p>
            Clients using <strong>{key.name}</strong> ({key.key}) will be refused at once. This cannot be undone.
          </p>
        )}
      </Confirm>
    </Page>
  )
}
