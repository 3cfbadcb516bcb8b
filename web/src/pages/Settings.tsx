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
  ErrorBox,
  fmtDate,
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
  useLoad
} from "../ui"
import { BackupSchedule } from "./operate/BackupSchedule"
import { PasswordLogin } from "./operate/PasswordLogin"
import "./operate/operate.css"

// Global settings (docs/operations.md, "Settings"): the whole document (GET/PUT/PATCH /api/settings)
// and one form per section, each saved through its own route (PUT /api/settings/<section>); the
// egress proxy registry (/api/v1/management/proxies, docs/egress.md).

const loadSettings = () => ok(api.GET("/api/settings"))
type Settings = Awaited<ReturnType<typeof loadSettings>>
const loadProxies = () => ok(api.GET("/api/v1/management/proxies"))
type Proxy = Awaited<ReturnType<typeof loadProxies>>["proxies"][number]

const FAMILIES = [
  { value: "auto", label: "auto (either family)" },
  { value: "ipv4", label: "IPv4 only" },
  { value: "ipv6", label: "IPv6 only" }
] as const
type Family = (typeof FAMILIES)[number]["value"]

/** One entry a line (blank lines dropped). */
const lines = (s: string) =>
  s
    .split("\n")
    .map((x) => x.trim())
    .filter(Boolean)

// ---------------------------------------------------------------- proxy

const ProxySection = (p: { value: Settings["proxy"]; onSaved: () => void }) => {
  const [url, setUrl] = useState(p.value.url ?? "")
  const [family, setFamily] = useState<Family>(p.value.family as Family)
  const [noProxy, setNoProxy] = useState(p.value.noProxy.join("\n"))
  const [target, setTarget] = useState("")
  const [result, setResult] = useState<
    { ok: boolean; status: number | null; latencyMs: number; error: string | null; proxy: string; family: string | null } | undefined
  >()
  const [run, busy] = useAction()
  const [test, testing] = useAction()
  return (
    <>
      <Form
        label="Upstream proxy"
        onSubmit={() =>
          void run(
            () => ok(api.PUT("/api/settings/proxy", { body: { url: url.trim() ? url.trim() : null, family, noProxy: lines(noProxy) } })),
            "Proxy saved"
          ).then((r) => r && p.onSaved())
        }
      >
        <TextInput
          label="Proxy URL"
          value={url}
          onInput={setUrl}
          placeholder="http://user:password@proxy.example:3128"
          hint="http, https, socks5 or socks5h; empty: connect directly. A stored password shows as ****; leave it so to keep it."
          wide
        />
        <Select
          label="Address family"
          value={family}
          options={FAMILIES}
          onChange={setFamily}
          hint="Pinning to one family has no fallback."
        />
        <TextArea
          label="Hosts that go direct (no proxy)"
          value={noProxy}
          onInput={setNoProxy}
          rows={3}
          mono
          hint="One a line: a host, .domain suffix, IP, CIDR or *."
        />
        <Button kind="primary" type="submit" busy={busy}>
          Save proxy
        </Button>
      </Form>
      <h3 class="sub">Test the proxy</h3>
      <Form
        label="Test the proxy"
        onSubmit={() =>
          void test(() =>
            ok(
              api.POST("/api/settings/proxy/test", {
                body: { url: target.trim(), ...(url.trim() && url.trim() !== p.value.url ? { proxy: url.trim(), family } : {}) }
              })
            )
          ).then((r) => r && setResult(r))
        }
      >
        <TextInput
          label="URL to fetch through the proxy"
          type="url"
          value={target}
          onInput={setTarget}
          required
          placeholder="https://api.openai.com/v1/models"
          wide
        />
        <Button type="submit" busy={testing}>
          Test
        </Button>
      </Form>
      {result && (
        <p class={`result ${result.ok ? "result-ok" : "result-bad"}`} role="status">
          {result.ok ? <Badge kind="ok">reached</Badge> : <Badge kind="bad">failed</Badge>} via{" "}
          <code class="mono wrap">{result.proxy}</code>
          {result.status !== null ? ` · HTTP ${result.status}` : ""} · {Math.round(result.latencyMs)} ms
          {result.family ? ` · ${result.family}` : ""}
          {result.error ? ` · ${result.error}` : ""}
        </p>
      )}
    </>
  )
}

// ---------------------------------------------------------------- proxy registry

type ProxyForm = {
  name: string
  type: "http" | "https" | "socks5"
  host: string
  port: number | undefined
  username: string
  password: string
  family: Family
  free: boolean
}
const emptyProxy: ProxyForm = { name: "", type: "http", host: "", port: 3128, username: "", password: "", family: "auto", free: false }

const ProxyFields = (p: { value: ProxyForm; onChange: (v: ProxyForm) => void; editing: boolean }) => {
  const v = p.value
  const set =
    <K extends keyof ProxyForm>(k: K) =>
    (x: ProxyForm[K]) =>
      p.onChange({ ...v, [k]: x })
  return (
    <>
      <TextInput label="Name" value={v.name} onInput={set("name")} required />
      <Select label="Type" value={v.type} options={["http", "https", "socks5"] as const} onChange={set("type")} />
      <TextInput label="Host" value={v.host} onInput={set("host")} required placeholder="proxy.example or 10.0.0.5" />
      <NumberInput label="Port" value={v.port} onInput={set("port")} min={1} max={65535} step={1} />
      <TextInput label="Username" value={v.username} onInput={set("username")} autoComplete="off" />
      <TextInput
        label="Password"
        type="password"
        value={v.password}
        onInput={set("password")}
        autoComplete="new-password"
        hint={p.editing ? "Empty keeps the stored password." : "Stored encrypted."}
      />
      <Select label="Address family" value={v.family} options={FAMILIES} onChange={set("family")} />
      <Checkbox label="Free / public proxy" checked={v.free} onChange={set("free")} hint="Used only while FREE_PROXY_ENABLED is on." />
    </>
  )
}

const ProxyRegistry = () => {
  const list = useLoad(loadProxies)
  const [form, setForm] = useState<ProxyForm>(emptyProxy)
  const [editing, setEditing] = useState<{ id: string; form: ProxyForm } | undefined>()
  const [removing, setRemoving] = useState<Proxy | undefined>()
  const [run, busy] = useAction()
  const body = (f: ProxyForm, editing: boolean) => ({
    name: f.name,
    type: f.type,
    host: f.host,
    port: f.port ?? 0,
    username: f.username ? f.username : null,
    ...(f.password ? { password: f.password } : editing ? {} : { password: null }),
    family: f.family,
    free: f.free
  })
  return (
    <>
      <Loader of={list}>
        {(data) => (
          <Table
            caption="Registered proxies"
            rows={data.proxies}
            rowKey={(x) => x.id}
            empty={
              <Empty title="No proxies registered">Add one below; a provider connection then names it to send its calls through it.</Empty>
            }
            columns={[
              { label: "Name", render: (x) => <strong>{x.name}</strong> },
              { label: "URL", render: (x) => <code class="mono wrap">{x.url}</code> },
              { label: "Family", render: (x) => x.family },
              { label: "Used by", render: (x) => (x.usedBy.length ? x.usedBy.join(", ") : <span class="muted">nothing</span>) },
              { label: "Updated", render: (x) => fmtDate(x.updatedAt) },
              {
                label: "Actions",
                render: (x) => (
                  <div class="row-actions">
                    <Button
                      onClick={() =>
                        setEditing({
                          id: x.id,
                          form: {
                            name: x.name,
                            type: x.type,
                            host: x.host,
                            port: x.port,
                            username: x.username ?? "",
                            password: "",
                            family: x.family,
                            free: x.free
                          }
                        })
                      }
                      aria-label={`Edit proxy ${x.name}`}
                    >
                      Edit
                    </Button>
                    <Button kind="danger" onClick={() => setRemoving(x)} aria-label={`Delete proxy ${x.name}`}>
                      Delete
                    </Button>
                  </div>
                )
              }
            ]}
          />
        )}
      </Loader>
      <h3 class="sub">Add a proxy</h3>
      <Form
        label="Add a proxy"
        onSubmit={() =>
          void run(() => ok(api.POST("/api/v1/management/proxies", { body: body(form, false) })), "Proxy added").then((r) => {
            if (!r) return
            setForm(emptyProxy)
            list.reload()
          })
        }
      >
        <ProxyFields value={form} onChange={setForm} editing={false} />
        <Button kind="primary" type="submit" busy={busy}>
          Add proxy
        </Button>
      </Form>
      <Dialog open={editing !== undefined} title="Edit proxy" onClose={() => setEditing(undefined)}>
        {editing && (
          <Form
            label="Edit proxy"
            onSubmit={() =>
              void run(
                () =>
                  ok(
                    api.PATCH("/api/v1/management/proxies/{id}", { params: { path: { id: editing.id } }, body: body(editing.form, true) })
                  ),
                "Proxy saved"
              ).then((r) => {
                if (!r) return
                setEditing(undefined)
                list.reload()
              })
            }
          >
            <ProxyFields value={editing.form} onChange={(f) => setEditing({ ...editing, form: f })} editing />
            <div class="actions">
              <Button kind="primary" type="submit" busy={busy}>
                Save
              </Button>
              <Button onClick={() => setEditing(undefined)}>Cancel</Button>
            </div>
          </Form>
        )}
      </Dialog>
      <Confirm
        item={removing}
        title="Delete this proxy?"
        action="Delete"
        onClose={() => setRemoving(undefined)}
        remove={(proxy) => ok(api.DELETE("/api/v1/management/proxies/{id}", { params: { path: { id: proxy.id } } }))}
        done="Proxy deleted"
        onRemoved={list.reload}
      >
        {(proxy) => (
          <p>
            <strong>{proxy.name}</strong> is removed from the registry
            {proxy.usedBy.length ? ` (used by ${proxy.usedBy.join(", ")}: the API refuses while connections name it)` : ""}.
          </p>
        )}
      </Confirm>
    </>
  )
}

// ---------------------------------------------------------------- ip filter, thinking, system prompt, login

const IpFilterSection = (p: { value: Settings["ipFilter"]; onSaved: () => void }) => {
  const [allow, setAllow] = useState(p.value.allow.join("\n"))
  const [deny, setDeny] = useState(p.value.deny.join("\n"))
  const [run, busy] = useAction()
  return (
    <Form
      label="IP filter"
      onSubmit={() =>
        void run(
          () => ok(api.PUT("/api/settings/ip-filter", { body: { allow: lines(allow), deny: lines(deny) } })),
          "IP filter saved"
        ).then((r) => r && p.onSaved())
      }
    >
      <TextArea
        label="Allow"
        value={allow}
        onInput={setAllow}
        rows={4}
        mono
        hint="One address or CIDR a line (10.0.0.0/8, 2001:db8::/32). Empty: every address is allowed unless denied."
      />
      <TextArea label="Deny" value={deny} onInput={setDeny} rows={4} mono hint="Wins over Allow." />
      <Button kind="primary" type="submit" busy={busy}>
        Save IP filter
      </Button>
    </Form>
  )
}

type Mode = Settings["thinkingBudget"]["mode"]
type Effort = Settings["thinkingBudget"]["effort"]

const ThinkingSection = (p: { value: Settings["thinkingBudget"]; onSaved: () => void }) => {
  const [v, setV] = useState(p.value)
  const [run, busy] = useAction()
  return (
    <Form
      label="Thinking budget"
      onSubmit={() =>
        void run(() => ok(api.PUT("/api/settings/thinking-budget", { body: v })), "Thinking budget saved").then((r) => r && p.onSaved())
      }
    >
      <Select<Mode>
        label="Mode"
        value={v.mode}
        options={[
          { value: "passthrough", label: "passthrough" },
          { value: "cap", label: "cap" },
          { value: "force", label: "force" }
        ]}
        onChange={(mode) => setV({ ...v, mode })}
        hint="passthrough: requests as sent; cap: budgets above the maximum are lowered; force: every request at the effort and budget below."
      />
      <NumberInput
        label="Maximum budget (tokens)"
        value={v.maxTokens}
        onInput={(n) => setV({ ...v, maxTokens: n ?? 0 })}
        min={0}
        max={1000000}
        step={1}
        hint="cap: the largest reasoning budget a request keeps."
      />
      <Select<Effort>
        label="Effort"
        value={v.effort}
        options={["none", "minimal", "low", "medium", "high"]}
        onChange={(effort) => setV({ ...v, effort })}
        hint="force: for formats that take a level (OpenAI, Responses, Ollama)."
      />
      <NumberInput
        label="Budget (tokens)"
        value={v.budgetTokens}
        onInput={(n) => setV({ ...v, budgetTokens: n ?? 0 })}
        min={0}
        max={1000000}
        step={1}
        hint="force: for formats that take tokens (Anthropic, Gemini); 0 turns thinking off."
      />
      <Button kind="primary" type="submit" busy={busy}>
        Save thinking budget
      </Button>
    </Form>
  )
}

const SystemPromptSection = (p: { value: Settings["systemPrompt"]; onSaved: () => void }) => {
  const [enabled, setEnabled] = useState(p.value.enabled)
  const [text, setText] = useState(p.value.text)
  const [position, setPosition] = useState(p.value.position)
  const [skip, setSkip] = useState(p.value.skipKeyIds.join("\n"))
  const [run, busy] = useAction()
  return (
    <Form
      label="System prompt"
      onSubmit={() =>
        void run(
          () => ok(api.PUT("/api/settings/system-prompt", { body: { enabled, text, position, skipKeyIds: lines(skip) } })),
          "System prompt saved"
        ).then((r) => r && p.onSaved())
      }
    >
      <Checkbox label="Add this system prompt to every request" checked={enabled} onChange={setEnabled} />
      <TextArea label="System prompt text" value={text} onInput={setText} rows={5} />
      <Select
        label="Position"
        value={position}
        options={[
          { value: "prepend", label: "prepend" },
          { value: "append", label: "append" }
        ]}
        onChange={setPosition}
        hint="Before or after the client's own system prompt."
      />
      <TextArea label="API keys that skip it" value={skip} onInput={setSkip} rows={2} mono hint="Key ids (from API keys), one a line." />
      <Button kind="primary" type="submit" busy={busy}>
        Save system prompt
      </Button>
    </Form>
  )
}

const LoginSection = (p: { value: boolean; onSaved: () => void }) => {
  const [on, setOn] = useState(p.value)
  const [run, busy] = useAction()
  return (
    <Form
      label="Require login"
      onSubmit={() =>
        void run(() => ok(api.PUT("/api/settings/require-login", { body: { requireLogin: on } })), "Saved").then((r) => r && p.onSaved())
      }
    >
      <Checkbox
        label="Require a login for the dashboard and management API"
        checked={on}
        onChange={setOn}
        hint="Off lets direct loopback callers in without one; remote callers always need a login or an admin key."
      />
      <Button kind="primary" type="submit" busy={busy}>
        Save
      </Button>
    </Form>
  )
}

// ---------------------------------------------------------------- purge, whole document

const PurgeSection = () => {
  const [days, setDays] = useState<number | undefined>(90)
  const [confirm, setConfirm] = useState(false)
  const [result, setResult] = useState<{ removed: number; keptSince: string } | undefined>()
  const [run, busy] = useAction()
  return (
    <>
      <Form label="Purge request history" onSubmit={() => setConfirm(true)}>
        <NumberInput
          label="Only rows older than (days)"
          value={days}
          onInput={setDays}
          min={0}
          max={36500}
          step="any"
          hint="Empty: all rows. Rows in an open budget or token-limit window are always kept."
        />
        <Button kind="danger" type="submit">
          Purge…
        </Button>
      </Form>
      {result && (
        <p class="result" role="status">
          Removed {result.removed} request rows; rows from {fmtDate(result.keptSince)} on were kept.
        </p>
      )}
      <Dialog open={confirm} title="Delete request history?" onClose={() => setConfirm(false)}>
        <p>
          {days === undefined ? "Every usage row" : `Usage rows older than ${days} days`} will be deleted; usage charts and logs lose them.
          This cannot be undone (take a backup first if unsure).
        </p>
        <div class="actions">
          <Button
            kind="danger"
            busy={busy}
            onClick={() =>
              void run(() =>
                ok(api.POST("/api/settings/purge-request-history", { body: days === undefined ? {} : { olderThanDays: days } }))
              ).then((r) => {
                setConfirm(false)
                if (r) setResult(r)
              })
            }
          >
            Delete
          </Button>
          <Button onClick={() => setConfirm(false)}>Cancel</Button>
        </div>
      </Dialog>
    </>
  )
}

const DocumentSection = (p: { value: Settings; onSaved: () => void }) => {
  const [text, setText] = useState(JSON.stringify(p.value, null, 2))
  const [error, setError] = useState<string | undefined>()
  const [run, busy] = useAction()
  const send = (method: "PUT" | "PATCH") => {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch (e) {
      setError(`not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
      return
    }
    setError(undefined)
    void run(
      () =>
        method === "PUT" ? ok(api.PUT("/api/settings", { body: body as never })) : ok(api.PATCH("/api/settings", { body: body as never })),
      method === "PUT" ? "Settings replaced" : "Settings patched"
    ).then((r) => r && p.onSaved())
  }
  return (
    <Form label="Settings document" onSubmit={() => send("PATCH")}>
      <TextArea
        label="Settings (JSON)"
        value={text}
        onInput={setText}
        rows={14}
        mono
        hint="Patch merges objects and replaces arrays and scalars; Replace sets every section (missing ones take their defaults). The info block is read-only."
      />
      <ErrorBox error={error} />
      <div class="actions">
        <Button kind="primary" type="submit" busy={busy}>
          Apply as patch
        </Button>
        <Button kind="danger" busy={busy} onClick={() => send("PUT")}>
          Replace the whole document
        </Button>
      </div>
    </Form>
  )
}

export default function SettingsPage() {
  const doc = useLoad(loadSettings)
  return (
    <Page
      title="Settings"
      description="Gateway-wide settings; each takes effect at once. Compression settings are on the Compression page, switches on Feature flags."
    >
      <div class="operate">
        <Loader of={doc}>
          {(d) => {
            // Each form starts from the stored values; after any save the document reloads and the forms reset to it.
            const k = (x: unknown) => JSON.stringify(x)
            return (
              <>
                {d.info.restartRequired.length > 0 && (
                  <p class="result result-bad" role="note">
                    Restart required for: {d.info.restartRequired.join(", ")}
                  </p>
                )}
                <Section title="System prompt">
                  <SystemPromptSection key={k(d.systemPrompt)} value={d.systemPrompt} onSaved={doc.reload} />
                </Section>
                <Section title="Thinking budget">
                  <ThinkingSection key={k(d.thinkingBudget)} value={d.thinkingBudget} onSaved={doc.reload} />
                </Section>
                <Section title="Upstream proxy">
                  <ProxySection key={k(d.proxy)} value={d.proxy} onSaved={doc.reload} />
                </Section>
                <Section title="Proxy registry">
                  <p class="muted">Named proxies that provider connections can use instead of the global one (docs/egress.md).</p>
                  <ProxyRegistry />
                </Section>
                <Section title="IP filter">
                  <IpFilterSection key={k(d.ipFilter)} value={d.ipFilter} onSaved={doc.reload} />
                </Section>
                <Section title="Login">
                  <LoginSection key={k(d.requireLogin)} value={d.requireLogin} onSaved={doc.reload} />
                  <PasswordLogin />
                </Section>
                <Section title="Backup schedule">
                  <p class="muted">
                    Backups themselves are on the <Link to="/backups">Backups</Link> page.
                  </p>
                  <BackupSchedule key={k(d.backups)} />
                </Section>
                <Section title="Purge request history">
                  <PurgeSection />
                </Section>
                <Section title="Settings document">
                  <DocumentSection key={k(d)} value={d} onSaved={doc.reload} />
                </Section>
              </>
            )
          }}
        </Loader>
      </div>
    </Page>
  )
}
