import { useEffect, useRef, useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Badge, Button, Checkbox, ErrorBox } from "../../ui"
import type { HttpProxyState } from "./api"
import { useInline } from "./useInline"

/** The explicit HTTP proxy's listener, and TLS interception through it. */
export const HttpProxy = (p: { state: HttpProxyState; tls: boolean; reload: () => void }) => {
  const [run, busy, error] = useInline()
  const [runTls, tlsBusy, tlsError] = useInline()
  // The box shows the choice at once; the answer (or a reload after a failure) settles it. While a
  // choice is being saved, a reload that was already on its way (the previous choice's) does not
  // put the box back: its own reload follows.
  const [tls, setTls] = useState(p.tls)
  const saving = useRef(0)
  useEffect(() => {
    if (saving.current === 0) setTls(p.tls)
  }, [p.tls])
  const s = p.state
  const act = (action: "start" | "stop") =>
    void run(
      () => ok(api.POST("/api/tools/traffic-inspector/capture-modes/http-proxy", { body: { action } })),
      action === "start" ? "HTTP proxy started" : "HTTP proxy stopped"
    ).then(p.reload)
  return (
    <div class="insp-mode" aria-label="HTTP proxy" role="group">
      <h3>
        HTTP proxy <Badge kind={s.running ? "ok" : "muted"}>{s.running ? "running" : "stopped"}</Badge>
      </h3>
      <p class="muted small">
        An explicit proxy on this machine: point a client's HTTP_PROXY / HTTPS_PROXY at it. HTTPS is tunnelled unless TLS interception is
        on.
      </p>
      {s.running && s.url ? (
        <p>
          Listening on <code class="insp-proxy-url">{s.url}</code>
        </p>
      ) : (
        <p class="muted small">
          Port {s.port === 0 ? "chosen when it starts" : s.port} on {s.host}
        </p>
      )}
      <ErrorBox error={error ?? s.error ?? undefined} />
      <div class="actions">
        {s.running ? (
          <Button busy={busy} onClick={() => act("stop")}>
            Stop HTTP proxy
          </Button>
        ) : (
          <Button kind="primary" busy={busy} onClick={() => act("start")}>
            Start HTTP proxy
          </Button>
        )}
      </div>
      <Checkbox
        label="TLS interception"
        checked={tls}
        hint="Decrypt HTTPS through the proxy with the local CA below (clients must trust it); off, HTTPS is only a tunnel: host, timing and bytes."
        onChange={(enabled) => {
          saving.current++
          setTls(enabled)
          void runTls(
            () => ok(api.POST("/api/tools/traffic-inspector/capture-modes/tls-intercept", { body: { enabled } })),
            enabled ? "TLS interception on" : "TLS interception off"
          ).then((done) => {
            saving.current--
            if (!done) setTls(!enabled)
            p.reload()
          })
        }}
      />
      {tlsBusy && <p class="muted small">Saving…</p>}
      <ErrorBox error={tlsError} />
    </div>
  )
}
