import { useEffect, useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { Badge, Button, Dialog, Empty, Loader, Page, Section, Stat, TextInput, useAction, useLoad } from "../ui"
import "./operate/operate.css"

// Feature flags (docs/feature-flags.md): GET /api/settings/feature-flags lists them; PUT { key, value }
// stores an override, PUT { key } (no value) removes it, DELETE removes every override.

const loadFlags = () => ok(api.GET("/api/settings/feature-flags"))
type Flag = Awaited<ReturnType<typeof loadFlags>>["flags"][number]

const CATEGORY_TITLES: Record<Flag["category"], string> = {
  security: "Security",
  network: "Network",
  policies: "Policies",
  runtime: "Runtime",
  cli: "CLI",
  health: "Health"
}

const isOn = (v: string) => ["true", "1", "yes"].includes(v.trim().toLowerCase())

/** Where the value comes from, in the words the page uses: the database override is "stored". */
const sourceBadge = (s: Flag["source"]) =>
  s === "db" ? <Badge kind="info">stored</Badge> : s === "env" ? <Badge kind="warn">env</Badge> : <Badge kind="muted">default</Badge>

const FlagValue = (p: { flag: Flag; onChanged: () => void }) => {
  const [run, busy] = useAction()
  const f = p.flag
  // The value being stored, shown at once; cleared when the reloaded list has the new value (or on failure).
  const [pending, setPending] = useState<string | undefined>()
  useEffect(() => setPending(undefined), [f.effectiveValue, f.source])
  const value = pending ?? f.effectiveValue
  const set = (next: string | undefined) => {
    if (next !== undefined) setPending(next)
    return run(
      () => ok(api.PUT("/api/settings/feature-flags", { body: next === undefined ? { key: f.key } : { key: f.key, value: next } })),
      (r) => `${f.key}: ${r.effectiveValue} (${r.source === "db" ? "stored" : r.source})${r.requiresRestart ? " — restart required" : ""}`
    ).then((r) => {
      if (!r) setPending(undefined)
      p.onChanged()
    })
  }
  const id = `flag-${f.key}`
  return (
    <div class="flag-value">
      {f.type === "boolean" ? (
        <label class="switch" for={id}>
          <input
            id={id}
            type="checkbox"
            role="switch"
            checked={isOn(value)}
            disabled={busy}
            onChange={(e) => void set((e.currentTarget as HTMLInputElement).checked ? "true" : "false")}
          />
          <span>{isOn(value) ? "On" : "Off"}</span>
          <span class="sr-only"> — {f.label}</span>
        </label>
      ) : (
        <>
          <label class="sr-only" for={id}>
            {f.label}
          </label>
          <select id={id} value={value} disabled={busy} onChange={(e) => void set((e.currentTarget as HTMLSelectElement).value)}>
            {(f.enumValues ?? []).map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </>
      )}
      {f.source === "db" && (
        <Button kind="plain" busy={busy} onClick={() => void set(undefined)} aria-label={`Reset ${f.key}`}>
          Reset
        </Button>
      )}
    </div>
  )
}

const FlagRow = (p: { flag: Flag; onChanged: () => void }) => {
  const f = p.flag
  return (
    <li class="flag" data-flag={f.key}>
      <div class="flag-main">
        <div class="flag-title">
          <strong>{f.label}</strong> <code class="mono small">{f.key}</code>
        </div>
        <p class="muted small">{f.description}</p>
        <div class="flag-meta">
          <span>
            Source: <span data-source>{sourceBadge(f.source)}</span>
          </span>
          <span class="muted small">Default: {f.defaultValue}</span>
          {f.requiresRestart && <Badge kind="warn">restart required</Badge>}
          {f.pendingRestart && <Badge kind="bad">restart pending: this process still runs with the old value</Badge>}
        </div>
      </div>
      <FlagValue flag={f} onChanged={p.onChanged} />
    </li>
  )
}

export default function FlagsPage() {
  const list = useLoad(loadFlags)
  const [query, setQuery] = useState("")
  const [confirm, setConfirm] = useState(false)
  const [run, busy] = useAction()
  const q = query.trim().toLowerCase()
  return (
    <Page
      title="Feature flags"
      description="Switches read from the database override (stored), else the environment variable of the same name, else the default. Flags marked “restart required” take effect when the gateway restarts."
      actions={
        <Button kind="danger" onClick={() => setConfirm(true)}>
          Reset all overrides
        </Button>
      }
    >
      <Loader of={list}>
        {(data) => {
          const shown = data.flags.filter((f) => !q || `${f.key} ${f.label} ${f.description} ${f.category}`.toLowerCase().includes(q))
          const categories = [...new Set(shown.map((f) => f.category))]
          return (
            <>
              <div class="stats">
                <Stat label="Flags" value={data.summary.total} />
                <Stat label="Active" value={data.summary.active} />
                <Stat label="Stored overrides" value={data.summary.overriddenByDb} />
                <Stat label="From environment" value={data.summary.overriddenByEnv} />
              </div>
              <div class="toolbar">
                <TextInput
                  label="Search flags"
                  type="search"
                  value={query}
                  onInput={setQuery}
                  placeholder="name, description or category"
                />
              </div>
              {categories.length === 0 ? (
                <Empty title="No flag matches the search">Clear the search box to see every flag.</Empty>
              ) : (
                categories.map((c) => (
                  <Section key={c} title={CATEGORY_TITLES[c] ?? c}>
                    <ul class="flags">
                      {shown
                        .filter((f) => f.category === c)
                        .map((f) => (
                          <FlagRow key={f.key} flag={f} onChanged={list.reload} />
                        ))}
                    </ul>
                  </Section>
                ))
              )}
            </>
          )
        }}
      </Loader>
      <Dialog open={confirm} title="Reset every stored override?" onClose={() => setConfirm(false)}>
        <p>Every flag goes back to its environment value or its default. Restart-required flags change at the next restart.</p>
        <div class="actions">
          <Button
            kind="danger"
            busy={busy}
            onClick={() =>
              void run(
                () => ok(api.DELETE("/api/settings/feature-flags")),
                (r) => r.message
              ).then(() => {
                setConfirm(false)
                list.reload()
              })
            }
          >
            Reset all
          </Button>
          <Button onClick={() => setConfirm(false)}>Cancel</Button>
        </div>
      </Dialog>
    </Page>
  )
}
