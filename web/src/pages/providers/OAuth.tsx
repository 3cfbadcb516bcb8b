import { useEffect, useRef, useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Badge, Button, Dialog, Empty, fmtDate, Form, Loader, Section, Select, Table, TextInput, toast, useAction, useLoad } from "../../ui"

/** The OAuth providers built in (docs/operations.md, "OAuth connections"). */
const OAUTH_PROVIDERS = [
  { value: "claude-code", label: "Claude Pro/Max (claude-code)" },
  { value: "qwen", label: "Qwen (qwen)" }
] as const
type OAuthProvider = (typeof OAUTH_PROVIDERS)[number]["value"]

type Flow =
  | { kind: "pkce"; provider: OAuthProvider; authorizeUrl: string; state: string }
  | {
      kind: "device"
      provider: OAuthProvider
      state: string
      userCode: string
      verificationUri: string
      verificationUriComplete: string | null
      interval: number
    }

const stateKind = (s: string) => (s === "active" ? "ok" : s === "expiring" ? "warn" : "bad")

/**
 * Sign in with an account instead of an API key: the authorization-code flow opens the provider's page
 * and takes the code it shows back; the device flow shows a code to enter there and polls until done.
 */
export const OAuthSection = (p: { onChange: () => void }) => {
  const [provider, setProvider] = useState<OAuthProvider>("claude-code")
  const [name, setName] = useState("")
  const [flow, setFlow] = useState<Flow | null>(null)
  const [code, setCode] = useState("")
  const [revoking, setRevoking] = useState<{ id: string; name: string } | null>(null)
  const status = useLoad(() => ok(api.GET("/api/oauth/{provider}/status", { params: { path: { provider } } })), [provider])
  const [run, busy] = useAction()
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined)
  useEffect(() => () => clearTimeout(timer.current), [])

  const finished = () => {
    setFlow(null)
    setCode("")
    status.reload()
    p.onChange()
  }

  const poll = (f: Extract<Flow, { kind: "device" }>, interval: number) => {
    timer.current = setTimeout(async () => {
      try {
        const r = await ok(api.POST("/api/oauth/{provider}/poll", { params: { path: { provider: f.provider } }, body: { state: f.state } }))
        if (r.status === "complete") {
          toast(`Signed in: connection ${r.connection?.name ?? ""} ready`)
          finished()
        } else poll(f, r.interval)
      } catch (e) {
        toast(e instanceof Error ? e.message : String(e), "error")
        setFlow(null)
      }
    }, Math.max(1, interval) * 1000)
  }

  const start = () =>
    run(async () => {
      const flows = status.data?.flows ?? []
      const body = name.trim() ? { name: name.trim() } : {}
      if (flows.includes("device") && !flows.includes("pkce")) {
        const d = await ok(api.POST("/api/oauth/{provider}/device-code", { params: { path: { provider } }, body }))
        const f: Flow = {
          kind: "device",
          provider,
          state: d.state,
          userCode: d.userCode,
          verificationUri: d.verificationUri,
          verificationUriComplete: d.verificationUriComplete ?? null,
          interval: d.interval
        }
        setFlow(f)
        poll(f, d.interval)
      } else {
        const a = await ok(api.POST("/api/oauth/{provider}/authorize", { params: { path: { provider } }, body }))
        setFlow({ kind: "pkce", provider, authorizeUrl: a.authorizeUrl, state: a.state })
      }
    })

  const complete = (f: Extract<Flow, { kind: "pkce" }>) =>
    run(async () => {
      const v = code.trim()
      const body = /^https?:\/\//.test(v) ? { url: v } : { code: v, state: v.includes("#") ? undefined : f.state }
      await ok(api.POST("/api/oauth/{provider}/callback", { params: { path: { provider: f.provider } }, body }))
      finished()
    }, "Signed in")

  const cancel = () => {
    clearTimeout(timer.current)
    setFlow(null)
  }

  return (
    <Section title="OAuth sign-in">
      <p class="muted">
        Subscriptions that sign in with an account instead of an API key. The gateway keeps the tokens encrypted and refreshes them.
      </p>
      <div class="section-form">
        <Form onSubmit={() => void start()} label="Connect an OAuth account">
          <Select label="Account" value={provider} options={OAUTH_PROVIDERS} onChange={(v) => (cancel(), setProvider(v))} />
          <TextInput
            label="Connection name"
            value={name}
            onInput={setName}
            hint="Default: the provider id. An existing name is re-authorized."
          />
          <div class="actions">
            <Button kind="primary" type="submit" busy={busy} disabled={flow !== null}>
              Connect
            </Button>
          </div>
        </Form>
      </div>
      {flow?.kind === "pkce" && (
        <div class="oauth-flow" role="region" aria-label="Finish the sign-in">
          <p>
            1.{" "}
            <a href={flow.authorizeUrl} target="_blank" rel="noopener noreferrer">
              Open the sign-in page
            </a>{" "}
            and approve.
          </p>
          <Form onSubmit={() => void complete(flow)} label="Paste the code">
            <TextInput label="2. Paste the code it shows (or the address you ended on)" value={code} onInput={setCode} required wide />
            <div class="actions">
              <Button kind="primary" type="submit" busy={busy}>
                Finish sign-in
              </Button>
              <Button onClick={cancel}>Cancel</Button>
            </div>
          </Form>
        </div>
      )}
      {flow?.kind === "device" && (
        <div class="oauth-flow" role="region" aria-label="Finish the sign-in">
          <p>
            Open{" "}
            <a href={flow.verificationUriComplete ?? flow.verificationUri} target="_blank" rel="noopener noreferrer">
              {flow.verificationUri}
            </a>{" "}
            and enter the code:
          </p>
          <p class="user-code">
            <code>{flow.userCode}</code>
          </p>
          <p class="muted" aria-busy="true">
            Waiting for you to approve… (checked every {flow.interval} s)
          </p>
          <div class="actions">
            <Button onClick={cancel}>Cancel</Button>
          </div>
        </div>
      )}
      <Loader of={status}>
        {(s) => (
          <Table
            caption={`OAuth connections of ${s.provider}`}
            rowKey={(c) => c.id}
            rows={s.connections}
            empty={<Empty title={`No ${s.provider} account connected`}>Press Connect to sign in.</Empty>}
            columns={[
              { label: "Connection", render: (c) => c.name },
              { label: "Account", render: (c) => c.email ?? c.accountId ?? "—" },
              { label: "State", render: (c) => <Badge kind={stateKind(c.state)}>{c.state}</Badge> },
              { label: "Expires", render: (c) => fmtDate(c.expiresAt) },
              { label: "Last refresh error", render: (c) => c.lastRefreshError ?? "—" },
              {
                label: "Actions",
                render: (c) => (
                  <Button kind="danger" aria-label={`Revoke ${c.name}`} onClick={() => setRevoking({ id: c.id, name: c.name })}>
                    Revoke
                  </Button>
                )
              }
            ]}
          />
        )}
      </Loader>
      <Dialog open={revoking !== null} title="Revoke this sign-in?" onClose={() => setRevoking(null)}>
        {revoking && (
          <>
            <p>
              The gateway forgets the tokens of <strong>{revoking.name}</strong> and removes the connection.
            </p>
            <div class="actions">
              <Button
                kind="danger"
                busy={busy}
                onClick={() =>
                  void run(
                    () =>
                      ok(api.POST("/api/oauth/{provider}/revoke", { params: { path: { provider } }, body: { connection: revoking.id } })),
                    `${revoking.name} revoked`
                  ).then(() => {
                    setRevoking(null)
                    finished()
                  })
                }
              >
                Revoke {revoking.name}
              </Button>
              <Button onClick={() => setRevoking(null)}>Cancel</Button>
            </div>
          </>
        )}
      </Dialog>
    </Section>
  )
}
