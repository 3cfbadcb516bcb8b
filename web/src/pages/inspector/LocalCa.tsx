import { api, ok } from "../../api/client"
import { Button, ErrorBox } from "../../ui"
import type { Modes } from "./api"
import { useInline } from "./useInline"

/** The local CA that TLS interception signs with: its fingerprint, its download and how to trust it. */
export const LocalCa = (p: { ca: Modes["ca"]; reload: () => void }) => {
  const [run, busy, error] = useInline()
  return (
    <div class="insp-mode" aria-label="Local CA" role="group">
      <h3>Local CA</h3>
      {p.ca.fingerprint256 ? (
        <>
          <p class="small">SHA-256 fingerprint</p>
          <p>
            <code class="insp-fingerprint">{p.ca.fingerprint256}</code>
          </p>
          {p.ca.path && (
            <p class="muted small">
              Kept at <code>{p.ca.path}</code>
            </p>
          )}
        </>
      ) : (
        <p class="muted small">No CA yet: it is made on first use (TLS interception, a custom host, or its download).</p>
      )}
      <ErrorBox error={error} />
      <div class="actions">
        <a class="btn insp-btn-link" href={p.ca.pemUrl} download="gateway-inspector-ca.pem">
          Download ca.pem
        </a>
        {!p.ca.fingerprint256 && (
          <Button
            busy={busy}
            onClick={() =>
              void run(() => ok(api.GET("/api/tools/traffic-inspector/ca.pem", { parseAs: "text" })), "CA created").then(p.reload)
            }
          >
            Create the CA
          </Button>
        )}
      </div>
      <h4>Trusting it</h4>
      <ul class="insp-trust">
        {p.ca.trust.map((line) => (
          <li key={line}>
            <code>{line}</code>
          </li>
        ))}
      </ul>
    </div>
  )
}
