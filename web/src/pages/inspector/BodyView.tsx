import { useMemo } from "preact/hooks"
import { Badge, fmtBytes } from "../../ui"
import type { Body } from "./api"

/** Bodies larger than this are shown cut (the download of the HAR has all of it). */
const SHOWN = 200 * 1024

const pretty = (b: Body): { text: string; json: boolean } => {
  if (b.encoding !== "utf8") return { text: b.text, json: false }
  try {
    return { text: JSON.stringify(JSON.parse(b.text), null, 2), json: true }
  } catch {
    return { text: b.text, json: false }
  }
}

export const BodyView = (p: { label: string; body: Body | null }) => {
  const b = p.body
  const shown = useMemo(() => (b ? pretty(b) : undefined), [b])
  return (
    <div class="insp-body-view">
      <h4>{p.label}</h4>
      {!b || !shown ? (
        <p class="muted small">Not captured: bodies are kept while an inspector client (this page) is connected or a session records.</p>
      ) : (
        <>
          <p class="muted small">
            {fmtBytes(b.size)} on the wire{b.decodedFrom && `, decoded from ${b.decodedFrom}`}
            {b.encoding === "base64" && ", binary (base64)"}
            {shown.json && ", JSON"} {b.truncated && <Badge kind="warn">truncated</Badge>}
          </p>
          {b.notice && (
            <p class="insp-notice" role="note">
              {b.notice}
            </p>
          )}
          {b.text === "" ? (
            <p class="muted small">Empty.</p>
          ) : (
            <pre class="mono" tabIndex={0}>
              {shown.text.length > SHOWN
                ? `${shown.text.slice(0, SHOWN)}\n… (${fmtBytes(shown.text.length - SHOWN)} more not shown)`
                : shown.text}
            </pre>
          )}
        </>
      )}
    </div>
  )
}
