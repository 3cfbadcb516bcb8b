import { useState } from "preact/hooks"
import { renderSVG } from "uqr"
import { api, ok } from "../api/client"
import { readSse } from "../sse"
import { Badge, Button, Form, Loader, NumberInput, Page, Section, TextInput, toast, useAction, useInterval, useLoad } from "../ui"
import "./operate/operate.css"
import "./Tunnels.css"

// Tunnels (docs/tunnels.md): GET /api/tunnels/{quick,token,mesh} answer each backend's status;
// POST /api/tunnels/quick|token { action, authToken? } start and stop them; the mesh funnel has
// its setup steps: GET /api/tunnels/mesh/check, POST install (server-sent progress), start-daemon,
// login (authUrl), enable ({ hostname?, port?, sudoPassword? }), disable. A sudo password typed
// here goes with one call and is cleared; the authtoken is never shown back.

const loadAll = async () => {
  const [quick, token, mesh] = await Promise.all([
    ok(api.GET("/api/tunnels/quick")),
    ok(api.GET("/api/tunnels/token")),
    ok(api.GET("/api/tunnels/mesh"))
  ])
  return { quick, token, mesh }
}
type All = Awaited<ReturnType<typeof loadAll>>
type Status = All["quick"] & { tunnelUrl?: string | null; funnelNotEnabled?: boolean; enableUrl?: string }

const phaseBadge = (phase: Status["phase"]) => (
  <Badge kind={phase === "running" ? "ok" : phase === "error" ? "bad" : phase === "stopped" ? "muted" : "warn"}>
    {phase.replace("_", " ")}
  </Badge>
)

const copy = (text: string) =>
  void navigator.clipboard?.writeText(text).then(
    () => toast("Copied"),
    () => toast("Copying was refused by the browser", "error")
  )

/** The address of a running tunnel: copy buttons, and a QR code of the API base URL for a phone. */
const Address = (p: { status: Status }) => {
  const url = p.status.publicUrl ?? p.status.tunnelUrl ?? null
  const apiUrl = p.status.apiUrl ?? null
  if (p.status.phase !== "running" || !url) return null
  return (
    <div class="tunnel-address">
      <dl class="kv">
        <dt>Public address</dt>
        <dd>
          <a class="mono" href={url} target="_blank" rel="noreferrer" data-public-url>
            {url}
          </a>{" "}
          <Button kind="plain" onClick={() => copy(url)} aria-label="Copy the public address">
            Copy
          </Button>
        </dd>
        {apiUrl && (
          <>
            <dt>API base URL</dt>
            <dd>
              <code class="mono" data-api-url>
                {apiUrl}
              </code>{" "}
              <Button kind="plain" onClick={() => copy(apiUrl)} aria-label="Copy the API base URL">
                Copy
              </Button>
            </dd>
          </>
        )}
      </dl>
      {apiUrl && (
        <figure class="qr">
          {/* biome-ignore lint/security/noDangerouslySetInnerHtml: the SVG is made here by the QR encoder from our own URL, not from input. */}
          <div
            role="img"
            aria-label={`QR code of ${apiUrl}`}
            data-qr={apiUrl}
            dangerouslySetInnerHTML={{ __html: renderSVG(apiUrl, { ecc: "M", border: 2 }) }}
          />
          <figcaption class="muted small">Scan with a phone: the API base URL (with a gateway API key).</figcaption>
        </figure>
      )}
    </div>
  )
}

const StatusLine = (p: { status: Status }) => (
  <>
    <p>
      {phaseBadge(p.status.phase)}{" "}
      {p.status.phase === "starting" && <span class="muted">Starting: the address is shown once the tunnel is registered.</span>}
    </p>
    {p.status.lastError && (
      <p class={p.status.phase === "error" ? "result result-bad" : "result"} role="status" data-last-error>
        {p.status.lastError}
      </p>
    )}
    <Address status={p.status} />
  </>
)

const Quick = (p: { status: Status; reload: () => void }) => {
  const [run, busy] = useAction()
  const act = (action: "enable" | "disable") => void run(() => ok(api.POST("/api/tunnels/quick", { body: { action } })).then(p.reload))
  const on = p.status.phase !== "stopped"
  return (
    <Section
      title="Quick tunnel"
      actions={
        on ? (
          <Button busy={busy} onClick={() => act("disable")}>
            Stop
          </Button>
        ) : (
          <Button kind="primary" busy={busy} onClick={() => act("enable")}>
            Start
          </Button>
        )
      }
    >
      <p class="muted">An ephemeral public address from the vendor's helper, no account needed. The address changes each time it starts.</p>
      <StatusLine status={p.status} />
    </Section>
  )
}

const Token = (p: { status: Status; reload: () => void }) => {
  const [token, setToken] = useState("")
  const [run, busy] = useAction()
  const start = () =>
    void run(async () => {
      await ok(api.POST("/api/tunnels/token", { body: { action: "enable", ...(token ? { authToken: token } : {}) } }))
      setToken("")
      p.reload()
    })
  const stop = () => void run(() => ok(api.POST("/api/tunnels/token", { body: { action: "disable" } })).then(p.reload))
  const on = p.status.phase === "running" || p.status.phase === "starting"
  return (
    <Section
      title="Token tunnel"
      actions={
        on ? (
          <Button busy={busy} onClick={stop}>
            Stop
          </Button>
        ) : null
      }
    >
      <p class="muted">
        A tunnel of your account with the vendor (a stable domain if your account has one). The authtoken is stored encrypted and never
        shown again.
      </p>
      <StatusLine status={p.status} />
      {!on && (
        <Form onSubmit={start} label="Start the token tunnel">
          <TextInput
            label="Authtoken"
            type="password"
            autoComplete="off"
            value={token}
            onInput={setToken}
            hint={
              p.status.phase === "needs_auth"
                ? "Needed: none is known yet, or the last one was refused."
                : "Leave empty to use the one already saved (or TOKEN_TUNNEL_AUTHTOKEN)."
            }
          />
          <div class="actions">
            <Button kind="primary" type="submit" busy={busy}>
              Start
            </Button>
          </div>
        </Form>
      )}
    </Section>
  )
}

const Mesh = (p: { status: Status; reload: () => void }) => {
  const check = useLoad(() => ok(api.GET("/api/tunnels/mesh/check")))
  const [sudo, setSudo] = useState("")
  const [hostname, setHostname] = useState("")
  const [port, setPort] = useState<number | undefined>(undefined)
  const [log, setLog] = useState<Array<string>>([])
  const [authUrl, setAuthUrl] = useState<string | null>(null)
  const [run, busy] = useAction()
  // The password goes with the one call it was typed for, then is forgotten.
  const withSudo = () => {
    const s = sudo
    setSudo("")
    return s ? { sudoPassword: s } : {}
  }
  const install = () =>
    void run(async () => {
      setLog([])
      const r = await api.POST("/api/tunnels/mesh/install", { body: withSudo(), parseAs: "stream" })
      if (!r.response.ok || !r.response.body) throw new Error(`the install could not start (HTTP ${r.response.status})`)
      let outcome: { ok: boolean; error?: string } = { ok: false, error: "the install ended without a result" }
      await readSse(r.response.body, (event, data) => {
        if (event === "progress") setLog((l) => [...l, JSON.parse(data).line as string])
        if (event === "done") outcome = JSON.parse(data)
      })
      check.reload()
      if (!outcome.ok) throw new Error(outcome.error)
    }, "Installed")
  const startDaemon = () =>
    void run(async () => {
      const r = await ok(api.POST("/api/tunnels/mesh/start-daemon", { body: withSudo() }))
      check.reload()
      if (!r.ok) throw new Error(r.error)
    }, "The mesh daemon runs")
  const login = () =>
    void run(async () => {
      const r = await ok(api.POST("/api/tunnels/mesh/login", { body: hostname ? { hostname } : {} }))
      if (r.error) throw new Error(r.error)
      setAuthUrl(r.authUrl)
      check.reload()
    })
  const enable = () =>
    void run(async () => {
      await ok(
        api.POST("/api/tunnels/mesh/enable", { body: { ...withSudo(), ...(hostname ? { hostname } : {}), ...(port ? { port } : {}) } })
      )
      p.reload()
      check.reload()
    })
  const disable = () =>
    void run(async () => {
      const r = await ok(api.POST("/api/tunnels/mesh/disable", { body: withSudo() }))
      p.reload()
      check.reload()
      if (r.error) throw new Error(r.error)
    })
  const on = p.status.phase !== "stopped"
  return (
    <Section title="Mesh funnel" actions={<Button onClick={check.reload}>Check again</Button>}>
      <p class="muted">
        Your machine's stable address on a mesh VPN (https://&lt;machine&gt;.&lt;network&gt;.ts.net/), opened to the internet by its funnel.
      </p>
      <StatusLine status={p.status} />
      {p.status.funnelNotEnabled && p.status.enableUrl && (
        <p class="result" role="status">
          The funnel is not allowed on this mesh network yet:{" "}
          <a href={p.status.enableUrl} target="_blank" rel="noreferrer" data-enable-url>
            allow it
          </a>
          ; the funnel starts by itself once allowed.
        </p>
      )}
      <Loader of={check}>
        {(c) => (
          <ol class="steps" aria-label="Mesh setup">
            <li data-step="install">
              {c.installed ? <Badge kind="ok">installed</Badge> : <Badge kind="warn">not installed</Badge>} The mesh CLI
              {c.version ? ` ${c.version}` : ""}{" "}
              {!c.installed && (
                <Button busy={busy} onClick={install}>
                  Install
                </Button>
              )}
            </li>
            <li data-step="daemon">
              {c.daemonRunning ? <Badge kind="ok">running</Badge> : <Badge kind="warn">not running</Badge>} Its daemon{" "}
              {c.installed && !c.daemonRunning && (
                <Button busy={busy} onClick={startDaemon}>
                  Start the daemon
                </Button>
              )}
            </li>
            <li data-step="login">
              {c.loggedIn ? <Badge kind="ok">logged in</Badge> : <Badge kind="warn">not logged in</Badge>}{" "}
              {c.dnsName ? <code class="mono">{c.dnsName}</code> : "Your account"}{" "}
              {c.daemonRunning && !c.loggedIn && (
                <Button busy={busy} onClick={login}>
                  Log in
                </Button>
              )}
              {authUrl && !c.loggedIn && (
                <span>
                  {" "}
                  Open{" "}
                  <a href={authUrl} target="_blank" rel="noreferrer" data-auth-url>
                    {authUrl}
                  </a>{" "}
                  to sign in, then check again.
                </span>
              )}
            </li>
            {c.problem && <li class="muted">{c.problem}</li>}
          </ol>
        )}
      </Loader>
      {log.length > 0 && (
        <pre class="mono log" aria-label="Install output" data-install-log>
          {log.join("\n")}
        </pre>
      )}
      <Form onSubmit={on ? disable : enable} label={on ? "Stop the mesh funnel" : "Start the mesh funnel"}>
        {!on && (
          <TextInput
            label="Machine name (optional)"
            value={hostname}
            onInput={setHostname}
            hint="One DNS label; changes this machine's name on the mesh."
          />
        )}
        {!on && <NumberInput label="Local port (optional)" value={port} onInput={setPort} hint="Default: the gateway's own port." />}
        <TextInput
          label="sudo password (optional)"
          type="password"
          autoComplete="off"
          value={sudo}
          onInput={setSudo}
          hint="Only when the gateway does not run as root and the mesh CLI needs it: used for this one call, never stored."
        />
        <div class="actions">
          <Button kind={on ? undefined : "primary"} type="submit" busy={busy}>
            {on ? "Stop" : "Start the funnel"}
          </Button>
        </div>
      </Form>
    </Section>
  )
}

export default function Tunnels() {
  const all = useLoad(loadAll)
  useInterval(() => all.reload(), 2000)
  return (
    <Page
      title="Tunnels"
      description="Reach this gateway from a phone or a remote coding agent. While a tunnel is open anyone with its address reaches the gateway: inference through it always needs a gateway API key, and the dashboard a login."
    >
      <Loader of={all}>
        {(s) => (
          <>
            <Quick status={s.quick} reload={all.reload} />
            <Token status={s.token} reload={all.reload} />
            <Mesh status={s.mesh as Status} reload={all.reload} />
          </>
        )}
      </Loader>
    </Page>
  )
}
