import { useEffect, useState } from "preact/hooks"
import { api, ok } from "../api/client"
import type { Query, Res } from "./govern/types"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  Empty,
  fmtDate,
  fmtMoney,
  fmtMs,
  Form,
  Loader,
  NumberInput,
  Page,
  Section,
  Select,
  Table,
  TextArea,
  TextInput,
  useAction,
  useInterval,
  useLoad
} from "../ui"
import "./Guardrails.css"

type Flag = Res<"/api/settings/feature-flags", "get">["flags"][number]
type Policy = Res<"/api/policies", "get">["policies"][number]
type AuditEntry = Res<"/api/compliance/audit-log", "get">["entries"][number]

// ---------------------------------------------------------------- guardrails (feature flags)

/** The guardrail flags (docs/guardrails.md), in the order a request meets them. */
const GUARDRAILS: ReadonlyArray<{ key: string; what: string }> = [
  { key: "INPUT_SANITIZER_ENABLED", what: "Strips control, zero-width and bidi characters from prompts." },
  { key: "INJECTION_GUARD_MODE", what: "Prompt-injection patterns in user text and tool results: warn (header), block (400) or redact." },
  { key: "PII_REDACTION_ENABLED", what: "Personal data and secrets in requests become placeholders, restored in the answer." },
  { key: "PII_RESPONSE_SANITIZATION", what: "Checks answers for personal data (with the mode below)." },
  { key: "PII_RESPONSE_SANITIZATION_MODE", what: "What response sanitization does: redact, warn or block." },
  { key: "TOOL_POLICY_MODE", what: "Whether the tool rules of policies are ignored (disabled), warned about or enforced (block)." }
]

const isOn = (f: Flag) =>
  f.type === "boolean" ? f.effectiveValue === "true" : f.effectiveValue !== "off" && f.effectiveValue !== "disabled"

const FlagControl = (p: { flag: Flag; done: () => void }) => {
  const [run, busy] = useAction()
  const f = p.flag
  const options =
    f.type === "boolean"
      ? [
          { value: "true", label: "on" },
          { value: "false", label: "off" }
        ]
      : (f.enumValues ?? []).map((v) => ({ value: v, label: v }))
  const set = (value: string | undefined) =>
    run(
      () => ok(api.PUT("/api/settings/feature-flags", { body: value === undefined ? { key: f.key } : { key: f.key, value } })),
      (r) => `${r.key} is now ${r.effectiveValue}`
    ).then((r) => r && p.done())
  return (
    <div class="flag-control">
      <Select label={`${f.key} value`} value={f.effectiveValue} options={options} onChange={(v) => void set(v)} />
      {f.source === "db" && (
        <Button kind="plain" busy={busy} onClick={() => void set(undefined)} aria-label={`Reset ${f.key} to its default`}>
          Reset
        </Button>
      )}
    </div>
  )
}

const GuardrailFlags = (p: { changed: () => void }) => {
  const flags = useLoad(() => ok(api.GET("/api/settings/feature-flags")))
  return (
    <Section title="Guardrails" actions={<Link to="/flags">All feature flags</Link>}>
      <p class="muted">
        Each guardrail is a feature flag; a change applies from the next request. Actions they take appear in the audit log below (kind
        guardrail).
      </p>
      <Loader of={flags}>
        {(d) => {
          const byKey = new Map(d.flags.map((f) => [f.key, f]))
          const rows = GUARDRAILS.flatMap((g) => {
            const f = byKey.get(g.key)
            return f ? [{ ...g, flag: f }] : []
          })
          return (
            <Table
              caption="Guardrail flags"
              rowKey={(r) => r.key}
              rows={rows}
              empty={<Empty title="No guardrail flags on this gateway">This build has no guardrails to set.</Empty>}
              columns={[
                {
                  label: "Guardrail",
                  render: (r) => (
                    <>
                      <code>{r.key}</code>
                      <div class="muted small">{r.what}</div>
                    </>
                  )
                },
                {
                  label: "State",
                  render: (r) => (
                    <Badge kind={isOn(r.flag) ? "ok" : "muted"}>
                      {r.flag.type === "boolean" ? (r.flag.effectiveValue === "true" ? "on" : "off") : r.flag.effectiveValue}
                    </Badge>
                  )
                },
                {
                  label: "Set by",
                  render: (r) =>
                    r.flag.source === "db"
                      ? "dashboard"
                      : r.flag.source === "env"
                        ? "environment"
                        : `default (${r.flag.type === "boolean" ? (r.flag.defaultValue === "true" ? "on" : "off") : r.flag.defaultValue})`
                },
                {
                  label: "Change",
                  render: (r) => (
                    <FlagControl
                      flag={r.flag}
                      done={() => {
                        flags.reload()
                        p.changed()
                      }}
                    />
                  )
                }
              ]}
            />
          )
        }}
      </Loader>
    </Section>
  )
}

// ---------------------------------------------------------------- policies

const KINDS = [
  { value: "tools", label: "Tools: allow / deny" },
  { value: "models", label: "Models per API key" },
  { value: "maxTokens", label: "Output token cap" },
  { value: "maxCostUsd", label: "Cost cap per request" },
  { value: "blockedTerms", label: "Blocked terms" }
] as const
type Kind = (typeof KINDS)[number]["value"]

/** Patterns typed one per line or comma-separated. */
const list = (s: string) =>
  s
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter(Boolean)

const describePolicy = (p: Policy): string[] => {
  const out: string[] = []
  if (p.tools?.allow?.length) out.push(`tools allowed: ${p.tools.allow.join(", ")}`)
  if (p.tools?.deny?.length) out.push(`tools denied: ${p.tools.deny.join(", ")}`)
  if (p.models)
    for (const [k, v] of Object.entries(p.models)) out.push(`models for ${k === "*" ? "every key" : `key ${k}`}: ${v.join(", ")}`)
  if (p.maxTokens !== null) out.push(`at most ${p.maxTokens} output tokens`)
  if (p.maxCostUsd !== null) out.push(`at most ${fmtMoney(p.maxCostUsd)} per request`)
  if (p.blockedTerms?.length) out.push(`${p.blockedTerms.length} blocked term${p.blockedTerms.length === 1 ? "" : "s"}`)
  return out
}

const NewPolicy = (p: { done: () => void }) => {
  const [name, setName] = useState("")
  const [description, setDescription] = useState("")
  const [enabled, setEnabled] = useState(true)
  const [kind, setKind] = useState<Kind>("tools")
  const [allow, setAllow] = useState("")
  const [deny, setDeny] = useState("")
  const [modelKey, setModelKey] = useState("*")
  const [models, setModels] = useState("")
  const [maxTokens, setMaxTokens] = useState<number | undefined>(4096)
  const [maxCost, setMaxCost] = useState<number | undefined>(0.25)
  const [terms, setTerms] = useState("")
  const [run, busy] = useAction()
  const keys = useLoad(() => ok(api.GET("/api/keys")))
  const submit = () => {
    const rules =
      kind === "tools"
        ? { tools: { ...(list(allow).length ? { allow: list(allow) } : {}), ...(list(deny).length ? { deny: list(deny) } : {}) } }
        : kind === "models"
          ? { models: { [modelKey]: list(models) } }
          : kind === "maxTokens"
            ? { maxTokens }
            : kind === "maxCostUsd"
              ? { maxCostUsd: maxCost }
              : { blockedTerms: list(terms) }
    void run(
      () =>
        ok(
          api.POST("/api/policies", {
            body: { name: name.trim(), ...(description.trim() ? { description: description.trim() } : {}), enabled, ...rules }
          })
        ),
      (r) => `Policy ${r.name} v${r.version} saved`
    ).then((r) => r && p.done())
  }
  return (
    <Form onSubmit={submit} label="New policy">
      <TextInput
        label="Name"
        value={name}
        onInput={setName}
        required
        hint="Letters, digits, '.', '_' or '-'. Saving an existing name makes its next version."
      />
      <TextInput label="Description" value={description} onInput={setDescription} />
      <Select label="Rule" value={kind} options={KINDS} onChange={setKind} />
      {kind === "tools" && (
        <>
          <TextArea
            label="Allowed tools"
            value={allow}
            onInput={setAllow}
            rows={2}
            mono
            hint="Globs, one per line or comma-separated (read_*, search). Empty: any tool not denied."
          />
          <TextArea
            label="Denied tools"
            value={deny}
            onInput={setDeny}
            rows={2}
            mono
            hint="Deny wins over allow (shell_*). Enforced when TOOL_POLICY_MODE is warn or block."
          />
        </>
      )}
      {kind === "models" && (
        <>
          <Select
            label="For API key"
            value={modelKey}
            options={[
              { value: "*", label: "every key without its own entry (*)" },
              ...(keys.data?.keys ?? []).map((k) => ({ value: k.id, label: `${k.name} (${k.id})` }))
            ]}
            onChange={setModelKey}
          />
          <TextArea
            label="Allowed models"
            value={models}
            onInput={setModels}
            rows={2}
            mono
            hint="Model ids or globs (gpt-4o*, openai/gpt-4o-mini)."
          />
        </>
      )}
      {kind === "maxTokens" && (
        <NumberInput label="Most output tokens per request" value={maxTokens} onInput={setMaxTokens} min={1} step={1} />
      )}
      {kind === "maxCostUsd" && <NumberInput label="Most estimated cost per request (USD)" value={maxCost} onInput={setMaxCost} min={0} />}
      {kind === "blockedTerms" && (
        <TextArea
          label="Blocked terms"
          value={terms}
          onInput={setTerms}
          rows={3}
          hint="Words or phrases, one per line; a request containing one is refused (403)."
        />
      )}
      <Checkbox label="Enabled" checked={enabled} onChange={setEnabled} />
      <div class="row">
        <Button kind="primary" type="submit" busy={busy}>
          Save policy
        </Button>
      </div>
    </Form>
  )
}

const PolicyHistory = (p: { policy: Policy }) => {
  const detail = useLoad(() => ok(api.GET("/api/policies/{id}", { params: { path: { id: p.policy.name } } })), [p.policy.name])
  return (
    <Loader of={detail}>
      {(d) => (
        <Table
          caption={`Versions of ${p.policy.name}`}
          rowKey={(v) => v.id}
          rows={d.history}
          columns={[
            { label: "Version", class: "num", render: (v) => `v${v.version}` },
            { label: "Rules", render: (v) => describePolicy(v).join("; ") || "—" },
            { label: "Saved", render: (v) => `${fmtDate(v.createdAt)} by ${v.createdBy}` },
            { label: "Deleted", render: (v) => (v.deletedAt ? fmtDate(v.deletedAt) : "—") }
          ]}
        />
      )}
    </Loader>
  )
}

const Policies = (p: { changed: () => void }) => {
  const policies = useLoad(() => ok(api.GET("/api/policies")))
  const [creating, setCreating] = useState(false)
  const [history, setHistory] = useState<Policy | null>(null)
  const [run] = useAction()
  const remove = (x: Policy) => {
    if (!confirm(`Delete policy ${x.name}? Its versions stay in the history.`)) return
    void run(() => ok(api.DELETE("/api/policies/{id}", { params: { path: { id: x.id } } })), `Policy ${x.name} deleted`).then(() => {
      policies.reload()
      p.changed()
    })
  }
  return (
    <Section
      title="Policies"
      actions={
        <Button kind="primary" onClick={() => setCreating(true)}>
          New policy
        </Button>
      }
    >
      <Loader of={policies}>
        {(d) => (
          <>
            <p class="muted">
              Every enabled policy applies to every request. Tool rules:{" "}
              <Badge kind={d.toolPolicyMode === "block" ? "ok" : d.toolPolicyMode === "warn" ? "warn" : "muted"}>
                TOOL_POLICY_MODE {d.toolPolicyMode}
              </Badge>
            </p>
            <Table
              caption="Policies"
              rowKey={(p) => p.id}
              rows={d.policies}
              empty={
                <Empty title="No policies yet">
                  Create one to limit the tools, models, output tokens or cost of requests, or to block terms.
                </Empty>
              }
              columns={[
                { label: "Name", render: (p) => <strong>{p.name}</strong> },
                { label: "Version", class: "num", render: (p) => `v${p.version}` },
                {
                  label: "Rules",
                  render: (p) => (
                    <ul class="plain-list">
                      {describePolicy(p).map((r) => (
                        <li key={r}>{r}</li>
                      ))}
                    </ul>
                  )
                },
                { label: "State", render: (p) => <Badge kind={p.enabled ? "ok" : "muted"}>{p.enabled ? "enabled" : "disabled"}</Badge> },
                {
                  label: "Actions",
                  render: (p) => (
                    <div class="row">
                      <Button kind="plain" onClick={() => setHistory(p)} aria-label={`History of ${p.name}`}>
                        History
                      </Button>
                      <Button kind="danger" onClick={() => remove(p)} aria-label={`Delete ${p.name}`}>
                        Delete
                      </Button>
                    </div>
                  )
                }
              ]}
            />
          </>
        )}
      </Loader>
      <Dialog open={creating} title="New policy" onClose={() => setCreating(false)}>
        <NewPolicy
          done={() => {
            setCreating(false)
            policies.reload()
            p.changed()
          }}
        />
      </Dialog>
      <Dialog open={history !== null} title={`History of ${history?.name ?? ""}`} onClose={() => setHistory(null)}>
        {history && <PolicyHistory policy={history} />}
      </Dialog>
    </Section>
  )
}

// ---------------------------------------------------------------- audit log

type AuditFilter = {
  kind: "" | "management" | "guardrail" | "service"
  actor: string
  action: string
  target: string
  since: string
  until: string
}
const NO_FILTER: AuditFilter = { kind: "", actor: "", action: "", target: "", since: "", until: "" }
const PAGE = 50

const auditQuery = (f: AuditFilter) => {
  const q: Query<"/api/compliance/audit-log"> = {}
  if (f.kind) q.kind = f.kind
  if (f.actor.trim()) q.actor = f.actor.trim()
  if (f.action.trim()) q.action = f.action.trim()
  if (f.target.trim()) q.target = f.target.trim()
  if (f.since) q.since = new Date(f.since).toISOString()
  if (f.until) q.until = new Date(f.until).toISOString()
  return q
}

const shortDate = (ts: string) => new Date(ts).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" })

const summary = (e: AuditEntry) => {
  const d = e.detail
  if (d && typeof d === "object") {
    const o = d as Record<string, unknown>
    const text = [o.mode && `mode ${String(o.mode)}`, typeof o.detail === "string" ? o.detail : undefined].filter(Boolean).join(" · ")
    if (text) return text
  }
  return e.route ? `${e.method ?? ""} ${e.route}`.trim() : ""
}

const AuditEntryView = (p: { entry: AuditEntry }) => (
  <dl class="audit-detail">
    {(["before", "after", "detail"] as const).map((k) =>
      p.entry[k] === null || p.entry[k] === undefined ? null : (
        <div key={k}>
          <dt>{k}</dt>
          <dd>
            <pre class="mono">{JSON.stringify(p.entry[k], null, 2)}</pre>
          </dd>
        </div>
      )
    )}
  </dl>
)

const AuditLog = (p: { version: number }) => {
  const [draft, setDraft] = useState<AuditFilter>(NO_FILTER)
  const [filter, setFilter] = useState<AuditFilter>(NO_FILTER)
  const [older, setOlder] = useState<{ entries: AuditEntry[]; cursor: number | null } | null>(null)
  const [open, setOpen] = useState<AuditEntry | null>(null)
  const page = useLoad(
    () => ok(api.GET("/api/compliance/audit-log", { params: { query: { ...auditQuery(filter), limit: String(PAGE) } } })),
    [filter, p.version]
  )
  useEffect(() => setOlder(null), [p.version])
  const [run, busy] = useAction()
  const set = (k: keyof AuditFilter) => (v: string) => setDraft({ ...draft, [k]: v })
  const apply = () => {
    setOlder(null)
    setFilter(draft)
  }
  const more = (cursor: number) =>
    void run(() =>
      ok(
        api.GET("/api/compliance/audit-log", { params: { query: { ...auditQuery(filter), limit: String(PAGE), cursor: String(cursor) } } })
      )
    ).then((r) => r && setOlder({ entries: [...(older?.entries ?? []), ...r.entries], cursor: r.nextCursor }))
  const exportHref = `/api/compliance/audit-log/export?${new URLSearchParams(auditQuery(filter) as Record<string, string>).toString()}`
  return (
    <Section
      title="Audit log"
      actions={
        // A download: the browser fetches the JSON-lines export itself (the typed client cannot save a file).
        <a class="btn" href={exportHref} download="audit-log.jsonl">
          Export (JSON lines)
        </a>
      }
    >
      <Form onSubmit={apply} label="Filter the audit log">
        <div class="filters full">
          <Select
            label="Kind"
            value={draft.kind}
            options={[{ value: "", label: "any" }, "management", "guardrail", "service"] as const}
            onChange={(v) => setDraft({ ...draft, kind: v })}
          />
          <TextInput label="Action" value={draft.action} onInput={set("action")} placeholder="policies. or guardrail.*" />
          <TextInput label="Actor" value={draft.actor} onInput={set("actor")} placeholder="admin-session" />
          <TextInput label="Target" value={draft.target} onInput={set("target")} />
          <TextInput label="Since" type="datetime-local" value={draft.since} onInput={set("since")} />
          <TextInput label="Until" type="datetime-local" value={draft.until} onInput={set("until")} />
        </div>
        <div class="row">
          <Button kind="primary" type="submit">
            Filter
          </Button>
          <Button
            onClick={() => {
              setDraft(NO_FILTER)
              setOlder(null)
              setFilter(NO_FILTER)
            }}
          >
            Clear
          </Button>
        </div>
      </Form>
      <Loader of={page}>
        {(d) => {
          const rows = [...d.entries, ...(older?.entries ?? [])]
          const cursor = older ? older.cursor : d.nextCursor
          return (
            <>
              <Table
                caption="Audit log entries"
                rowKey={(e) => String(e.id)}
                rows={rows}
                empty={
                  <Empty title="No entries match">
                    Every change made through the management API, and every guardrail or policy action on a request, is recorded here.
                    Change the filters, or make a change.
                  </Empty>
                }
                columns={[
                  { label: "When", render: (e) => <time dateTime={e.ts}>{shortDate(e.ts)}</time> },
                  { label: "Kind", render: (e) => <Badge kind={e.kind === "guardrail" ? "warn" : "info"}>{e.kind}</Badge> },
                  { label: "Action", render: (e) => <code>{e.action}</code> },
                  {
                    label: "Target",
                    render: (e) => (
                      <>
                        {e.target ?? "—"}
                        {summary(e) && <div class="muted small">{summary(e)}</div>}
                      </>
                    )
                  },
                  { label: "Actor", render: (e) => <span title={e.ip ?? undefined}>{e.actor}</span> },
                  {
                    label: "Status",
                    class: "num",
                    render: (e) => (e.status === null ? "—" : <Badge kind={e.status < 400 ? "ok" : "bad"}>{e.status}</Badge>)
                  },
                  {
                    label: "Detail",
                    render: (e) => (
                      <Button kind="plain" onClick={() => setOpen(e)} aria-label={`View entry ${e.id}`}>
                        View
                      </Button>
                    )
                  }
                ]}
              />
              <p class="muted small">
                {rows.length} shown · entries are kept {d.retentionDays} days.
                {cursor !== null && (
                  <>
                    {" "}
                    <Button busy={busy} onClick={() => more(cursor)}>
                      Older entries
                    </Button>
                  </>
                )}
              </p>
            </>
          )
        }}
      </Loader>
      <Dialog open={open !== null} title={`Audit entry ${open?.id ?? ""}: ${open?.action ?? ""}`} onClose={() => setOpen(null)}>
        {open && <AuditEntryView entry={open} />}
      </Dialog>
    </Section>
  )
}

// ---------------------------------------------------------------- evals

type EvalSet = Res<"/api/evals", "get">["evals"][number]
type Grader = "contains" | "exact" | "regex"

const NewEval = (p: { done: () => void }) => {
  const [name, setName] = useState("")
  const [prompt, setPrompt] = useState("")
  const [grader, setGrader] = useState<Grader>("contains")
  const [expected, setExpected] = useState("")
  const [run, busy] = useAction()
  const submit = () =>
    void run(
      () =>
        ok(
          api.POST("/api/evals", {
            body: {
              name: name.trim(),
              cases: [{ prompt, grader: grader === "regex" ? { type: "regex", pattern: expected } : { type: grader, expected } }]
            }
          })
        ),
      (r) => `Eval ${r.name} created`
    ).then((r) => r && p.done())
  return (
    <Form onSubmit={submit} label="New eval">
      <TextInput label="Eval name" value={name} onInput={setName} required />
      <TextArea label="Prompt" value={prompt} onInput={setPrompt} rows={3} />
      <Select label="Grader" value={grader} options={["contains", "exact", "regex"] as const} onChange={setGrader} />
      <TextInput label={grader === "regex" ? "Pattern" : "Expected answer"} value={expected} onInput={setExpected} required />
      <p class="muted small">
        One case here; the API takes more cases and the json-schema and judge graders (docs/guardrails.md, "Evals").
      </p>
      <Button kind="primary" type="submit" busy={busy}>
        Create eval
      </Button>
    </Form>
  )
}

const EvalDetail = (p: { set: EvalSet }) => {
  const detail = useLoad(() => ok(api.GET("/api/evals/{id}", { params: { path: { id: p.set.id } } })), [p.set.id])
  const [models, setModels] = useState("")
  const [run, busy] = useAction()
  useInterval(() => {
    if (detail.data?.runs.some((r) => r.status === "queued" || r.status === "running")) detail.reload()
  }, 2000)
  const start = () =>
    void run(
      () => ok(api.POST("/api/evals/{id}/runs", { params: { path: { id: p.set.id } }, body: { models: list(models) } })),
      "Run queued"
    ).then((r) => r && detail.reload())
  return (
    <>
      <Form onSubmit={start} label="Run the eval">
        <TextInput
          label="Models to run"
          value={models}
          onInput={setModels}
          required
          hint="Model ids the gateway serves, comma-separated."
        />
        <Button kind="primary" type="submit" busy={busy}>
          Run
        </Button>
      </Form>
      <Loader of={detail}>
        {(d) =>
          d.runs.length === 0 ? (
            <Empty title="No runs yet">Run the eval against one or more models to compare them.</Empty>
          ) : (
            d.runs.map((r) => (
              <div key={r.id} class="eval-run">
                <p>
                  <Badge kind={r.status === "completed" ? "ok" : r.status === "failed" ? "bad" : "info"}>{r.status}</Badge>{" "}
                  {fmtDate(r.createdAt)} {r.error && <span class="muted">{r.error}</span>}
                </p>
                {r.results && (
                  <Table
                    caption={`Results of run ${r.id}`}
                    rowKey={(m) => m.model}
                    rows={r.results}
                    columns={[
                      { label: "Model", render: (m) => m.model },
                      { label: "Score", class: "num", render: (m) => `${Math.round(m.score * 100)} %` },
                      { label: "Passed", class: "num", render: (m) => `${m.passed} / ${m.total}` },
                      { label: "Latency", class: "num", render: (m) => fmtMs(m.meanLatencyMs) },
                      { label: "Cost", class: "num", render: (m) => fmtMoney(m.costUsd) }
                    ]}
                  />
                )}
              </div>
            ))
          )
        }
      </Loader>
    </>
  )
}

const Evals = (p: { changed: () => void }) => {
  const evals = useLoad(() => ok(api.GET("/api/evals")))
  const [creating, setCreating] = useState(false)
  const [open, setOpen] = useState<EvalSet | null>(null)
  return (
    <Section title="Evals" actions={<Button onClick={() => setCreating(true)}>New eval</Button>}>
      <Loader of={evals}>
        {(d) => (
          <Table
            caption="Eval sets"
            rowKey={(e) => e.id}
            rows={d.evals}
            empty={
              <Empty title="No evals yet">
                An eval is a set of prompts with graders; run it against models to compare their answers, latency and cost.
              </Empty>
            }
            columns={[
              { label: "Name", render: (e) => e.name },
              { label: "Cases", class: "num", render: (e) => e.cases.length },
              { label: "Created", render: (e) => fmtDate(e.createdAt) },
              {
                label: "Runs",
                render: (e) => (
                  <Button kind="plain" onClick={() => setOpen(e)} aria-label={`Open runs of ${e.name}`}>
                    Open
                  </Button>
                )
              }
            ]}
          />
        )}
      </Loader>
      <Dialog open={creating} title="New eval" onClose={() => setCreating(false)}>
        <NewEval
          done={() => {
            setCreating(false)
            evals.reload()
            p.changed()
          }}
        />
      </Dialog>
      <Dialog open={open !== null} title={`Eval ${open?.name ?? ""}`} onClose={() => setOpen(null)}>
        {open && <EvalDetail set={open} />}
      </Dialog>
    </Section>
  )
}

export default function GuardrailsPage() {
  // A change made on this page shows in the audit log below at once.
  const [version, setVersion] = useState(0)
  const changed = () => setVersion((v) => v + 1)
  return (
    <Page
      title="Guardrails & audit"
      description="What the gateway checks on every request, the policies it enforces, and the record of every change."
    >
      <GuardrailFlags changed={changed} />
      <Policies changed={changed} />
      <AuditLog version={version} />
      <Evals changed={changed} />
    </Page>
  )
}
