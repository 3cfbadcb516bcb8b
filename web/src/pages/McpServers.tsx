import { useEffect, useState } from "preact/hooks"
import { ApiError, api, ok } from "../api/client"
import type { paths } from "../api/schema"
import {
  Badge,
  Button,
  Confirm,
  Dialog,
  Empty,
  ErrorBox,
  Field,
  Form,
  fmtDate,
  fmtMs,
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
import "./operate/operate.css"
import "./McpServers.css"

// MCP servers (docs/mcp.md, "MCP servers behind the gateway"): the upstream MCP servers the gateway
// serves on /v1/mcp. GET/POST /api/mcp/servers, PATCH/DELETE /api/mcp/servers/{name},
// GET /api/mcp/servers/{name}/tools, POST /api/mcp/servers/{name}/allow (replacing the list, or
// {all: true}) and POST /api/mcp/servers/{name}/call (an admin's test call). env and header values
// come masked; a masked value sent back unchanged keeps the stored secret, so the edit form sends
// env (headers) only when its text changed, and then the untouched lines with their masked values.

const loadServers = () => ok(api.GET("/api/mcp/servers"))
type Server = Awaited<ReturnType<typeof loadServers>>["servers"][number]
type Transport = Server["transport"]
type HealthState = Server["health"]["state"]
type Offering = paths["/api/mcp/servers/{name}/tools"]["get"]["responses"][200]["content"]["application/json"]["offerings"][number]
type CreateBody = paths["/api/mcp/servers"]["post"]["requestBody"]["content"]["application/json"]
type UpdateBody = paths["/api/mcp/servers/{name}"]["patch"]["requestBody"]["content"]["application/json"]
type CallResult = paths["/api/mcp/servers/{name}/call"]["post"]["responses"][200]["content"]["application/json"]

const TRANSPORTS: ReadonlyArray<{ value: Transport; label: string }> = [
  { value: "stdio", label: "stdio (a local command)" },
  { value: "http", label: "http (streamable)" },
  { value: "sse", label: "sse (HTTP+SSE)" }
]
const NAME_PATTERN = "[a-z0-9][a-z0-9\\-]{0,31}"

const HEALTH_KIND: Record<HealthState, "ok" | "warn" | "bad" | "info" | "muted"> = {
  ready: "ok",
  starting: "info",
  restarting: "warn",
  "needs-auth": "warn",
  failed: "bad",
  disabled: "muted"
}

// ---------------------------------------------------------------- text forms of lists and maps

/** One entry a line; blank lines are dropped. */
const linesOf = (text: string): string[] =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")

/** `NAME=VALUE` lines as a map (the value may hold `=`), or what is wrong with them. */
const pairsOf = (text: string, what: string): Record<string, string> | string => {
  const out: Record<string, string> = {}
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, "")
    if (line.trim() === "") continue
    const eq = line.indexOf("=")
    const name = eq < 0 ? "" : line.slice(0, eq).trim()
    if (name === "") return `${what}, line ${i + 1}: write NAME=VALUE`
    if (name in out) return `${what}: ${name} is given twice`
    out[name] = line.slice(eq + 1)
  }
  return out
}

const pairsText = (map: Readonly<Record<string, string>>) =>
  Object.entries(map)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n")

// ---------------------------------------------------------------- the server form (add and edit)

interface FormState {
  name: string
  transport: Transport
  command: string
  args: string
  env: string
  cwd: string
  url: string
  headers: string
  timeoutMs: number | undefined
  rpm: number | undefined
}

const EMPTY: FormState = {
  name: "",
  transport: "stdio",
  command: "",
  args: "",
  env: "",
  cwd: "",
  url: "",
  headers: "",
  timeoutMs: undefined,
  rpm: undefined
}

const stateOf = (s: Server): FormState => ({
  name: s.name,
  transport: s.transport,
  command: s.command ?? "",
  args: s.args.join("\n"),
  env: pairsText(s.env),
  cwd: s.cwd ?? "",
  url: s.url ?? "",
  headers: pairsText(s.headers),
  timeoutMs: s.timeoutMs,
  rpm: s.rpm ?? undefined
})

/**
 * The fields of a server. `editing`: the server as listed (its env and header values masked): the
 * name is fixed, and env or headers go into the patch only when their text was changed.
 */
const ServerForm = (p: {
  editing?: Server
  submitLabel: string
  busy: boolean
  onSubmit: (body: { create: CreateBody; update: UpdateBody }) => void
  onCancel?: () => void
}) => {
  const initial = p.editing ? stateOf(p.editing) : EMPTY
  const [f, setF] = useState<FormState>(initial)
  const [problem, setProblem] = useState<string>()
  const set =
    <K extends keyof FormState>(k: K) =>
    (v: FormState[K]) =>
      setF((x) => ({ ...x, [k]: v }))
  const stdio = f.transport === "stdio"

  const submit = () => {
    const env = pairsOf(f.env, "Environment")
    const headers = pairsOf(f.headers, "Headers")
    const bad = stdio ? (typeof env === "string" ? env : undefined) : typeof headers === "string" ? headers : undefined
    setProblem(bad)
    if (bad !== undefined) return
    const envMap = env as Record<string, string>
    const headerMap = headers as Record<string, string>
    const limits = { ...(f.timeoutMs !== undefined ? { timeoutMs: f.timeoutMs } : {}) }
    const create: CreateBody = stdio
      ? {
          name: f.name.trim(),
          transport: f.transport,
          command: f.command.trim(),
          args: linesOf(f.args),
          ...(Object.keys(envMap).length > 0 ? { env: envMap } : {}),
          ...(f.cwd.trim() ? { cwd: f.cwd.trim() } : {}),
          ...limits,
          ...(f.rpm !== undefined ? { rpm: f.rpm } : {})
        }
      : {
          name: f.name.trim(),
          transport: f.transport,
          url: f.url.trim(),
          ...(Object.keys(headerMap).length > 0 ? { headers: headerMap } : {}),
          ...limits,
          ...(f.rpm !== undefined ? { rpm: f.rpm } : {})
        }
    // A patch: the masked values come back only as they were listed (the API then keeps the stored
    // secret), and only when the text changed at all.
    const update: UpdateBody = stdio
      ? {
          transport: f.transport,
          command: f.command.trim(),
          args: linesOf(f.args),
          cwd: f.cwd.trim() ? f.cwd.trim() : null,
          ...(f.env !== initial.env || f.transport !== initial.transport ? { env: envMap } : {}),
          ...limits,
          rpm: f.rpm ?? null
        }
      : {
          transport: f.transport,
          url: f.url.trim(),
          ...(f.headers !== initial.headers || f.transport !== initial.transport ? { headers: headerMap } : {}),
          ...limits,
          rpm: f.rpm ?? null
        }
    p.onSubmit({ create, update })
  }

  const masked = p.editing
    ? " Values are shown masked: leave a line as it is to keep its stored value, type a new value to replace it, remove the line to remove it."
    : ""
  return (
    <Form onSubmit={submit} label={p.editing ? `Edit ${p.editing.name}` : "Add an MCP server"}>
      {!p.editing && (
        <Field label="Name" hint="Lower-case letters, digits and dashes (at most 32): tools appear as <name>__<tool> on /v1/mcp.">
          {(id, d) => (
            <input
              id={id}
              name="name"
              aria-describedby={d}
              value={f.name}
              required
              pattern={NAME_PATTERN}
              maxLength={32}
              autoComplete="off"
              onInput={(e) => set("name")((e.currentTarget as HTMLInputElement).value)}
            />
          )}
        </Field>
      )}
      <Select label="Transport" name="transport" value={f.transport} options={TRANSPORTS} onChange={set("transport")} />
      {stdio ? (
        <>
          <TextInput label="Command" name="command" value={f.command} onInput={set("command")} required wide hint="The program to run." />
          <TextArea label="Arguments" name="args" value={f.args} onInput={set("args")} rows={3} mono hint="One argument a line." />
          <TextArea
            label="Environment"
            name="env"
            value={f.env}
            onInput={set("env")}
            rows={3}
            mono
            hint={`NAME=VALUE, one a line: the process gets these and a minimal environment, nothing else of the gateway's.${masked}`}
          />
          <TextInput label="Working directory" name="cwd" value={f.cwd} onInput={set("cwd")} wide hint="Optional." />
        </>
      ) : (
        <>
          <TextInput
            label="URL"
            name="url"
            type="url"
            value={f.url}
            onInput={set("url")}
            required
            wide
            placeholder="https://mcp.example.com/mcp"
          />
          <TextArea
            label="Headers"
            name="headers"
            value={f.headers}
            onInput={set("headers")}
            rows={3}
            mono
            hint={`Name=Value, one a line (e.g. Authorization=Bearer …).${masked}`}
          />
        </>
      )}
      <NumberInput
        label="Call time limit (ms)"
        name="timeoutMs"
        min={100}
        max={3_600_000}
        step={1}
        value={f.timeoutMs}
        onInput={set("timeoutMs")}
        hint="Default 60,000."
      />
      <NumberInput label="Calls a minute per key" name="rpm" min={1} step={1} value={f.rpm} onInput={set("rpm")} hint="Empty: no limit." />
      {problem && (
        <div class="error-box" role="alert">
          {problem}
        </div>
      )}
      <div class="actions">
        <Button kind="primary" type="submit" busy={p.busy}>
          {p.submitLabel}
        </Button>
        {p.onCancel && <Button onClick={p.onCancel}>Cancel</Button>}
      </div>
    </Form>
  )
}

const AddServer = (p: { onClose: () => void; onAdded: (s: Server) => void }) => {
  const [run, busy] = useAction()
  return (
    <Dialog open title="Add an MCP server" onClose={p.onClose}>
      <ServerForm
        submitLabel="Add server"
        busy={busy}
        onCancel={p.onClose}
        onSubmit={({ create }) =>
          void run(
            () => ok(api.POST("/api/mcp/servers", { body: create })),
            (s) => `${s.name} added (${s.health.state})`
          ).then((s) => s && p.onAdded(s))
        }
      />
    </Dialog>
  )
}

const EditServer = (p: { server: Server; onClose: () => void; onSaved: () => void }) => {
  const [run, busy] = useAction()
  return (
    <Dialog open title={`Edit ${p.server.name}`} onClose={p.onClose}>
      <ServerForm
        editing={p.server}
        submitLabel="Save"
        busy={busy}
        onCancel={p.onClose}
        onSubmit={({ update }) =>
          void run(
            () => ok(api.PATCH("/api/mcp/servers/{name}", { params: { path: { name: p.server.name } }, body: update })),
            (s) => `${s.name} saved`
          ).then((s) => s && p.onSaved())
        }
      />
    </Dialog>
  )
}

// ---------------------------------------------------------------- the list

const healthOf = (s: Server) => (
  <div class="mcp-health">
    <span data-health={s.health.state}>
      <Badge kind={HEALTH_KIND[s.health.state]}>{s.health.state}</Badge>
    </span>
    {s.health.state !== "ready" && s.health.reason && (
      <div class="small mcp-reason" data-reason>
        {s.health.reason}
      </div>
    )}
    <div class="muted small">since {fmtDate(s.health.since)}</div>
  </div>
)

const allowedSummary = (s: Server) =>
  s.allowedTools.includes("*") ? "everything (*)" : s.allowedTools.length === 0 ? "nothing yet" : `${s.allowedTools.length} named`

/** The on/off switch of a server (PATCH enabled). */
const EnabledSwitch = (p: { server: Server; onChanged: () => void }) => {
  const [run, busy] = useAction()
  const s = p.server
  // The value being stored, shown at once; cleared when the list has the new value (or on failure).
  const [pending, setPending] = useState<boolean>()
  useEffect(() => setPending(undefined), [s.enabled])
  const on = pending ?? s.enabled
  return (
    <label class="switch">
      <input
        type="checkbox"
        role="switch"
        checked={on}
        disabled={busy}
        aria-label={`${s.name} enabled`}
        onChange={(e) => {
          const enabled = (e.currentTarget as HTMLInputElement).checked
          setPending(enabled)
          void run(
            () => ok(api.PATCH("/api/mcp/servers/{name}", { params: { path: { name: s.name } }, body: { enabled } })),
            (r) => `${r.name}: ${r.enabled ? "enabled" : "disabled"}`
          ).then((r) => {
            if (!r) setPending(undefined)
            p.onChanged()
          })
        }}
      />
      <span aria-hidden="true">{on ? "On" : "Off"}</span>
    </label>
  )
}

/**
 * Sign-in to a remote server that asks for OAuth (the MCP authorization spec), as providers sign in:
 * POST .../oauth/start answers the authorization server's address, opened in a new tab; its
 * redirect comes back to the gateway's callback, and the list (polled) shows the server ready.
 * A signed-in server has Sign out (POST .../oauth/logout).
 */
const SignIn = (p: { server: Server; onChanged: () => void }) => {
  const [run, busy] = useAction()
  const s = p.server
  if (s.transport === "stdio" || (s.oauth === null && s.health.state !== "needs-auth")) return null
  if (s.oauth?.signedIn)
    return (
      <Button
        disabled={busy}
        aria-label={`Sign out of ${s.name}`}
        onClick={() =>
          void run(
            () => ok(api.POST("/api/mcp/servers/{name}/oauth/logout", { params: { path: { name: s.name } } })),
            (r) => `${r.name}: signed out`
          ).then(() => p.onChanged())
        }
      >
        Sign out
      </Button>
    )
  return (
    <Button
      kind="primary"
      disabled={busy}
      aria-label={`Sign in to ${s.name}`}
      onClick={() => {
        // Opened before the request so the browser does not take it for a pop-up; pointed at the address once known.
        const tab = window.open("about:blank", "_blank")
        void run(
          () => ok(api.POST("/api/mcp/servers/{name}/oauth/start", { params: { path: { name: s.name } } })),
          () => `${s.name}: finish signing in in the new tab`
        ).then((r) => {
          if (r && tab) tab.location.href = r.authorizationUrl
          else if (r) window.location.href = r.authorizationUrl
          else tab?.close()
          p.onChanged()
        })
      }}
    >
      Sign in
    </Button>
  )
}

// ---------------------------------------------------------------- one server: what it offers, what is allowed

/** As /v1/mcp decides: `*`, or the offering's own name (a resource's URI) in the list. */
const offeringAllowed = (allowed: ReadonlyArray<string>, o: Offering) => allowed.includes("*") || allowed.includes(o.name)

const KIND_ORDER: Record<Offering["kind"], number> = { tool: 0, prompt: 1, resource: 2 }

const Offerings = (p: { server: Server; offerings: ReadonlyArray<Offering>; onAllowed: (allowedTools: ReadonlyArray<string>) => void }) => {
  const s = p.server
  const [run, busy] = useAction()
  // What is allowed, as the last answer of /allow said (the list's poll catches up after).
  const [allowed, setAllowed] = useState<ReadonlyArray<string>>(s.allowedTools)
  useEffect(() => setAllowed(s.allowedTools), [s.name, s.allowedTools.join("\n")])
  const all = allowed.includes("*")

  const post = (body: { all: true } | { tools: string[] }, done: string) => {
    // Shown at once (a switch follows the hand); the answer's list, or on failure the list before.
    const before = allowed
    setAllowed("all" in body ? ["*"] : body.tools)
    void run(() => ok(api.POST("/api/mcp/servers/{name}/allow", { params: { path: { name: s.name } }, body })), done).then((r) => {
      if (!r) return setAllowed(before)
      setAllowed(r.allowedTools)
      p.onAllowed(r.allowedTools)
    })
  }
  const toggle = (o: Offering, on: boolean) => {
    // Replace semantics: the whole resulting list (from "*", every name listed but this one).
    const current = all ? p.offerings.map((x) => x.name) : [...allowed]
    const next = on ? [...new Set([...current, o.name])] : current.filter((n) => n !== o.name && n !== o.exposedName)
    post({ tools: next }, `${s.name}: ${o.name} ${on ? "allowed" : "no longer allowed"}`)
  }
  const rows = [...p.offerings].sort((a, b) => KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || a.name.localeCompare(b.name))
  return (
    <>
      <div class="mcp-allow-all">
        <label class="switch">
          <input
            type="checkbox"
            role="switch"
            checked={all}
            disabled={busy}
            aria-label={`Allow everything of ${s.name}`}
            aria-describedby="mcp-allow-all-hint"
            onChange={(e) =>
              (e.currentTarget as HTMLInputElement).checked
                ? post({ all: true }, `${s.name}: everything allowed`)
                : post({ tools: [] }, `${s.name}: nothing allowed`)
            }
          />
          <span>Allow everything (*)</span>
        </label>
        <span class="muted small" id="mcp-allow-all-hint">
          Includes what the server adds later. Off: only what is switched on below; nothing of a server is exposed until allowed.
        </span>
      </div>
      <Table
        caption={`Tools, prompts and resources of ${s.name}`}
        rows={rows}
        rowKey={(o) => `${o.kind}:${o.name}`}
        empty={
          <Empty title="Nothing listed yet">
            {s.health.state === "ready"
              ? "The server lists no tools, prompts or resources."
              : `The server is ${s.health.state}: what it offers is listed once it is ready.`}
          </Empty>
        }
        columns={[
          {
            label: "Allowed",
            render: (o) => {
              const on = offeringAllowed(allowed, o)
              return (
                <label class="switch">
                  <input
                    type="checkbox"
                    role="switch"
                    checked={on}
                    disabled={busy}
                    aria-label={`Allow ${o.name}`}
                    data-allow={o.name}
                    onChange={(e) => toggle(o, (e.currentTarget as HTMLInputElement).checked)}
                  />
                  <span aria-hidden="true">{on ? "On" : "Off"}</span>
                </label>
              )
            }
          },
          { label: "Kind", render: (o) => o.kind },
          {
            label: "Name",
            render: (o) => (
              <div class="wrap">
                <code class="mono">{o.name}</code>
                {o.exposedName !== o.name && <div class="muted small">on /v1/mcp: {o.exposedName}</div>}
              </div>
            )
          },
          { label: "Description", render: (o) => <span class="small wrap">{o.description ?? "—"}</span> }
        ]}
      />
    </>
  )
}

// ---------------------------------------------------------------- a test call

type Outcome =
  | { readonly kind: "result"; readonly tool: string; readonly ms: number; readonly result: CallResult }
  | { readonly kind: "failed"; readonly tool: string; readonly message: string }

type Content = { type?: unknown; text?: unknown; mimeType?: unknown; data?: unknown; uri?: unknown; name?: unknown; resource?: unknown }

const ContentItem = (p: { item: unknown }) => {
  const c = (p.item && typeof p.item === "object" ? p.item : {}) as Content
  if (c.type === "text" && typeof c.text === "string")
    return (
      <pre class="mono" data-content-text tabIndex={0}>
        {c.text}
      </pre>
    )
  if (c.type === "image" && typeof c.data === "string" && typeof c.mimeType === "string" && /^image\/[a-z0-9.+-]+$/i.test(c.mimeType))
    return <img class="mcp-image" src={`data:${c.mimeType};base64,${c.data}`} alt={`Returned by the tool (${c.mimeType})`} />
  if (c.type === "resource_link" && typeof c.uri === "string")
    return (
      <p class="small wrap">
        Resource link: <code class="mono">{c.uri}</code>
        {typeof c.name === "string" && ` (${c.name})`}
      </p>
    )
  if (c.type === "resource" && c.resource && typeof c.resource === "object") {
    const r = c.resource as { uri?: unknown; text?: unknown; mimeType?: unknown }
    return (
      <div class="small wrap">
        Resource <code class="mono">{String(r.uri ?? "")}</code>
        {typeof r.text === "string" && (
          <pre class="mono" tabIndex={0}>
            {r.text}
          </pre>
        )}
      </div>
    )
  }
  return <p class="muted small">A {String(c.type ?? "content")} item (see the raw JSON).</p>
}

const CallTool = (p: { server: Server; tools: ReadonlyArray<Offering> }) => {
  const s = p.server
  const [tool, setTool] = useState("")
  const [args, setArgs] = useState("{}")
  const [argsError, setArgsError] = useState<string>()
  const [busy, setBusy] = useState(false)
  const [outcome, setOutcome] = useState<Outcome>()
  const names = p.tools.map((t) => t.name)
  const picked = names.includes(tool) ? tool : (names[0] ?? "")
  useEffect(() => {
    setOutcome(undefined)
    setArgsError(undefined)
  }, [s.name])

  const call = async () => {
    let parsed: unknown
    try {
      parsed = args.trim() === "" ? {} : JSON.parse(args)
    } catch (e) {
      setArgsError(`Arguments are not valid JSON: ${e instanceof Error ? e.message : String(e)}`)
      return
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      setArgsError('Arguments must be a JSON object, e.g. {"message": "hello"}')
      return
    }
    setArgsError(undefined)
    setBusy(true)
    const started = performance.now()
    try {
      const result = await ok(
        api.POST("/api/mcp/servers/{name}/call", {
          params: { path: { name: s.name } },
          body: { tool: picked, arguments: parsed as Record<string, unknown> }
        })
      )
      setOutcome({ kind: "result", tool: picked, ms: performance.now() - started, result })
    } catch (e) {
      const message = e instanceof ApiError && e.status ? `HTTP ${e.status}: ${e.message}` : e instanceof Error ? e.message : String(e)
      setOutcome({ kind: "failed", tool: picked, message })
    } finally {
      setBusy(false)
    }
  }

  if (p.tools.length === 0) return <p class="muted">No tools listed: once the server is ready and lists tools, one can be called here.</p>
  return (
    <>
      <p class="muted small">
        A test call through the gateway's connection, as an admin: it is made whether or not the tool is allowed, and recorded like any
        call.
      </p>
      <Form onSubmit={() => void call()} label={`Call a tool of ${s.name}`}>
        <Select
          label="Tool"
          name="tool"
          value={picked}
          options={p.tools.map((t) => ({ value: t.name, label: offeringAllowed(s.allowedTools, t) ? t.name : `${t.name} (not allowed)` }))}
          onChange={setTool}
        />
        <TextArea
          label="Arguments (JSON)"
          name="arguments"
          value={args}
          onInput={(v) => {
            setArgs(v)
            if (argsError) setArgsError(undefined)
          }}
          rows={5}
          mono
          hint='A JSON object, e.g. {"message": "hello"}.'
        />
        {argsError && (
          <div class="error-box" role="alert" data-args-error>
            {argsError}
          </div>
        )}
        <div class="actions">
          <Button kind="primary" type="submit" busy={busy}>
            Call
          </Button>
        </div>
      </Form>
      <div aria-live="polite" class="mcp-outcome">
        {outcome?.kind === "failed" && (
          <div class="error-box" role="alert" data-call-error>
            <span>
              Calling <code class="mono">{outcome.tool}</code> failed — {outcome.message}
            </span>
          </div>
        )}
        {outcome?.kind === "result" && (
          <div class={`result ${outcome.result.isError ? "result-bad" : "result-ok"}`} data-call-result>
            <p>
              {outcome.result.isError ? <Badge kind="bad">the tool reported an error</Badge> : <Badge kind="ok">answered</Badge>}{" "}
              <code class="mono">{outcome.tool}</code> in {fmtMs(outcome.ms)}
            </p>
            {outcome.result.content.length === 0 ? (
              <p class="muted small">No content.</p>
            ) : (
              outcome.result.content.map((item, i) => <ContentItem key={i} item={item} />)
            )}
            <details class="mcp-raw">
              <summary>Raw JSON</summary>
              <pre class="mono" tabIndex={0} data-raw>
                {JSON.stringify(outcome.result, null, 2)}
              </pre>
            </details>
          </div>
        )}
      </div>
    </>
  )
}

const ServerDetail = (p: { server: Server; onChanged: () => void }) => {
  const s = p.server
  const offerings = useLoad(
    () => ok(api.GET("/api/mcp/servers/{name}/tools", { params: { path: { name: s.name } } })),
    [s.name, s.health.state, s.health.listedAt]
  )
  const tools = (offerings.data?.offerings ?? []).filter((o) => o.kind === "tool")
  const info = s.health.serverInfo
  return (
    <>
      <Section title={`${s.name}: tools, prompts and resources`} id="mcp-offerings">
        <p class="muted small">
          {info ? `${info.name} ${info.version}` : "Not connected yet"}
          {s.health.pid !== null && ` · pid ${s.health.pid}`}
          {s.health.listedAt && ` · listed ${fmtDate(s.health.listedAt)}`}
          {` · call limit ${fmtMs(s.timeoutMs)}`}
          {s.rpm !== null && ` · ${s.rpm} calls a minute per key`}
        </p>
        <Loader of={offerings}>{(data) => <Offerings server={s} offerings={data.offerings} onAllowed={p.onChanged} />}</Loader>
      </Section>
      <Section title={`Call a tool of ${s.name}`} id="mcp-call">
        {offerings.data ? <CallTool server={s} tools={tools} /> : <ErrorBox error={offerings.error} retry={offerings.reload} />}
      </Section>
    </>
  )
}

// ---------------------------------------------------------------- the page

export default function McpServersPage() {
  const list = useLoad(loadServers)
  const [selected, setSelected] = useState<string>()
  const [editing, setEditing] = useState<Server>()
  const [removing, setRemoving] = useState<Server>()
  const [adding, setAdding] = useState(false)
  const servers = list.data?.servers ?? []
  // Health moves on its own (a process starts, fails, restarts): follow it closely while a server is on its way.
  const settling = servers.some((s) => s.health.state === "starting" || s.health.state === "restarting")
  useInterval(list.reload, settling ? 1500 : 5000)
  const current = servers.find((s) => s.name === selected) ?? servers[0]

  return (
    <Page
      title="MCP servers"
      description="Upstream MCP servers the gateway runs or connects to, and serves to clients on /v1/mcp with their gateway key (tools named <server>__<tool>). Nothing of a server is exposed until it is allowed here."
      actions={
        <Button kind="primary" onClick={() => setAdding(true)}>
          Add a server
        </Button>
      }
    >
      <div class="operate">
        {adding && (
          <AddServer
            onClose={() => setAdding(false)}
            onAdded={(s) => {
              setAdding(false)
              setSelected(s.name)
              list.reload()
            }}
          />
        )}
        <Section title="Servers">
          <Loader of={list}>
            {(data) => (
              <Table
                caption="MCP servers"
                rows={data.servers}
                rowKey={(s) => s.id}
                empty={
                  <Empty title="No MCP servers yet">
                    Add one with “Add a server”: a command the gateway runs (stdio) or the URL of a remote server (http, sse). Then allow
                    its tools.
                  </Empty>
                }
                columns={[
                  {
                    label: "Server",
                    render: (s) => (
                      <div class="wrap" data-server={s.name}>
                        <strong>{s.name}</strong>
                        <div class="muted small mono">
                          {s.transport === "stdio" ? [s.command ?? "", ...s.args].join(" ") : (s.url ?? "")}
                        </div>
                      </div>
                    )
                  },
                  { label: "Transport", render: (s) => s.transport },
                  { label: "Health", render: healthOf },
                  { label: "Restarts", render: (s) => String(s.health.restarts), class: "num" },
                  {
                    label: "Offers",
                    render: (s) => (
                      <span class="small">
                        {s.tools} tools · {s.prompts} prompts · {s.resources} resources
                      </span>
                    )
                  },
                  { label: "Allowed", render: (s) => <span class="small">{allowedSummary(s)}</span> },
                  { label: "Enabled", render: (s) => <EnabledSwitch server={s} onChanged={list.reload} /> },
                  {
                    label: "Actions",
                    render: (s) => (
                      <div class="row-actions">
                        <Button
                          kind={current?.name === s.name ? "primary" : undefined}
                          aria-pressed={current?.name === s.name}
                          aria-label={`Tools of ${s.name}`}
                          onClick={() => {
                            setSelected(s.name)
                            document.getElementById("mcp-offerings")?.scrollIntoView()
                          }}
                        >
                          Tools
                        </Button>
                        <SignIn server={s} onChanged={list.reload} />
                        <Button onClick={() => setEditing(s)} aria-label={`Edit ${s.name}`}>
                          Edit
                        </Button>
                        <Button kind="danger" onClick={() => setRemoving(s)} aria-label={`Remove ${s.name}`}>
                          Remove
                        </Button>
                      </div>
                    )
                  }
                ]}
              />
            )}
          </Loader>
        </Section>
        {current && <ServerDetail key={current.name} server={current} onChanged={list.reload} />}
        {editing && (
          <EditServer
            key={editing.id}
            server={editing}
            onClose={() => setEditing(undefined)}
            onSaved={() => {
              setEditing(undefined)
              list.reload()
            }}
          />
        )}
        <Confirm
          item={removing}
          title={removing ? `Remove ${removing.name}?` : "Remove?"}
          action="Remove"
          onClose={() => setRemoving(undefined)}
          remove={(s) => ok(api.DELETE("/api/mcp/servers/{name}", { params: { path: { name: s.name } } }))}
          done="MCP server removed"
          onRemoved={list.reload}
        >
          {(s) => (
            <p class="wrap">
              <strong>{s.name}</strong> is stopped and removed with its settings and stored secrets; clients lose its tools on /v1/mcp.
            </p>
          )}
        </Confirm>
      </div>
    </Page>
  )
}
