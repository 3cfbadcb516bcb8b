import { useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Badge, Button, Confirm, ErrorBox, fmtDate, fmtNumber, Loader, useLoad } from "../../ui"
import type { Res } from "../govern/types"
import { useInline } from "./useInline"

type TproxyState = Res<"/api/tools/agent-bridge/tproxy", "get">

/** Transparent capture (TPROXY, docs/capture.md): its own route, its own state. */
export const TransparentCapture = () => {
  const status = useLoad(() => ok(api.GET("/api/tools/agent-bridge/tproxy")))
  const [run, busy, error] = useInline()
  const [confirming, setConfirming] = useState<true>()
  return (
    <Loader of={status}>
      {(t: TproxyState) => (
        <div class="insp-mode" aria-label="Transparent capture" role="group">
          <h3>
            Transparent capture{" "}
            <Badge kind={t.running ? "warn" : "muted"}>{t.running ? "running" : t.available ? "off" : "unavailable"}</Badge>
          </h3>
          <p class="muted small">
            Linux only: the outbound HTTPS (port {t.config?.dport ?? 443}) of every process on this machine is diverted to the gateway by
            firewall rules, decrypted with the CA below and recorded, with no client setting. Undone on stop and when the gateway stops.
          </p>
          {!t.available && t.reason && <p class="small">Not available here: {t.reason}</p>}
          {t.running && (
            <p>
              Listening on port <strong>{t.port}</strong> since {fmtDate(t.startedAt)}; {fmtNumber(t.interceptCount)} connection
              {t.interceptCount === 1 ? "" : "s"} intercepted.
              {t.trustStore.installed ? (
                <>
                  {" "}
                  CA installed in <code>{t.trustStore.path}</code>.
                </>
              ) : (
                t.trustStore.note && <span class="muted small"> {t.trustStore.note}</span>
              )}
            </p>
          )}
          {t.running && t.commands.applied.length > 0 && (
            <details>
              <summary>What it changed</summary>
              <ul class="insp-changes">
                {t.commands.applied.map((c) => (
                  <li key={c}>
                    <code>{c}</code>
                  </li>
                ))}
              </ul>
            </details>
          )}
          <ErrorBox error={error ?? t.lastError ?? undefined} />
          <div class="actions">
            {t.running ? (
              <Button
                busy={busy}
                onClick={() =>
                  void run(() => ok(api.DELETE("/api/tools/agent-bridge/tproxy")), "Transparent capture stopped").then(status.reload)
                }
              >
                Stop transparent capture
              </Button>
            ) : (
              <Button disabled={!t.available} onClick={() => setConfirming(true)}>
                Start transparent capture…
              </Button>
            )}
          </div>
          <Confirm
            item={confirming}
            title="Divert this machine's HTTPS through the gateway?"
            action="Start transparent capture"
            onClose={() => setConfirming(undefined)}
            remove={() => ok(api.POST("/api/tools/agent-bridge/tproxy", { body: {} }))}
            done="Transparent capture started"
            onRemoved={status.reload}
          >
            {() => (
              <p>
                Firewall rules and a routing rule send new HTTPS connections of every local process to the gateway, and the CA goes into the
                system trust store. Clients that do not trust the CA will refuse their connections. Everything is recorded first and removed
                on stop, when the gateway stops, or at its next start after a crash.
              </p>
            )}
          </Confirm>
        </div>
      )}
    </Loader>
  )
}
