import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import {
  Badge,
  Button,
  Checkbox,
  Confirm,
  Empty,
  Form,
  fmtDate,
  fmtMs,
  fmtNumber,
  Loader,
  NumberInput,
  Page,
  Section,
  Select,
  Table,
  TextInput,
  useAction,
  useDraft,
  useInterval,
  useLoad
} from "../ui"
import "./operate/operate.css"

// Plugins (docs/plugins.md): GET /api/plugins lists them; POST /api/plugins { path } installs from
// the server's disk; POST /api/plugins/{name}/enable|disable; PATCH /api/plugins/{name}/config
// { values }; DELETE /api/plugins/{name}. The configuration form is generated from each
// plugin's configSchema (plugin.json).

const loadPlugins = () => ok(api.GET("/api/plugins"))
type Plugin = Awaited<ReturnType<typeof loadPlugins>>["plugins"][number]
type Value = string | number | boolean
type FieldSpec = {
  type: "string" | "number" | "boolean" | "select"
  default?: Value
  min?: number
  max?: number
  enum?: ReadonlyArray<string | number>
  description?: string
}

const stateBadge = (p: Plugin) =>
  p.state === "running" ? (
    <Badge kind="ok">running</Badge>
  ) : p.state === "disabled" || p.state === "failed" || p.state === "missing" ? (
    <Badge kind="bad">{p.state}</Badge>
  ) : p.state === "restarting" || p.state === "starting" ? (
    <Badge kind="warn">{p.state}</Badge>
  ) : (
    <Badge kind="muted">{p.state}</Badge>
  )

/** The form of one plugin's settings: one control per configSchema field, saved together. */
const ConfigForm = (p: { plugin: Plugin; onSaved: () => void }) => {
  const schema = p.plugin.configSchema as Record<string, FieldSpec>
  const keys = Object.keys(schema)
  const [values, setValues, saved] = useDraft<Record<string, Value | undefined>>(p.plugin.config as Record<string, Value | undefined>)
  const [run, busy] = useAction()
  if (keys.length === 0) return <p class="muted small">This plugin has no settings.</p>
  const set = (k: string, v: Value | undefined) => setValues({ ...values, [k]: v })
  const save = () => {
    const sent = { ...values }
    void run(
      () =>
        ok(
          api.PATCH("/api/plugins/{name}/config", {
            params: { path: { name: p.plugin.name } },
            body: {
              values: Object.fromEntries(keys.map((k) => [k, sent[k] === undefined || sent[k] === "" ? null : (sent[k] as Value)]))
            }
          })
        ),
      () => `${p.plugin.name}: settings saved`
    ).then((r) => {
      if (!r) return
      saved(sent)
      p.onSaved()
    })
  }
  return (
    <Form onSubmit={save} label={`Settings of ${p.plugin.name}`}>
      {keys.map((k) => {
        const f = schema[k]!
        const hint = f.description
        if (f.type === "boolean")
          return <Checkbox key={k} name={k} label={k} hint={hint} checked={values[k] === true} onChange={(v) => set(k, v)} />
        if (f.type === "number")
          return (
            <NumberInput
              key={k}
              name={k}
              label={k}
              hint={hint}
              min={f.min}
              max={f.max}
              value={values[k] as number | undefined}
              onInput={(v) => set(k, v)}
            />
          )
        if (f.type === "select") {
          const numeric = typeof f.enum?.[0] === "number"
          return (
            <Select
              key={k}
              name={k}
              label={k}
              hint={hint}
              value={String(values[k] ?? f.default ?? f.enum?.[0] ?? "")}
              options={(f.enum ?? []).map(String)}
              onChange={(v) => set(k, numeric ? Number(v) : v)}
            />
          )
        }
        return <TextInput key={k} name={k} label={k} hint={hint} value={String(values[k] ?? "")} onInput={(v) => set(k, v)} />
      })}
      <div class="form-actions">
        <Button kind="primary" type="submit" busy={busy}>
          Save settings
        </Button>
      </div>
    </Form>
  )
}

const PluginCard = (p: { plugin: Plugin; onChanged: () => void }) => {
  const x = p.plugin
  const [run, busy] = useAction()
  const [removing, setRemoving] = useState(false)
  const toggle = () =>
    void run(
      () => ok(api.POST(x.enabled ? "/api/plugins/{name}/disable" : "/api/plugins/{name}/enable", { params: { path: { name: x.name } } })),
      (r) => `${r.name}: ${r.enabled ? "enabled" : "disabled"} (${r.state})`
    ).then(p.onChanged)
  const hooks = x.hooks.filter((h) => h.enabled || h.calls > 0)
  return (
    <Section
      title={`${x.name} ${x.version}`}
      id={`plugin-${x.name}`}
      actions={
        <>
          <Button busy={busy} onClick={toggle}>
            {x.enabled ? "Disable" : "Enable"}
          </Button>
          <Button kind="danger" onClick={() => setRemoving(true)}>
            Remove
          </Button>
        </>
      }
    >
      <div class="plugin" data-plugin={x.name}>
        <p>
          <span data-state>{stateBadge(x)}</span> {x.enabled ? <Badge kind="info">enabled</Badge> : <Badge kind="muted">disabled</Badge>}{" "}
          {x.failClosed && <Badge kind="warn">fail-closed</Badge>} {x.description && <span class="muted">{x.description}</span>}
        </p>
        {x.reason && (
          <p class="error-text" role="status">
            {x.reason}
          </p>
        )}
        <p class="muted small">
          Permissions: {x.permissions.length > 0 ? x.permissions.join(", ") : "none"} · restarts {x.restarts} · installed{" "}
          {fmtDate(x.installedAt)}
          {x.pid !== null && ` · pid ${x.pid}`}
          {x.author && ` · by ${x.author}`}
        </p>
        <h3>Settings</h3>
        <ConfigForm plugin={x} onSaved={p.onChanged} />
        <h3>Hooks</h3>
        <Table
          caption={`Hooks of ${x.name}`}
          rowKey={(h) => h.hook}
          rows={hooks}
          empty={<p class="muted small">No hook has run yet.</p>}
          columns={[
            { label: "Hook", render: (h) => <code>{h.hook}</code> },
            { label: "Priority", render: (h) => String(h.priority) },
            { label: "Calls", render: (h) => fmtNumber(h.calls) },
            { label: "Failures", render: (h) => fmtNumber(h.failures) },
            { label: "Skipped", render: (h) => fmtNumber(h.skipped) },
            { label: "Average", render: (h) => fmtMs(h.averageMs) },
            { label: "Last error", render: (h) => (h.lastError ? `${h.lastError} (${fmtDate(h.lastErrorAt)})` : "—") }
          ]}
        />
      </div>
      <Confirm
        item={removing ? x : undefined}
        title={`Remove ${x.name}?`}
        action="Remove"
        onClose={() => setRemoving(false)}
        remove={(item) => ok(api.DELETE("/api/plugins/{name}", { params: { path: { name: item.name } } }))}
        done={`${x.name} removed`}
        onRemoved={p.onChanged}
      >
        {(item) => <p>The onUninstall hook of {item.name} runs, then its files, data and settings are deleted.</p>}
      </Confirm>
    </Section>
  )
}

const InstallForm = (p: { onInstalled: () => void }) => {
  const [path, setPath] = useState("")
  const [enable, setEnable] = useState(false)
  const [run, busy] = useAction()
  const submit = () =>
    void run(
      () => ok(api.POST("/api/plugins", { body: { path: path.trim(), ...(enable ? { enable: true } : {}) } })),
      (r) => `${r.name} ${r.version} installed (${r.state})`
    ).then((r) => {
      if (!r) return
      setPath("")
      p.onInstalled()
    })
  return (
    <Form onSubmit={submit} label="Install a plugin">
      <TextInput
        label="Folder or .tgz on the server"
        name="path"
        value={path}
        onInput={setPath}
        required
        wide
        hint="A folder with plugin.json, or a .tgz made by npm pack."
      />
      <Checkbox
        label="Enable now"
        name="enable"
        checked={enable}
        onChange={setEnable}
        hint="Otherwise it starts only if its manifest says enabledByDefault."
      />
      <div class="form-actions">
        <Button kind="primary" type="submit" busy={busy}>
          Install
        </Button>
      </div>
    </Form>
  )
}

export default function PluginsPage() {
  const list = useLoad(loadPlugins)
  // States change on their own (a crash, a restart): the page follows.
  useInterval(() => list.reload(), 5000)
  return (
    <Page
      title="Plugins"
      description="Plugins run sandboxed, one process each, on the request path: they see requests and may block them, change their body or add metadata. A permission a plugin's manifest does not ask for is absent."
    >
      <Section title="Install">
        <InstallForm onInstalled={list.reload} />
      </Section>
      <Loader of={list}>
        {(data) =>
          data.plugins.length === 0 ? (
            <Empty title="No plugins installed">Install one from a folder on the server, or with gateway plugins install.</Empty>
          ) : (
            <>
              {data.plugins.map((x) => (
                <PluginCard key={x.name} plugin={x} onChanged={list.reload} />
              ))}
            </>
          )
        }
      </Loader>
    </Page>
  )
}
