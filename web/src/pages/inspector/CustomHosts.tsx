import { useEffect, useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Badge, Button, Confirm, ErrorBox, Form, Loader, Select, Table, TextInput, useLoad } from "../../ui"
import type { MitmState } from "./api"
import { useInline } from "./useInline"

/** A custom host's on/off box: shows the choice at once, then what the server kept. */
const HostToggle = (p: {
  host: string
  enabled: boolean
  run: (f: () => Promise<unknown>, done?: string) => Promise<boolean>
  done: () => void
}) => {
  const [on, setOn] = useState(p.enabled)
  useEffect(() => setOn(p.enabled), [p.enabled])
  return (
    <input
      type="checkbox"
      checked={on}
      aria-label={`Capture ${p.host}`}
      onChange={(e) => {
        const enabled = (e.currentTarget as HTMLInputElement).checked
        setOn(enabled)
        void p
          .run(
            () => ok(api.PATCH("/api/tools/traffic-inspector/hosts/{host}", { params: { path: { host: p.host } }, body: { enabled } })),
            `${p.host} ${enabled ? "enabled" : "disabled"}`
          )
          .then((done) => {
            if (!done) setOn(!enabled)
            p.done()
          })
      }}
    />
  )
}

/** Names resolved to this machine and answered by the local TLS server. */
export const CustomHosts = () => {
  const hosts = useLoad(() => ok(api.GET("/api/tools/traffic-inspector/hosts")))
  const [host, setHost] = useState("")
  const [kind, setKind] = useState<"llm" | "app" | "custom">("llm")
  const [removing, setRemoving] = useState<string>()
  const [run, busy, error] = useInline()
  const mitm = hosts.data?.mitm as MitmState | undefined
  return (
    <div class="insp-mode" aria-label="Custom hosts" role="group">
      <h3>
        Custom hosts{" "}
        {mitm && (
          <Badge kind={mitm.running ? "ok" : "muted"}>{mitm.running ? `TLS server on port ${mitm.port}` : "TLS server stopped"}</Badge>
        )}
      </h3>
      <p class="muted small">
        Names resolved to this machine through a marked block in {hosts.data ? <code>{hosts.data.hostsFile}</code> : "the hosts file"},
        answered by the local TLS server (the client must trust the CA).
      </p>
      {mitm?.error && (
        <p class="error-box" role="note">
          {mitm.error}
        </p>
      )}
      <Form
        label="Add a custom host"
        onSubmit={() =>
          void run(
            () => ok(api.POST("/api/tools/traffic-inspector/hosts", { body: { host: host.trim(), kind } })),
            `${host.trim()} added`
          ).then(() => {
            setHost("")
            hosts.reload()
          })
        }
      >
        <TextInput label="Host name" value={host} onInput={setHost} required placeholder="api.example.com" />
        <Select<"llm" | "app" | "custom">
          label="Kind"
          value={kind}
          options={[
            { value: "llm", label: "LLM API" },
            { value: "app", label: "app" },
            { value: "custom", label: "other" }
          ]}
          onChange={setKind}
        />
        <div class="actions">
          <Button type="submit" busy={busy}>
            Add host
          </Button>
        </div>
      </Form>
      <ErrorBox error={error} />
      <Loader of={hosts}>
        {(d) => (
          <Table
            caption="Custom hosts"
            rowKey={(h) => h.host}
            rows={d.hosts}
            empty={<p class="muted small">No custom hosts.</p>}
            columns={[
              { label: "Host", class: "mono", render: (h) => h.host },
              { label: "Kind", render: (h) => h.kind },
              { label: "Enabled", render: (h) => <HostToggle host={h.host} enabled={h.enabled} run={run} done={hosts.reload} /> },
              {
                label: "Actions",
                render: (h) => (
                  <Button kind="danger" onClick={() => setRemoving(h.host)} aria-label={`Remove ${h.host}`}>
                    Remove
                  </Button>
                )
              }
            ]}
          />
        )}
      </Loader>
      <Confirm
        item={removing}
        title="Remove this custom host?"
        action="Remove host"
        onClose={() => setRemoving(undefined)}
        remove={(h) => ok(api.DELETE("/api/tools/traffic-inspector/hosts/{host}", { params: { path: { host: h } } }))}
        done="Custom host removed"
        onRemoved={hosts.reload}
      >
        {(h) => (
          <p>
            <code>{h}</code> leaves the hosts file and resolves as before.
          </p>
        )}
      </Confirm>
    </div>
  )
}
