import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import {
  Badge,
  Button,
  Checkbox,
  Confirm,
  Dialog,
  Empty,
  fmtDate,
  Form,
  Loader,
  Page,
  SecretOnce,
  Section,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import "./operate/operate.css"

// Webhooks (docs/webhooks.md): signed deliveries of events to receivers the admin registers.
// GET/POST /api/webhooks, PUT/DELETE /api/webhooks/{id}, POST /api/webhooks/{id}/test.

const loadHooks = () => ok(api.GET("/api/webhooks"))
type Hook = Awaited<ReturnType<typeof loadHooks>>["webhooks"][number]
type TestResult = { delivered: boolean; status: number; error: string | null }

/** The events a webhook can receive (src/domain/webhooks.ts WEBHOOK_EVENTS); `*` is all of them. */
const EVENTS = [
  "request.completed",
  "request.failed",
  "provider.error",
  "provider.recovered",
  "quota.exceeded",
  "combo.switched",
  "test.ping"
] as const
/** Failed deliveries in a row that disable a webhook. */
const DISABLE_AT = 10

/** Pick `*` (every event) or some named events. */
const EventPicker = (p: { value: ReadonlyArray<string>; onChange: (v: string[]) => void }) => {
  const all = p.value.includes("*")
  return (
    <fieldset class="checks full">
      <legend>Events</legend>
      <Checkbox label="All events (*)" checked={all} onChange={(on) => p.onChange(on ? ["*"] : [])} />
      {!all &&
        EVENTS.map((e) => (
          <Checkbox
            key={e}
            label={e}
            checked={p.value.includes(e)}
            onChange={(on) => p.onChange(on ? [...p.value, e] : p.value.filter((x) => x !== e))}
          />
        ))}
    </fieldset>
  )
}

const health = (h: Hook) =>
  h.enabled === 0 ? (
    <Badge kind="bad">disabled</Badge>
  ) : h.failure_count > 0 ? (
    <Badge kind="warn">
      failing ({h.failure_count}/{DISABLE_AT})
    </Badge>
  ) : h.last_status === null ? (
    <Badge kind="muted">never delivered</Badge>
  ) : (
    <Badge kind="ok">enabled</Badge>
  )

const lastStatus = (s: number | null) => (s === null ? "—" : s === 0 ? "no answer (network error)" : `HTTP ${s}`)

const CreateForm = (p: { onCreated: (secret: string) => void }) => {
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState<string[]>(["*"])
  const [description, setDescription] = useState("")
  const [run, busy] = useAction()
  const submit = () =>
    void run(
      () =>
        ok(
          api.POST("/api/webhooks", {
            body: { url: url.trim(), events, ...(description.trim() ? { description: description.trim() } : {}) }
          })
        ),
      (r) => (r.warnings?.length ? `Webhook created; these names match no event: ${r.warnings.join(", ")}` : "Webhook created")
    ).then((r) => {
      if (!r) return
      setUrl("")
      setDescription("")
      setEvents(["*"])
      p.onCreated(r.secret)
    })
  return (
    <Form onSubmit={submit} label="New webhook">
      <TextInput
        label="Receiver URL"
        type="url"
        value={url}
        onInput={setUrl}
        required
        placeholder="https://example.com/hooks/gateway"
        wide
      />
      <EventPicker value={events} onChange={setEvents} />
      <TextInput label="Description" value={description} onInput={setDescription} hint="Optional: what receives these events." wide />
      <Button kind="primary" type="submit" busy={busy} disabled={events.length === 0}>
        Create webhook
      </Button>
    </Form>
  )
}

const EditDialog = (p: { hook: Hook | undefined; onClose: () => void; onSaved: () => void }) => {
  const h = p.hook
  const [url, setUrl] = useState(h?.url ?? "")
  const [events, setEvents] = useState<string[]>([...(h?.events ?? ["*"])])
  const [description, setDescription] = useState(h?.description ?? "")
  const [enabled, setEnabled] = useState(h?.enabled !== 0)
  const [run, busy] = useAction()
  if (!h) return null
  const submit = () =>
    void run(
      () =>
        ok(
          api.PUT("/api/webhooks/{id}", {
            params: { path: { id: h.id } },
            body: { url: url.trim(), events, description: description.trim() ? description.trim() : null, enabled }
          })
        ),
      "Webhook saved"
    ).then((r) => {
      if (r) p.onSaved()
    })
  return (
    <Dialog open title="Edit webhook" onClose={p.onClose}>
      <Form onSubmit={submit} label="Edit webhook">
        <TextInput label="Receiver URL" type="url" value={url} onInput={setUrl} required wide />
        <EventPicker value={events} onChange={setEvents} />
        <TextInput label="Description" value={description} onInput={setDescription} wide />
        <Checkbox label="Enabled" checked={enabled} onChange={setEnabled} hint="Turning it on again resets the failure count." />
        <div class="actions">
          <Button kind="primary" type="submit" busy={busy} disabled={events.length === 0}>
            Save
          </Button>
          <Button onClick={p.onClose}>Cancel</Button>
        </div>
      </Form>
    </Dialog>
  )
}

export default function WebhooksPage() {
  const list = useLoad(loadHooks)
  const [secret, setSecret] = useState<string | undefined>()
  const [results, setResults] = useState<Record<string, TestResult>>({})
  const [editing, setEditing] = useState<Hook | undefined>()
  const [removing, setRemoving] = useState<Hook | undefined>()
  const [run, busy] = useAction()
  const [testing, setTesting] = useState<string | undefined>()

  const test = async (h: Hook) => {
    setTesting(h.id)
    const r = await run(() => ok(api.POST("/api/webhooks/{id}/test", { params: { path: { id: h.id } } })))
    setTesting(undefined)
    if (r) setResults((x) => ({ ...x, [h.id]: r }))
    list.reload()
  }
  const reEnable = (h: Hook) =>
    void run(
      () => ok(api.PUT("/api/webhooks/{id}", { params: { path: { id: h.id } }, body: { enabled: true } })),
      "Webhook enabled again"
    ).then(list.reload)

  return (
    <Page
      title="Webhooks"
      description="Signed HTTP deliveries of gateway events (requests, provider errors and recoveries, quotas, combo switches) to your own receivers."
    >
      <div class="operate">
        <Section title="New webhook">
          {secret && (
            <div class="sub">
              <SecretOnce label="Signing secret" value={secret} />
              <p class="muted small">
                Receivers verify each delivery's Standard Webhooks signature (webhook-signature) and X-Webhook-Signature with it.
              </p>
              <Button kind="plain" onClick={() => setSecret(undefined)}>
                I have copied it
              </Button>
            </div>
          )}
          <CreateForm
            onCreated={(s) => {
              setSecret(s)
              list.reload()
            }}
          />
        </Section>
        <Section title="Webhooks">
          <Loader of={list}>
            {(data) => (
              <>
                <Table
                  caption="Webhooks"
                  rows={data.webhooks}
                  rowKey={(h) => h.id}
                  empty={<Empty title="No webhooks yet">Add a receiver URL above; then press Test to send it a signed test.ping.</Empty>}
                  columns={[
                    {
                      label: "Receiver",
                      render: (h) => (
                        <div class="wrap">
                          <code class="mono">{h.url}</code>
                          {h.description && <div class="muted small">{h.description}</div>}
                        </div>
                      )
                    },
                    { label: "Events", render: (h) => h.events.map((e) => (e === "*" ? "all (*)" : e)).join(", ") },
                    { label: "Secret", render: (h) => <code class="mono">{h.secret}</code> },
                    { label: "Health", render: health },
                    {
                      label: "Last delivery",
                      render: (h) => (
                        <>
                          <div>{fmtDate(h.last_triggered_at)}</div>
                          <div class="muted small">{lastStatus(h.last_status)}</div>
                          {h.failure_count > 0 && (
                            <div class="muted small">
                              {h.failure_count} failed in a row (disabled at {DISABLE_AT})
                            </div>
                          )}
                        </>
                      )
                    },
                    {
                      label: "Actions",
                      render: (h) => (
                        <div class="row-actions">
                          <Button busy={testing === h.id} onClick={() => void test(h)} aria-label={`Test ${h.url}`}>
                            Test
                          </Button>
                          {h.enabled === 0 && (
                            <Button kind="primary" busy={busy} onClick={() => reEnable(h)} aria-label={`Re-enable ${h.url}`}>
                              Re-enable
                            </Button>
                          )}
                          <Button onClick={() => setEditing(h)} aria-label={`Edit ${h.url}`}>
                            Edit
                          </Button>
                          <Button kind="danger" onClick={() => setRemoving(h)} aria-label={`Delete ${h.url}`}>
                            Delete
                          </Button>
                        </div>
                      )
                    }
                  ]}
                />
                <div role="status" aria-live="polite">
                  {data.webhooks
                    .filter((h) => results[h.id])
                    .map((h) => {
                      const r = results[h.id]!
                      return (
                        <p key={h.id} class={`result ${r.delivered ? "result-ok" : "result-bad"}`} data-test-result={h.id}>
                          Test of <code class="mono wrap">{h.url}</code>:{" "}
                          {r.delivered ? (
                            <>
                              <Badge kind="ok">delivered</Badge> HTTP {r.status}
                            </>
                          ) : (
                            <>
                              <Badge kind="bad">not delivered</Badge> {r.status ? `HTTP ${r.status}` : "no answer"}
                              {r.error ? ` — ${r.error}` : ""}
                            </>
                          )}
                        </p>
                      )
                    })}
                </div>
              </>
            )}
          </Loader>
        </Section>
        {editing && (
          <EditDialog
            key={editing.id}
            hook={editing}
            onClose={() => setEditing(undefined)}
            onSaved={() => {
              setEditing(undefined)
              list.reload()
            }}
          />
        )}
        <Confirm
          item={removing}
          title="Delete this webhook?"
          action="Delete"
          onClose={() => setRemoving(undefined)}
          remove={(hook) => ok(api.DELETE("/api/webhooks/{id}", { params: { path: { id: hook.id } } }))}
          done="Webhook deleted"
          onRemoved={list.reload}
        >
          {(hook) => (
            <p class="wrap">
              <code class="mono">{hook.url}</code> stops receiving events.
            </p>
          )}
        </Confirm>
      </div>
    </Page>
  )
}
