/**
 * Reasoning state bound to the account that issued it: sealed with its connection on the way out, sent back only to that connection
 * (docs/reasoning-state.md, "What the gateway does"). The seal stays base64: Gemini's SDKs decode and re-encode it unchanged.
 */
import type { CanonicalResponse, ContentBlock, FormatId, Message, StreamEvent } from "../../domain/canonical.js"
import { obj, str } from "./common.js"

const MAGIC = Buffer.from([0x67, 0x77, 0x00, 0x5a, 0xc3, 0x01])
/** Six bytes are exactly eight base64 characters: a sealed value starts with these. */
const PREFIX = MAGIC.toString("base64")

const isSealed = (v: unknown): boolean => typeof v === "string" && v.startsWith(PREFIX)

export const seal = (issuer: string, signature: string): string => {
  if (signature === "" || signature.startsWith(PREFIX)) return signature
  const id = Buffer.from(issuer, "utf8").subarray(0, 255)
  return Buffer.concat([MAGIC, Buffer.from([id.length]), id, Buffer.from(signature, "utf8")]).toString("base64")
}

export interface Opened {
  /** Absent: not sealed here. */
  readonly issuer?: string
  readonly signature: string
}

/**
 * Seals opened lately: an agent's conversation sends the same sealed turns back on every
 * request, and opening one (base64 and a copy) costs more than looking it up.
 */
const opened = new Map<string, Opened>()
const MAX_OPENED = 256

export const open = (value: string): Opened => {
  if (!value.startsWith(PREFIX)) return { signature: value }
  const known = opened.get(value)
  if (known !== undefined) return known
  const o = openSealed(value)
  opened.set(value, o)
  if (opened.size > MAX_OPENED) opened.delete(opened.keys().next().value as string)
  return o
}

const openSealed = (value: string): Opened => {
  const bytes = Buffer.from(value, "base64")
  const n = bytes[MAGIC.length]
  if (n === undefined || bytes.length < MAGIC.length + 1 + n) return { signature: value }
  return {
    issuer: bytes.subarray(MAGIC.length + 1, MAGIC.length + 1 + n).toString("utf8"),
    signature: bytes.subarray(MAGIC.length + 1 + n).toString("utf8")
  }
}

/** The value to send to `target`: the issuer's own as it came, a foreign one undefined, an unsealed one unchanged. */
export const forTarget = (value: string, target: string): string | undefined => {
  const o = open(value)
  return o.issuer === undefined || o.issuer === target ? o.signature : undefined
}

// ---------------------------------------------------------------- answers (canonical)

const sealBlock = (b: ContentBlock, issuer: string): ContentBlock => {
  if (b.type === "reasoning" && (b.signature || b.redacted || b.encrypted))
    return {
      ...b,
      ...(b.signature ? { signature: seal(issuer, b.signature) } : {}),
      ...(b.redacted ? { redacted: seal(issuer, b.redacted) } : {}),
      ...(b.encrypted ? { encrypted: seal(issuer, b.encrypted) } : {})
    }
  if (b.type === "tool_use" && b.signature) return { ...b, signature: seal(issuer, b.signature) }
  return b
}

export const sealResponse = (r: CanonicalResponse, issuer: string): CanonicalResponse =>
  r.content.some((b) => (b.type === "reasoning" && (b.signature || b.redacted || b.encrypted)) || (b.type === "tool_use" && b.signature))
    ? { ...r, content: r.content.map((b) => sealBlock(b, issuer)) }
    : r

export const sealEvent = (ev: StreamEvent, issuer: string): StreamEvent => {
  if (ev.type === "signature") return { ...ev, signature: seal(issuer, ev.signature) }
  if (ev.type === "block_start") {
    const b = ev.block
    if (b.type === "reasoning" && b.redacted) return { ...ev, block: { ...b, redacted: seal(issuer, b.redacted) } }
    if (b.type === "tool_use" && b.signature) return { ...ev, block: { ...b, signature: seal(issuer, b.signature) } }
  }
  return ev
}

export const sealEvents = (events: ReadonlyArray<StreamEvent>, issuer: string): ReadonlyArray<StreamEvent> => {
  for (let i = 0; i < events.length; i++) {
    const ev = events[i]!
    if (ev.type === "signature" || ev.type === "block_start") return events.map((e) => sealEvent(e, issuer))
  }
  return events
}

// ---------------------------------------------------------------- requests (canonical)

const bindBlock = (b: ContentBlock, target: string): ContentBlock | undefined => {
  if (b.type === "tool_use" && b.signature) {
    const s = forTarget(b.signature, target)
    if (s === b.signature) return b
    const { signature: _s, ...rest } = b
    return s === undefined ? rest : { ...rest, signature: s }
  }
  if (b.type !== "reasoning") return b
  if (b.redacted) {
    const r = forTarget(b.redacted, target)
    // Redacted thinking is unreadable anywhere but at its issuer.
    if (r === undefined) return undefined
    if (r !== b.redacted) b = { ...b, redacted: r }
  }
  if (b.encrypted) {
    const e = forTarget(b.encrypted, target)
    if (e === undefined) {
      const { encrypted: _e, itemId: _i, ...rest } = b
      return rest.text === "" && !rest.signature ? undefined : rest
    }
    if (e !== b.encrypted) b = { ...b, encrypted: e }
  }
  if (b.signature) {
    const s = forTarget(b.signature, target)
    if (s === undefined) {
      const { signature: _s, ...rest } = b
      return rest.text === "" && !rest.encrypted && !rest.redacted ? undefined : rest
    }
    if (s !== b.signature) b = { ...b, signature: s }
  }
  return b
}

const sealed = (b: ContentBlock): boolean =>
  (b.type === "tool_use" && isSealed(b.signature)) ||
  (b.type === "reasoning" && (isSealed(b.signature) || isSealed(b.redacted) || isSealed(b.encrypted)))

/** The conversation as `target` may receive it: its own reasoning state unsealed, others' dropped. */
export const bindMessages = (messages: ReadonlyArray<Message>, target: string): ReadonlyArray<Message> =>
  messages.some((m) => m.content.some(sealed))
    ? messages.map((m) => (m.content.some(sealed) ? { ...m, content: m.content.flatMap((b) => bindBlock(b, target) ?? []) } : m))
    : messages

// ---------------------------------------------------------------- same-format bodies

type Json = Record<string, unknown>
const arr = (v: unknown): Array<unknown> | undefined => (Array.isArray(v) ? v : undefined)

/** Seals the signature-bearing fields of one answer object (a whole answer or one stream event's data) in place; true when something
 * changed. */
const SEAL_ANSWER: Partial<Record<FormatId, (o: Json, issuer: string) => boolean>> = {
  anthropic: (o, issuer) => {
    let changed = false
    const block = (b: Json | undefined) => {
      if (!b) return
      if ((b["type"] === "thinking" || b["type"] === "signature_delta") && typeof b["signature"] === "string" && b["signature"] !== "") {
        b["signature"] = seal(issuer, b["signature"])
        changed = true
      }
      if (b["type"] === "redacted_thinking" && typeof b["data"] === "string") {
        b["data"] = seal(issuer, b["data"])
        changed = true
      }
    }
    for (const b of arr(o["content"]) ?? []) block(obj(b))
    for (const b of arr(obj(o["message"])?.["content"]) ?? []) block(obj(b))
    block(obj(o["content_block"]))
    block(obj(o["delta"]))
    return changed
  },
  "openai-responses": (o, issuer) => {
    let changed = false
    const item = (i: Json | undefined) => {
      // Reasoning items, and the compaction items of an upstream that compacts itself (docs/agents.md, "Codex compaction").
      if ((i?.["type"] === "reasoning" || i?.["type"] === "compaction") && typeof i["encrypted_content"] === "string") {
        i["encrypted_content"] = seal(issuer, i["encrypted_content"])
        changed = true
      }
    }
    for (const i of arr(o["output"]) ?? []) item(obj(i))
    for (const i of arr(obj(o["response"])?.["output"]) ?? []) item(obj(i))
    item(obj(o["item"]))
    return changed
  },
  gemini: (o, issuer) => {
    let changed = false
    const chunk = (c: Json | undefined) => {
      for (const cand of arr(c?.["candidates"]) ?? [])
        for (const p of arr(obj(obj(cand)?.["content"])?.["parts"]) ?? []) {
          const part = obj(p)
          if (part && typeof part["thoughtSignature"] === "string") {
            part["thoughtSignature"] = seal(issuer, part["thoughtSignature"])
            changed = true
          }
        }
    }
    // Gemini's streamGenerateContent without alt=sse answers a JSON array of chunks.
    if (Array.isArray(o)) for (const c of o) chunk(obj(c))
    else chunk(o)
    return changed
  }
}

/** Where a same-format stream event may carry reasoning state: only those frames are parsed. */
const MARKERS: Partial<Record<FormatId, RegExp>> = {
  anthropic: /"(signature|redacted_thinking)"/,
  "openai-responses": /"encrypted_content"/,
  gemini: /"thoughtSignature"/
}

/** Seals an answer the upstream gave in the client's own format (parsed JSON, changed in place). */
export const sealAnswer = (format: FormatId, answer: unknown, issuer: string): boolean => {
  const f = SEAL_ANSWER[format]
  const o = Array.isArray(answer) ? (answer as unknown as Json) : obj(answer)
  return f !== undefined && o !== undefined && f(o, issuer)
}

/** One passed-through stream event's data, sealed when it carries reasoning state (else the same string). */
export const sealFrameData = (format: FormatId, data: string, issuer: string): string => {
  const marker = MARKERS[format]
  if (marker === undefined || !marker.test(data)) return data
  let o: unknown
  try {
    o = JSON.parse(data)
  } catch {
    return data
  }
  return sealAnswer(format, o, issuer) ? JSON.stringify(o) : data
}

/** Whether a same-format body carries a sealed value where its format keeps reasoning state (walked, never stringified). */
const hasSeal = (format: FormatId, body: Json): boolean => {
  if (format === "anthropic")
    return (arr(body["messages"]) ?? []).some((m) =>
      (arr(obj(m)?.["content"]) ?? []).some((c) => {
        const b = obj(c)
        return (
          (b?.["type"] === "thinking" && (isSealed(b["signature"]) || b["signature"] === "")) ||
          (b?.["type"] === "redacted_thinking" && isSealed(b["data"]))
        )
      })
    )
  if (format === "openai-responses")
    return (arr(body["input"]) ?? []).some((i) => {
      const type = obj(i)?.["type"]
      return (type === "reasoning" || type === "compaction") && isSealed(obj(i)?.["encrypted_content"])
    })
  if (format === "gemini")
    return (arr(body["contents"]) ?? []).some((c) => (arr(obj(c)?.["parts"]) ?? []).some((p) => isSealed(obj(p)?.["thoughtSignature"])))
  return false
}

/** Whether an Anthropic request asks for thinking. */
const thinkingOn = (body: Json): boolean => obj(body["thinking"])?.["type"] === "enabled" || obj(body["thinking"])?.["type"] === "adaptive"

/** An assistant turn that calls a tool without starting with thinking (what Anthropic refuses while thinking is on). */
const unsignedToolTurn = (m: unknown): boolean => {
  const c = arr(obj(m)?.["content"])
  return (
    obj(m)?.["role"] === "assistant" &&
    c !== undefined &&
    c.some((b) => obj(b)?.["type"] === "tool_use") &&
    obj(c[0])?.["type"] !== "thinking" &&
    obj(c[0])?.["type"] !== "redacted_thinking"
  )
}

/**
 * Anthropic refuses a tool-use turn without its thinking while thinking is on: a turn whose
 * thinking was dropped (another account's), or one a model without thinking answered (a fallback
 * to another family, a conversation begun elsewhere). Thinking is then off for this request, and
 * the thinking left in earlier turns goes with it, as the translated path does.
 */
const withoutUnsignedThinking = (body: Json): Json => {
  if (!thinkingOn(body)) return body
  const messages = arr(body["messages"])
  if (!messages || !messages.some(unsignedToolTurn)) return body
  const stripped = messages.map((m) => {
    const mo = obj(m)
    const c = arr(mo?.["content"])
    if (!mo || mo["role"] !== "assistant" || !c) return m
    const left = c.filter((b) => obj(b)?.["type"] !== "thinking" && obj(b)?.["type"] !== "redacted_thinking")
    return { ...mo, content: left.length > 0 ? left : [{ type: "text", text: "(empty)" }] }
  })
  return { ...body, messages: stripped, thinking: { type: "disabled" } }
}

/**
 * A same-format request body as `target` may receive it: sealed reasoning state of the target's
 * own unsealed, others' dropped (the reasoning text kept where the format takes it). Anthropic
 * refuses a tool-use turn whose thinking is gone while thinking is on: thinking is then turned
 * off for this request, as the translated path does.
 */
export const bindBody = (format: FormatId, body: Json, target: string): Json => {
  if (!hasSeal(format, body)) return format === "anthropic" ? withoutUnsignedThinking(body) : body
  if (format === "anthropic") {
    const messages = arr(body["messages"])
    if (!messages) return body
    const next = messages.map((m) => {
      const mo = obj(m)
      const content = arr(mo?.["content"])
      if (!mo || mo["role"] !== "assistant" || !content) return m
      const kept = content.flatMap((c) => {
        const b = obj(c)
        if (b?.["type"] === "thinking" && typeof b["signature"] === "string") {
          // An empty signature: reasoning another family gave (its signature, if any, was elsewhere), never valid here.
          const s = b["signature"] === "" ? undefined : forTarget(b["signature"], target)
          if (s === undefined) return []
          return [{ ...b, signature: s }]
        }
        if (b?.["type"] === "redacted_thinking" && typeof b["data"] === "string") {
          const d = forTarget(b["data"], target)
          if (d === undefined) return []
          return [{ ...b, data: d }]
        }
        return [c]
      })
      return { ...mo, content: kept.length > 0 ? kept : [{ type: "text", text: "(empty)" }] }
    })
    return withoutUnsignedThinking({ ...body, messages: next })
  }
  if (format === "openai-responses") {
    const input = arr(body["input"])
    if (!input) return body
    return {
      ...body,
      input: input.flatMap((i) => {
        const io = obj(i)
        if ((io?.["type"] !== "reasoning" && io?.["type"] !== "compaction") || typeof io["encrypted_content"] !== "string") return [i]
        const e = forTarget(io["encrypted_content"], target)
        // Another account's reasoning or compaction item is not found there (its id) nor readable (its content).
        return e === undefined ? [] : [{ ...io, encrypted_content: e }]
      })
    }
  }
  if (format === "gemini") {
    const contents = arr(body["contents"])
    if (!contents) return body
    return {
      ...body,
      contents: contents.map((c) => {
        const co = obj(c)
        const parts = arr(co?.["parts"])
        if (!co || !parts) return c
        return {
          ...co,
          parts: parts.map((p) => {
            const po = obj(p)
            const s = str(po?.["thoughtSignature"])
            if (!po || s === undefined) return p
            const t = forTarget(s, target)
            if (t !== undefined) return { ...po, thoughtSignature: t }
            const { thoughtSignature: _t, ...rest } = po
            return rest
          })
        }
      })
    }
  }
  return body
}
