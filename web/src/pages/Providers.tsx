import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import type { paths } from "../api/schema"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  Empty,
  fmtDate,
  fmtMs,
  fmtNumber,
  Form,
  Loader,
  NumberInput,
  Page,
  Section,
  Select,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import { NodesSection } from "./providers/Nodes"
import { OAuthSection } from "./providers/OAuth"
import "./Providers.css"

type Connection = paths["/api/providers"]["get"]["responses"][200]["content"]["application/json"]["connections"][number]
type TestResult = paths["/api/providers/{id}/test"]["post"]["responses"][200]["content"]["application/json"]

/**
 * Providers without catalog models (their models come from the connection itself), so the catalog's
 * provider list cannot offer them: docs/providers.md names them.
 */
const MODELLESS_PROVIDERS = ["openai-compatible", "claude-code-compatible"]
const FORMATS = ["", "openai-chat", "openai-responses", "anthropic", "gemini", "ollama"] as const
const TIERS = ["", "free", "standard", "pro", "ultra"] as const

const statusKind = (c: Connection): "ok" | "bad" | "warn" | "muted" =>
  !c.enabled
    ? "muted"
    : c.testStatus === "active"
      ? "ok"
      : c.testStatus === "error" || c.lastError
        ? "bad"
        : c.rateLimitedUntil
          ? "warn"
          : "muted"
const statusText = (c: Connection) => (!c.enabled ? "disabled" : (c.testStatus ?? (c.lastError ? "error" : "not tested")))

/** The result of the last test, said in words (ok, HTTP status, models, latency; or the upstream's error). */
const TestOutcome = (p: { result: TestResult }) => {
  const r = p.result
  return (
    <div class={`test-result ${r.ok ? "test-ok" : "test-bad"}`} role="status" aria-label={`Test result for ${r.name}`}>
      <strong>{r.ok ? `✓ ${r.name} works` : `✗ ${r.name} failed`}</strong>
      <span>
        {r.status !== null ? `HTTP ${r.status}` : "no answer"} · {fmtMs(r.latencyMs)}
        {r.modelCount !== null ? ` · ${fmtNumber(r.modelCount)} models` : ""}
      </span>
      {r.error && <span class="test-error">{r.error}</span>}
    </div>
  )
}

interface FormState {
  provider: string
  name: string
  baseUrl: string
  apiKey: string
  defaultModel: string
  models: string
  priority: number | undefined
  maxConcurrent: number | undefined
  enabled: boolean
  upstreamFormat: (typeof FORMATS)[number]
  accountTier: (typeof TIERS)[number]
  proxyId: string
}

const emptyForm = (provider: string): FormState => ({
  provider,
  name: "",
  baseUrl: "",
  apiKey: "",
  defaultModel: "",
  models: "",
  priority: undefined,
  maxConcurrent: undefined,
  enabled: true,
  upstreamFormat: "",
  accountTier: "",
  proxyId: ""
})

const fromConnection = (c: Connection): FormState => ({
  provider: c.provider,
  name: c.name,
  baseUrl: c.baseUrl ?? "",
  apiKey: "",
  defaultModel: c.defaultModel ?? "",
  models: c.models.join(", "),
  priority: c.priority,
  maxConcurrent: c.max_concurrent ?? undefined,
  enabled: c.enabled,
  upstreamFormat: "",
  accountTier: (c.accountTier ?? "") as FormState["accountTier"],
  proxyId: c.proxyId ?? ""
})

const splitList = (s: string) =>
  s
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean)

/** The add / edit form. On edit an empty API key keeps the stored one (the API never sends it back). */
const ConnectionForm = (p: {
  editing: Connection | null
  providers: ReadonlyArray<string>
  proxies: ReadonlyArray<{ id: string; name: string }>
  onDone: () => void
}) => {
  const [f, setF] = useState<FormState>(() =>
    p.editing
      ? fromConnection(p.editing)
      : emptyForm(p.providers.includes("openai-compatible") ? "openai-compatible" : (p.providers[0] ?? "openai"))
  )
  const set =
    <K extends keyof FormState>(k: K) =>
    (v: FormState[K]) =>
      setF((s) => ({ ...s, [k]: v }))
  const [run, busy] = useAction()
  const [check, checking] = useAction()
  const [probe, setProbe] = useState<TestResult | null>(null)

  const submit = () =>
    run(
      async () => {
        const common = {
          name: f.name.trim() || undefined,
          baseUrl: f.baseUrl.trim() || null,
          defaultModel: f.defaultModel.trim() || null,
          models: splitList(f.models),
          priority: f.priority,
          max_concurrent: f.maxConcurrent ?? null,
          enabled: f.enabled,
          accountTier: f.accountTier || null,
          proxyId: f.proxyId || null,
          ...(f.upstreamFormat ? { upstreamFormat: f.upstreamFormat } : {})
        }
        if (p.editing) {
          // Only what changed: re-sending an unchanged base URL would clear the connection's test status.
          const before = fromConnection(p.editing)
          const changed = (k: keyof FormState) => JSON.stringify(f[k]) !== JSON.stringify(before[k])
          const body = {
            ...(changed("name") && common.name ? { name: common.name } : {}),
            ...(changed("baseUrl") ? { baseUrl: common.baseUrl } : {}),
            ...(changed("defaultModel") ? { defaultModel: common.defaultModel } : {}),
            ...(changed("models") ? { models: common.models } : {}),
            ...(changed("priority") && f.priority !== undefined ? { priority: f.priority } : {}),
            ...(changed("maxConcurrent") ? { max_concurrent: common.max_concurrent } : {}),
            ...(changed("enabled") ? { enabled: f.enabled } : {}),
            ...(changed("accountTier") ? { accountTier: common.accountTier } : {}),
            ...(changed("proxyId") ? { proxyId: common.proxyId } : {}),
            ...(f.upstreamFormat ? { upstreamFormat: f.upstreamFormat } : {}),
            ...(f.apiKey ? { apiKey: f.apiKey } : {})
          }
          await ok(api.PUT("/api/providers/{id}", { params: { path: { id: p.editing.id } }, body }))
        } else {
          await ok(api.POST("/api/providers", { body: { provider: f.provider, ...common, ...(f.apiKey ? { apiKey: f.apiKey } : {}) } }))
        }
        p.onDone()
      },
      p.editing ? "Provider saved" : "Provider added"
    )

  const validate = () =>
    check(async () => {
      const r = await ok(
        api.POST("/api/providers/validate", { body: { provider: f.provider, baseUrl: f.baseUrl.trim() || null, apiKey: f.apiKey || null } })
      )
      setProbe({ id: "", name: f.name.trim() || f.provider, provider: f.provider, ...r })
    })

  const providerOptions = p.providers.includes(f.provider) ? p.providers : [f.provider, ...p.providers]
  return (
    <Form onSubmit={() => void submit()} label={p.editing ? `Edit ${p.editing.name}` : "Add a provider"}>
      {p.editing ? (
        <p class="full muted">
          Provider: <code>{f.provider}</code> (a connection's provider cannot be changed).
        </p>
      ) : (
        <Select
          label="Provider"
          value={f.provider}
          options={providerOptions}
          onChange={set("provider")}
          hint="openai-compatible: any server that speaks the OpenAI API (base URL required)."
        />
      )}
      <TextInput
        label="Name"
        value={f.name}
        onInput={set("name")}
        hint="Used as the model prefix (name/model). Default: the provider id."
      />
      <TextInput
        label="Base URL"
        type="url"
        value={f.baseUrl}
        onInput={set("baseUrl")}
        placeholder="https://api.example.com/v1"
        hint="Leave empty for the provider's own. OpenAI-compatible URLs include /v1."
        wide
      />
      <TextInput
        label="API key"
        type="password"
        autoComplete="off"
        value={f.apiKey}
        onInput={set("apiKey")}
        hint={
          p.editing
            ? p.editing.hasApiKey
              ? `Stored: ${p.editing.apiKey ?? "****"}. Leave empty to keep it.`
              : "No key stored."
            : "Stored encrypted; only a masked form is ever shown."
        }
      />
      <TextInput label="Default model" value={f.defaultModel} onInput={set("defaultModel")} placeholder="gpt-4o-mini" />
      <TextInput
        label="Extra models"
        value={f.models}
        onInput={set("models")}
        hint="Model ids this connection serves beyond the catalog, separated by commas."
        wide
      />
      <NumberInput label="Priority" value={f.priority} onInput={set("priority")} min={0} step={1} hint="Lower is preferred (default 1)." />
      <NumberInput
        label="Max concurrent requests"
        value={f.maxConcurrent}
        onInput={set("maxConcurrent")}
        min={1}
        step={1}
        hint="Empty: no limit."
      />
      <Select
        label="Upstream format"
        value={f.upstreamFormat}
        options={FORMATS.map((v) => ({
          value: v,
          label: v || (p.editing ? `unchanged (${p.editing.upstreamFormat})` : "the provider's usual")
        }))}
        onChange={set("upstreamFormat")}
      />
      <Select
        label="Account tier"
        value={f.accountTier}
        options={TIERS.map((v) => ({ value: v, label: v || "standard (default)" }))}
        onChange={set("accountTier")}
      />
      <Select
        label="Egress proxy"
        value={f.proxyId}
        options={[{ value: "", label: "the global default" }, ...p.proxies.map((x) => ({ value: x.id, label: x.name }))]}
        onChange={set("proxyId")}
        hint={p.proxies.length === 0 ? "No proxies registered (the proxy registry: /api/v1/management/proxies)." : undefined}
      />
      <Checkbox label="Enabled" checked={f.enabled} onChange={set("enabled")} hint="A disabled connection is never routed to." />
      {probe && <div class="full">{<TestOutcome result={probe} />}</div>}
      <div class="actions">
        <Button kind="primary" type="submit" busy={busy}>
          {p.editing ? "Save" : "Add provider"}
        </Button>
        {!p.editing && (
          <Button onClick={() => void validate()} busy={checking}>
            Check credentials
          </Button>
        )}
      </div>
    </Form>
  )
}

const ModelsList = (p: { connection: Connection }) => {
  const models = useLoad(() => ok(api.GET("/api/providers/{id}/models", { params: { path: { id: p.connection.id } } })), [p.connection.id])
  return (
    <Loader of={models}>
      {(m) => (
        <>
          <p class="muted">
            {m.source === "upstream" ? "As the upstream lists them." : "From the catalog (the upstream's list did not answer)."}
            {m.error ? ` ${m.error}` : ""}
          </p>
          <Table
            caption={`Models of ${p.connection.name}`}
            rowKey={(r) => r.id}
            rows={m.models}
            empty={<Empty title="No models">Add model ids to the connection's “Extra models”, or set a default model.</Empty>}
            columns={[
              { label: "Model", render: (r) => <code>{`${p.connection.name}/${r.id}`}</code> },
              { label: "Name", render: (r) => r.name ?? "—" },
              { label: "Context", class: "num", render: (r) => fmtNumber(r.contextWindow) },
              { label: "Max output", class: "num", render: (r) => fmtNumber(r.maxOutput) }
            ]}
          />
        </>
      )}
    </Loader>
  )
}

export default function ProvidersPage() {
  const list = useLoad(() => ok(api.GET("/api/providers")))
  const catalog = useLoad(() => ok(api.GET("/api/models/catalog", { params: { query: { scope: "all" } } })))
  const proxies = useLoad(() => ok(api.GET("/api/v1/management/proxies")))
  const [dialog, setDialog] = useState<
    { kind: "add" } | { kind: "edit"; c: Connection } | { kind: "models"; c: Connection } | { kind: "delete"; c: Connection } | null
  >(null)
  const [results, setResults] = useState<Record<string, TestResult>>({})
  const [testing, setTesting] = useState<string | null>(null)
  const [run, busy] = useAction()

  const providers = [...new Set([...MODELLESS_PROVIDERS, ...(catalog.data?.models.map((m) => m.provider) ?? [])])].sort()
  const close = () => setDialog(null)
  const done = () => {
    close()
    list.reload()
  }

  const test = async (c: Connection) => {
    setTesting(c.id)
    const r = await run(() => ok(api.POST("/api/providers/{id}/test", { params: { path: { id: c.id } } })))
    setTesting(null)
    if (r) {
      setResults((s) => ({ ...s, [c.id]: r }))
      list.reload()
    }
  }
  const toggle = (c: Connection) =>
    run(
      () => ok(api.PUT("/api/providers/{id}", { params: { path: { id: c.id } }, body: { enabled: !c.enabled } })),
      `${c.name} ${c.enabled ? "disabled" : "enabled"}`
    ).then(() => list.reload())
  const remove = (c: Connection) =>
    run(() => ok(api.DELETE("/api/providers/{id}", { params: { path: { id: c.id } } })), `${c.name} deleted`).then(() => {
      setResults(({ [c.id]: _, ...rest }) => rest)
      done()
    })

  const tested = Object.values(results).filter((r) => list.data?.connections.some((c) => c.id === r.id))
  return (
    <Page
      title="Providers"
      description="The upstream accounts requests are routed to: an API key (or an OAuth sign-in) per connection."
      actions={
        <Button kind="primary" onClick={() => setDialog({ kind: "add" })}>
          Add provider
        </Button>
      }
    >
      <Section title="Connections">
        <Loader of={list}>
          {(d) => (
            <>
              {tested.length > 0 && (
                <div class="test-results">
                  {tested.map((r) => (
                    <TestOutcome key={r.id} result={r} />
                  ))}
                </div>
              )}
              <Table
                caption="Provider connections"
                rowKey={(c) => c.id}
                rows={d.connections}
                empty={
                  <Empty title="No providers yet">
                    Press <strong>Add provider</strong>, pick the provider (or <code>openai-compatible</code> for any OpenAI-style server),
                    paste its API key and press <strong>Check credentials</strong>; then test it here. Subscriptions that sign in with OAuth
                    connect below. Then <Link to="/keys">create an API key</Link> for your clients.
                  </Empty>
                }
                columns={[
                  {
                    label: "Name",
                    render: (c) => (
                      <div class="stack">
                        <strong>{c.name}</strong>
                        <span class="muted small">{c.provider}</span>
                      </div>
                    )
                  },
                  { label: "Base URL", render: (c) => <span class="url">{c.effectiveBaseUrl ?? "—"}</span> },
                  {
                    label: "Key",
                    render: (c) =>
                      c.authType === "oauth" ? (
                        <Badge kind="info">OAuth{c.oauth?.email ? ` ${c.oauth.email}` : ""}</Badge>
                      ) : c.hasApiKey ? (
                        <code>{c.apiKey ?? "****"}</code>
                      ) : (
                        <span class="muted">none</span>
                      )
                  },
                  { label: "Default model", render: (c) => c.defaultModel ?? "—" },
                  {
                    label: "Status",
                    render: (c) => (
                      <div class="stack">
                        <Badge kind={statusKind(c)}>{statusText(c)}</Badge>
                        {c.lastTestedAt && <span class="muted small">tested {fmtDate(c.lastTestedAt)}</span>}
                        {c.lastError && <span class="small test-error">{c.lastError}</span>}
                      </div>
                    )
                  },
                  {
                    label: "Actions",
                    render: (c) => (
                      <div class="row">
                        <Button onClick={() => void test(c)} busy={testing === c.id} aria-label={`Test ${c.name}`}>
                          Test
                        </Button>
                        <Button onClick={() => setDialog({ kind: "edit", c })} aria-label={`Edit ${c.name}`}>
                          Edit
                        </Button>
                        <Button onClick={() => void toggle(c)} disabled={busy} aria-label={`${c.enabled ? "Disable" : "Enable"} ${c.name}`}>
                          {c.enabled ? "Disable" : "Enable"}
                        </Button>
                        <Button onClick={() => setDialog({ kind: "models", c })} aria-label={`Models of ${c.name}`}>
                          Models
                        </Button>
                        <Button kind="danger" onClick={() => setDialog({ kind: "delete", c })} aria-label={`Delete ${c.name}`}>
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
      </Section>
      <OAuthSection onChange={list.reload} />
      <NodesSection />
      <Dialog
        open={dialog?.kind === "add" || dialog?.kind === "edit"}
        title={dialog?.kind === "edit" ? `Edit ${dialog.c.name}` : "Add a provider"}
        onClose={close}
      >
        {(dialog?.kind === "add" || dialog?.kind === "edit") && (
          <ConnectionForm
            key={dialog.kind === "edit" ? dialog.c.id : "new"}
            editing={dialog.kind === "edit" ? dialog.c : null}
            providers={providers}
            proxies={proxies.data?.proxies ?? []}
            onDone={done}
          />
        )}
      </Dialog>
      <Dialog open={dialog?.kind === "models"} title={dialog?.kind === "models" ? `Models of ${dialog.c.name}` : "Models"} onClose={close}>
        {dialog?.kind === "models" && <ModelsList connection={dialog.c} />}
      </Dialog>
      <Dialog open={dialog?.kind === "delete"} title="Delete this provider?" onClose={close}>
        {dialog?.kind === "delete" && (
          <>
            <p>
              <strong>{dialog.c.name}</strong> ({dialog.c.provider}) and its stored key are removed; requests for{" "}
              <code>{dialog.c.name}/…</code> stop routing to it.
            </p>
            <div class="actions">
              <Button kind="danger" busy={busy} onClick={() => void remove(dialog.c)}>
                Delete {dialog.c.name}
              </Button>
              <Button onClick={close}>Cancel</Button>
            </div>
          </>
        )}
      </Dialog>
    </Page>
  )
}
