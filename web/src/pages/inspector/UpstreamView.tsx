import { reasoningNotes } from "../reasoning"
import type { Body, Upstream } from "./api"
import { BodyView } from "./BodyView"

/** What the gateway sent upstream and got back, one attempt each. */
export const UpstreamView = (p: { exchanges: ReadonlyArray<Upstream>; client: Body | null }) => (
  <>
    {p.exchanges.map((u) => (
      <details key={u.attempt} class="insp-upstream" open={p.exchanges.length === 1}>
        <summary>
          Attempt {u.attempt}: {u.provider} · {u.connection} · {u.model} → {u.status ?? "no answer"}
        </summary>
        {u.url && <p class="mono small insp-wrap">{u.url}</p>}
        {u.error && (
          <p class="error-box" role="note">
            {u.error}
          </p>
        )}
        {reasoningNotes(p.client, u.requestBody).map((n) => (
          <p key={n} class="small insp-reasoning-note">
            Reasoning state: {n}
          </p>
        ))}
        <div class="insp-pair">
          <BodyView label="Sent upstream" body={u.requestBody} />
          <BodyView label="Upstream answer" body={u.responseBody} />
        </div>
      </details>
    ))}
  </>
)
