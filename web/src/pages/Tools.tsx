import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Link } from "../router"
import {
  Badge,
  Button,
  Checkbox,
  Dialog,
  Empty,
  fmtDate,
  Form,
  Loader,
  Page,
  SecretOnce,
  Section,
  Select,
  Stat,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import type { Res } from "./govern/types"
import "./Tools.css"

type Runtime = Res<"/api/cli-tools/runtime/{toolId}", "get">
type Saved = Res<"/api/cli-tools/{tool}-settings", "post">

const configKind = (s: string): "ok" | "warn" | "bad" | "muted" | "info" =>
  s === "configured" ? "ok" : s === "other" ? "warn" : s === "not_configured" ? "info" : "muted"
const configLabel: Record<string, string> = {
  configured: "configured",
  other: "points elsewhere",
  not_configured: "not configured",
  not_installed: "not installed",
  unknown: "unknown"
}

/** Every tool's catalog entry and status: all-statuses, then the catalog entry of each. */
const loadTools = async (): Promise<Runtime[]> => {
  const statuses = await ok(api.GET("/api/cli-tools/all-statuses"))
  const entries = await Promise.all(
    Object.keys(statuses).map((toolId) => ok(api.GET("/api/cli-tools/runtime/{toolId}", { params: { path: { toolId } } })))
  )
  // Spec document 2, "Catalog entry fields": a tool without base-URL support is not shown.
  return entries.filter((e) => e.baseUrlSupport !== "none").sort((a, b) => a.name.localeCompare(b.name))
}

const Configure = (p: { tool: Runtime; done: () => void }) => {
  const t = p.tool
  const current = useLoad(() => ok(api.GET("/api/cli-tools/{tool}-settings", { params: { path: { tool: t.id } } })), [t.id])
  const models = useLoad(() => ok(api.GET("/api/models/catalog", { params: { query: { scope: "connected" } } })))
  const needsKey = t.id !== "codex"
  const [keyChoice, setKeyChoice] = useState<"new" | "paste" | "keep">("new")
  const [pasted, setPasted] = useState("")
  const [model, setModel] = useState("")
  const [offline, setOffline] = useState(false)
  const [result, setResult] = useState<{ saved: Saved; secret: string | null } | null>(null)
  const [run, busy] = useAction()
  const configure = () =>
    void run(async () => {
      let secret: string | null = null
      if (keyChoice === "new") secret = (await ok(api.POST("/api/keys", { body: { name: `${t.id} (coding tool)` } }))).secret
      const apiKey = keyChoice === "new" ? secret! : keyChoice === "paste" ? pasted.trim() : undefined
      const saved = await ok(
        api.POST("/api/cli-tools/{tool}-settings", {
          params: { path: { tool: t.id } },
          body: {
            ...(apiKey && (needsKey || keyChoice === "paste") ? { apiKey } : {}),
            ...(model ? { model } : {}),
            ...(offline ? { offline: true } : {})
          }
        })
      )
      return { saved, secret }
    }, `${t.name} configured`).then((r) => {
      if (r) {
        setResult(r)
        p.done()
      }
    })
  if (result) {
    const s = result.saved
    return (
      <div class="tool-result">
        <p>
          <Badge kind="ok">configured</Badge> {t.name} now uses <code>{s.settings.baseUrl ?? "this gateway"}</code>
          {s.settings.model && (
            <>
              {" "}
              with model <code>{s.settings.model}</code>
            </>
          )}
          .
        </p>
        {result.secret && <SecretOnce label={`The new API key for ${t.name}`} value={result.secret} />}
        <h3>Files written</h3>
        {s.written.length === 0 ? (
          <p class="muted">Nothing changed: the files already had these settings.</p>
        ) : (
          <ul>
            {s.written.map((w) => (
              <li key={w.path}>
                <code>{w.path}</code>
                {w.backup && (
                  <span class="muted">
                    {" "}
                    (the previous file was kept as <code>{w.backup}</code>)
                  </span>
                )}
              </li>
            ))}
          </ul>
        )}
        {Object.keys(s.env).length > 0 && (
          <>
            <h3>Still to set in your shell</h3>
            <pre class="mono">
              {Object.entries(s.env)
                .map(([k, v]) => `export ${k}=${v}`)
                .join("\n")}
            </pre>
            {result.secret && <p class="muted small">Use the key shown above where the value is masked.</p>}
          </>
        )}
      </div>
    )
  }
  return (
    <Form onSubmit={configure} label={`Configure ${t.name}`}>
      <Loader of={current}>
        {(c) => (
          <p class="muted">
            {c.exists ? (
              <>
                Now: base URL <code>{c.baseUrl ?? "none"}</code>, model <code>{c.model ?? "none"}</code>, key{" "}
                <code>{c.apiKey ?? (c.apiKeyEnv ? `from $${c.apiKeyEnv}` : "none")}</code>.
              </>
            ) : (
              <>No configuration file yet.</>
            )}{" "}
            Writes{" "}
            {c.files.map((f, i) => (
              <span key={f}>
                {i > 0 && ", "}
                <code>{f}</code>
              </span>
            ))}{" "}
            (merged; a replaced file is backed up first).
          </p>
        )}
      </Loader>
      <Select
        label="API key"
        value={keyChoice}
        options={[
          { value: "new", label: `Create a new key for ${t.name}` },
          { value: "paste", label: "Use a key I have (paste it)" },
          ...(current.data?.exists ? [{ value: "keep" as const, label: "Keep the key the tool has" }] : [])
        ]}
        onChange={setKeyChoice}
        hint={
          needsKey
            ? "The gateway keeps only a hash of each key, so an existing key must be pasted."
            : "Codex reads its key from GATEWAY_CODEX_API_KEY; it is never written to the file."
        }
      />
      {keyChoice === "paste" && <TextInput label="Key" type="password" value={pasted} onInput={setPasted} required autoComplete="off" />}
      <Select
        label="Model"
        value={model}
        options={[
          { value: "", label: "the gateway's first chat model" },
          ...(models.data?.models ?? []).map((m) => ({ value: m.id, label: m.id }))
        ]}
        onChange={setModel}
        hint={
          models.data && models.data.models.length === 0 ? (
            <>
              No connected models yet: <Link to="/providers">add a provider</Link>.
            </>
          ) : undefined
        }
      />
      <Checkbox label="Offline: turn off the tool's update checks and telemetry" checked={offline} onChange={setOffline} />
      <Button kind="primary" type="submit" busy={busy}>
        Configure {t.name}
      </Button>
    </Form>
  )
}

const ToolsTable = () => {
  const tools = useLoad(loadTools)
  const [open, setOpen] = useState<Runtime | null>(null)
  return (
    <Section title="Coding tools on this machine" actions={<Button onClick={tools.reload}>Refresh</Button>}>
      <p class="muted">
        Detected on the gateway's machine (its PATH and HOME). Configuring a tool writes its own configuration file so it sends its requests
        to <code>{location.origin}</code>.
      </p>
      <Loader of={tools}>
        {(list) => (
          <Table
            caption="Coding tools"
            rowKey={(t) => t.id}
            rows={list}
            empty={<Empty title="No coding tools in the catalog">This gateway lists no coding tools.</Empty>}
            columns={[
              {
                label: "Tool",
                render: (t) => (
                  <>
                    <strong>{t.name}</strong>
                    <div class="muted small">{t.description}</div>
                  </>
                )
              },
              {
                label: "Installed",
                render: (t) =>
                  t.status.detection.installed ? (
                    <>
                      <Badge kind={t.status.detection.runnable ? "ok" : "warn"}>
                        {t.status.detection.version ? `v${t.status.detection.version}` : "found"}
                      </Badge>
                      {t.status.detection.reason && <div class="muted small">{t.status.detection.reason}</div>}
                    </>
                  ) : (
                    <Badge kind="muted">not found</Badge>
                  )
              },
              {
                label: "Configuration",
                render: (t) => (
                  <>
                    <Badge kind={configKind(t.status.config.status)}>{configLabel[t.status.config.status] ?? t.status.config.status}</Badge>
                    {t.status.config.endpoint && <div class="muted small">{t.status.config.endpoint}</div>}
                    {t.status.error && <div class="muted small">{t.status.error}</div>}
                  </>
                )
              },
              { label: "Last configured", render: (t) => fmtDate(t.status.config.lastConfiguredAt) },
              {
                label: "Set up",
                render: (t) =>
                  t.configType === "custom" ? (
                    <Button
                      kind={t.status.config.status === "configured" ? "plain" : "primary"}
                      onClick={() => setOpen(t)}
                      aria-label={`${t.status.config.status === "configured" ? "Reconfigure" : "Configure"} ${t.name}`}
                    >
                      {t.status.config.status === "configured" ? "Reconfigure" : "Configure"}
                    </Button>
                  ) : (
                    <span class="small">
                      In the tool: an OpenAI-compatible provider with base URL <code>{location.origin}/v1</code>.{" "}
                      <a href={t.docsUrl} target="_blank" rel="noreferrer">
                        {t.name} docs
                      </a>
                    </span>
                  )
              }
            ]}
          />
        )}
      </Loader>
      <Dialog open={open !== null} title={`Configure ${open?.name ?? ""}`} onClose={() => setOpen(null)}>
        {open && <Configure tool={open} done={tools.reload} />}
      </Dialog>
    </Section>
  )
}

const AcpAgents = () => {
  const agents = useLoad(() => ok(api.GET("/api/acp/agents")))
  const [run, busy] = useAction()
  const refresh = () =>
    void run(() => ok(api.POST("/api/acp/agents", { body: { refresh: true } })), "Agents detected again").then(() => agents.reload())
  return (
    <Section
      title="ACP agents"
      actions={
        <Button busy={busy} onClick={refresh}>
          Detect again
        </Button>
      }
    >
      <Loader of={agents}>
        {(d) => (
          <>
            <p class="muted">
              Agent Client Protocol agents the gateway can start: {d.summary.installed} of {d.summary.total} installed.
            </p>
            <Table
              caption="ACP agents"
              rowKey={(a) => a.id}
              rows={d.agents}
              empty={<Empty title="No ACP agents">Add a custom agent with POST /api/acp/agents.</Empty>}
              columns={[
                { label: "Agent", render: (a) => a.name },
                { label: "Command", render: (a) => <code>{[a.binary, ...a.args].join(" ")}</code> },
                {
                  label: "Installed",
                  render: (a) => (
                    <Badge kind={a.installed ? "ok" : "muted"}>{a.installed ? (a.version ? `v${a.version}` : "yes") : "not found"}</Badge>
                  )
                },
                { label: "Kind", render: (a) => (a.isCustom ? "custom" : "built in") }
              ]}
            />
          </>
        )}
      </Loader>
    </Section>
  )
}

const Mcp = () => {
  const status = useLoad(() => ok(api.GET("/api/mcp/status")))
  const [run, busy] = useAction()
  const restart = () => {
    if (!confirm("Restart the MCP server? Open MCP sessions are closed.")) return
    void run(
      () => ok(api.POST("/api/mcp/restart")),
      (r) => `MCP server restarted; ${r.closedSessions} session(s) closed`
    ).then(() => status.reload())
  }
  return (
    <Section
      title="MCP server"
      actions={
        <Button busy={busy} onClick={restart}>
          Restart
        </Button>
      }
    >
      <Loader of={status}>
        {(s) => (
          <>
            <div class="stats">
              <Stat label="Tools" value={s.tools} />
              <Stat label="Active sessions" value={s.sessionsActive} />
              <Stat label="Protocol" value={s.latestProtocolVersion} />
            </div>
            <p class="muted">
              {s.restartedAt ? `Restarted ${fmtDate(s.restartedAt)}` : `Running since ${fmtDate(s.startedAt)}`}; scopes{" "}
              {s.enforceScopes ? "enforced" : "not enforced"}.
            </p>
            <ul>
              {s.transports.map((t) => (
                <li key={t.name}>
                  {t.name}: <code>{t.name === "streamable-http" ? `${location.origin}${t.endpoint}` : t.endpoint}</code>
                </li>
              ))}
            </ul>
          </>
        )}
      </Loader>
    </Section>
  )
}

export default function ToolsPage() {
  return (
    <Page title="Coding tools" description="Point Codex, Claude Code, Gemini CLI and the others at this gateway in one click.">
      <ToolsTable />
      <div class="grid">
        <AcpAgents />
        <Mcp />
      </div>
    </Page>
  )
}
