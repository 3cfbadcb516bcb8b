// What an attempt did with the conversation's reasoning state (docs/reasoning-state.md), read from
// the client's body and the body sent upstream: thinking turned off, state of another account
// left out, Gemini's bypass value sent. Read only when both bodies were kept whole.

interface Kept {
  readonly text: string
  readonly encoding: string
  readonly truncated: boolean
}

const json = (b: Kept | null): unknown => {
  if (b === null || b.encoding !== "utf8" || b.truncated) return undefined
  try {
    return JSON.parse(b.text)
  } catch {
    return undefined
  }
}

const BYPASS = "skip_thought_signature_validator"

/** Pieces of reasoning state in a body of any format: signed thinking, redacted thinking, encrypted reasoning, thought signatures. */
const count = (v: unknown): { state: number; bypass: number } => {
  let state = 0
  let bypass = 0
  const walk = (x: unknown): void => {
    if (Array.isArray(x)) return x.forEach(walk)
    if (x === null || typeof x !== "object") return
    const o = x as Record<string, unknown>
    if (
      (o["type"] === "thinking" && typeof o["signature"] === "string" && o["signature"] !== "") ||
      (o["type"] === "redacted_thinking" && typeof o["data"] === "string")
    )
      state++
    if (typeof o["encrypted_content"] === "string") state++
    if (typeof o["thoughtSignature"] === "string") o["thoughtSignature"] === BYPASS ? bypass++ : state++
    for (const k in o) walk(o[k])
  }
  walk(v)
  return { state, bypass }
}

const thinkingAsked = (v: unknown): boolean => {
  const t = (v as { thinking?: { type?: string } } | null)?.thinking?.type
  return t === "enabled" || t === "adaptive"
}

/** One sentence per thing the attempt changed, or none. */
export const reasoningNotes = (client: Kept | null, upstream: Kept | null): ReadonlyArray<string> => {
  const sent = json(client)
  const went = json(upstream)
  if (sent === undefined || went === undefined) return []
  const notes: Array<string> = []
  if (thinkingAsked(sent) && (went as { thinking?: { type?: string } }).thinking?.type === "disabled")
    notes.push("Thinking was turned off for this attempt: a tool turn had no thinking this account accepts.")
  const before = count(sent)
  const after = count(went)
  if (after.state < before.state)
    notes.push(
      `${before.state - after.state} of ${before.state} pieces of reasoning state were not sent: this account cannot accept them (another account or provider issued them).`
    )
  if (after.bypass > before.bypass)
    notes.push("Gemini's bypass value was sent for a function call whose thought signature another account issued.")
  return notes
}
