import { Badge } from "../../ui"
import type { Block, Detail, Turn } from "./api"

const json = (v: unknown) => {
  try {
    return JSON.stringify(v, null, 2) ?? String(v)
  } catch {
    return String(v)
  }
}

const BlockView = (p: { block: Block }) => {
  const b = p.block
  switch (b.type) {
    case "text":
      return <p class="insp-text">{b.text}</p>
    case "reasoning":
      return (
        <details class="insp-reasoning">
          <summary>Reasoning</summary>
          <p class="insp-text">{b.text}</p>
        </details>
      )
    case "tool_use":
      return (
        <div class="insp-call">
          <p class="insp-call-head">
            Calls <code>{b.name}</code> <span class="muted small">({b.id})</span>
          </p>
          <pre class="mono" tabIndex={0}>
            {json(b.input)}
          </pre>
        </div>
      )
    case "tool_result":
      return (
        <div class="insp-call">
          <p class="insp-call-head">
            Result of <code>{b.toolUseId}</code> {b.isError && <Badge kind="bad">error</Badge>}
          </p>
          <pre class="mono" tabIndex={0}>
            {b.content}
          </pre>
        </div>
      )
    case "image":
      return <p class="muted small">[image{b.mediaType ? `, ${b.mediaType}` : ""}]</p>
    default:
      return (
        <pre class="mono" tabIndex={0}>
          {json(b)}
        </pre>
      )
  }
}

const Bubbles = (p: { turns: ReadonlyArray<Turn>; answer?: boolean }) => (
  <>
    {p.turns.map((t, i) => (
      <li key={`${p.answer ? "a" : "q"}${i}`} class={`insp-bubble insp-${t.role}`}>
        <div class="insp-role">
          {t.role}
          {p.answer && <span class="muted"> · answer</span>}
        </div>
        {t.blocks.length === 0 ? <p class="muted small">(empty)</p> : t.blocks.map((b, j) => <BlockView key={j} block={b} />)}
      </li>
    ))}
  </>
)

export const Conversation = (p: { conversation: NonNullable<Detail["conversation"]> }) => {
  const request = p.conversation.request as ReadonlyArray<Turn>
  const response = p.conversation.response as ReadonlyArray<Turn>
  const raw = p.conversation.rawEvents as ReadonlyArray<{ event?: string; data: string }> | undefined
  return (
    <>
      <ol class="insp-chat" aria-label="Conversation">
        <Bubbles turns={request} />
        <Bubbles turns={response} answer />
      </ol>
      {response.length === 0 && !raw && <p class="muted small">No answer turns (yet).</p>}
      {raw && raw.length > 0 && (
        <details>
          <summary>The answer's raw stream events ({raw.length}): a format the inspector does not merge</summary>
          <pre class="mono" tabIndex={0}>
            {raw.map((e) => (e.event ? `event: ${e.event}\ndata: ${e.data}` : `data: ${e.data}`)).join("\n\n")}
          </pre>
        </details>
      )}
    </>
  )
}
