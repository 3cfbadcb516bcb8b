import { useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Badge, Button, Confirm, ErrorBox, fmtDate } from "../../ui"
import type { SystemProxyState } from "./api"
import { useInline } from "./useInline"

/** This desktop's proxy settings pointed at the HTTP proxy, with their automatic revert. */
export const SystemProxy = (p: { state: SystemProxyState; reload: () => void }) => {
  const [run, busy, error] = useInline()
  const [confirming, setConfirming] = useState<true>()
  const s = p.state
  return (
    <div class="insp-mode" aria-label="System proxy" role="group">
      <h3>
        System proxy <Badge kind={s.applied ? "warn" : "muted"}>{s.applied ? "applied" : "off"}</Badge>
      </h3>
      <p class="muted small">
        Points this desktop's proxy settings (GNOME) and new shells at the HTTP proxy; reverted automatically after {s.guardMinutes} minutes
        and when the gateway stops.
      </p>
      {s.applied && (
        <p>
          Applied {fmtDate(s.appliedAt)}; reverts at <strong>{fmtDate(s.revertsAt)}</strong>.
        </p>
      )}
      {s.changes.length > 0 && (
        <>
          <h4>What it changed</h4>
          <ul class="insp-changes">
            {s.changes.map((c) => (
              <li key={`${c.kind}:${c.target}`}>
                <code>{c.target}</code> <span class="muted small">({c.kind})</span>: {c.detail}
              </li>
            ))}
          </ul>
        </>
      )}
      {s.notes.map((n) => (
        <p class="muted small" key={n}>
          {n}
        </p>
      ))}
      <ErrorBox error={error ?? s.error ?? undefined} />
      <div class="actions">
        {s.applied ? (
          <Button
            busy={busy}
            onClick={() =>
              void run(
                () => ok(api.POST("/api/tools/traffic-inspector/capture-modes/system-proxy", { body: { action: "revert" } })),
                "System proxy reverted"
              ).then(p.reload)
            }
          >
            Revert system proxy
          </Button>
        ) : (
          <Button onClick={() => setConfirming(true)}>Apply system proxy…</Button>
        )}
      </div>
      <Confirm
        item={confirming}
        title="Point this machine at the inspector?"
        action="Apply system proxy"
        onClose={() => setConfirming(undefined)}
        remove={() => ok(api.POST("/api/tools/traffic-inspector/capture-modes/system-proxy", { body: { action: "apply" } }))}
        done="System proxy applied"
        onRemoved={p.reload}
      >
        {() => (
          <p>
            The desktop's proxy settings and your shells' environment are pointed at the HTTP proxy (it starts if needed). Everything is
            recorded first and put back on revert, after {s.guardMinutes} minutes, or when the gateway stops.
          </p>
        )}
      </Confirm>
    </div>
  )
}
