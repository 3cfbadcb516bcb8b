import { useEffect, useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Button, ErrorBox } from "../../ui"
import type { Detail, Replayed } from "./api"
import { Status } from "./Status"

/** One LLM call sent again through the router (POST requests/{id}/replay); a session's replay against other models is ../replay.tsx. */
export const Replay = (p: { entry: Detail; onOpen: (id: string) => void }) => {
  const [result, setResult] = useState<Replayed>()
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  useEffect(() => {
    setResult(undefined)
    setError(undefined)
  }, [p.entry.id])
  if (p.entry.llm === null) return <p class="muted small">Only LLM calls can be replayed through the router.</p>
  const replay = async () => {
    setBusy(true)
    setError(undefined)
    setResult(undefined)
    try {
      setResult(await ok(api.POST("/api/tools/traffic-inspector/requests/{id}/replay", { params: { path: { id: p.entry.id } } })))
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    } finally {
      setBusy(false)
    }
  }
  return (
    <div class="insp-replay">
      <div class="actions">
        <Button kind="primary" busy={busy} onClick={() => void replay()}>
          Replay
        </Button>
        <span class="muted small">
          Sends the captured request again through the router, as the gateway's own caller (not with the client's key).
        </span>
      </div>
      <ErrorBox error={error} />
      {result && (
        <p role="status" class="insp-replayed">
          Replayed: <Status status={result.status} /> <span class="muted small">request {result.requestId}</span>{" "}
          {result.replay && (
            <button type="button" class="insp-link" onClick={() => p.onOpen(result.replay!)}>
              Open the replay
            </button>
          )}
        </p>
      )}
    </div>
  )
}
