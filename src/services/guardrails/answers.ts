/**
 * The output side of the guardrails: an `AnswerRewrite` that sanitizes what the upstream wrote and restores the request's
 * PII placeholders, in whole answers and streams of every format (docs/guardrails.md#response-sanitization).
 */
import type { CanonicalError, FormatId } from "../../domain/canonical.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import type { AnswerRewrite } from "../../kernel/hookEvents.js"
import {
  findPii,
  HOLD_WINDOW,
  MAX_HOLD,
  mayHavePii,
  type PiiKind,
  type PiiMatch,
  type PlaceholderMap,
  placeholderTail,
  redactedMark,
  restorePlaceholders
} from "./pii.js"
import { type Path, setPath, setPaths, type Slot, WALKERS } from "./walkers.js"

export type ResponseMode = "redact" | "warn" | "block"

export interface AnswerGuard {
  readonly format: FormatId
  readonly model: string
  readonly requestId: string
  /** The request's placeholders to put back (undefined: none were made). */
  readonly restore: PlaceholderMap | undefined
  /** Response sanitization (undefined: off). */
  readonly sanitize: ResponseMode | undefined
  /** Headers every answer carries (the injection guard's warning). */
  readonly headers: Readonly<Record<string, string>> | undefined
  /** Personal data found in the answer (once per kind and request). */
  readonly found: (kind: PiiKind, action: ResponseMode) => void
}

export const GUARDRAIL_HEADER = "x-gateway-guardrail"
export const RESPONSE_BLOCK_STATUS = 422

class Blocked {
  constructor(readonly kind: PiiKind) {}
}

const blockError = (kind: PiiKind): CanonicalError => ({
  status: RESPONSE_BLOCK_STATUS,
  kind: "invalid_request",
  code: "pii_in_response",
  message: `the answer was blocked by the gateway's response guardrail: it contained personal data (pii-response:${kind.toLowerCase()})`
})

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v)

/** One request's answer transform. */
const makeText = (g: AnswerGuard, warned: Set<PiiKind>) => {
  const seen = (kind: PiiKind, action: ResponseMode) => {
    if (warned.has(kind)) return
    warned.add(kind)
    g.found(kind, action)
  }
  /** Response sanitization, then placeholders put back (the client's own values are not the upstream's data). */
  const apply = (text: string, matches: ReadonlyArray<PiiMatch> | undefined, json: boolean): string => {
    let out = text
    if (g.sanitize !== undefined && matches !== undefined && matches.length !== 0) {
      for (const m of matches) seen(m.kind, g.sanitize)
      if (g.sanitize === "block") throw new Blocked(matches[0]!.kind)
      if (g.sanitize === "redact") {
        let r = ""
        let at = 0
        for (const m of matches) {
          r += text.slice(at, m.start) + redactedMark(m.kind)
          at = m.end
        }
        out = r + text.slice(at)
      }
    }
    return g.restore ? restorePlaceholders(out, g.restore, json) : out
  }
  const matchesOf = (text: string): Array<PiiMatch> | undefined =>
    g.sanitize !== undefined && mayHavePii(text) ? findPii(text) : undefined
  /** A complete text. */
  const whole = (text: string, json: boolean): string => apply(text, matchesOf(text), json)
  /**
   * A channel's text so far (`buffer`): what may go out now, and what is kept back (a match that
   * could still grow, the last `HOLD_WINDOW` characters, a placeholder's beginning).
   */
  const partial = (buffer: string, json: boolean): { out: string; kept: string } => {
    let cut = buffer.length
    let matches: Array<PiiMatch> | undefined
    if (g.sanitize !== undefined) {
      cut = Math.max(0, buffer.length - HOLD_WINDOW)
      matches = mayHavePii(buffer) ? findPii(buffer) : []
      for (const m of matches) if (m.end > cut && m.start < cut) cut = m.start
      // Bounded: beyond MAX_HOLD characters kept, text goes out (docs/guardrails.md, limits).
      if (buffer.length - cut > MAX_HOLD) cut = buffer.length - MAX_HOLD
      matches = matches.filter((m) => m.end <= cut)
    }
    if (g.restore) {
      const tail = placeholderTail(buffer.slice(0, cut))
      if (tail !== -1) cut = tail
      if (matches) matches = matches.filter((m) => m.end <= cut)
    }
    return { out: apply(buffer.slice(0, cut), matches, json), kept: buffer.slice(cut) }
  }
  return { whole, partial }
}

/** An answer's JSON with every slot transformed; the same text when nothing changed. */
const rewriteJson = (text: string, slotsOf: (o: Obj) => Array<Slot>, transform: (s: string, json: boolean) => string): string => {
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch {
    return text
  }
  if (!isObj(data)) return text
  const changes: Array<readonly [Path, string]> = []
  for (const slot of slotsOf(data)) {
    const next = transform(slot.text, slot.json === true)
    if (next !== slot.text) changes.push([slot.path, next])
  }
  return changes.length === 0 ? text : JSON.stringify(setPaths(data, changes))
}

/** Whether an event ends its choice or the answer (the held text goes into it rather than after it). */
const finalEvent = (data: Obj): boolean => {
  if (data["done"] === true) return true
  for (const key of ["choices", "candidates"]) {
    const list = data[key]
    if (Array.isArray(list))
      for (const c of list) if (isObj(c) && ((c["finish_reason"] ?? null) !== null || (c["finishReason"] ?? null) !== null)) return true
  }
  return false
}

interface Held {
  text: string
  readonly json: boolean
  /** The channel's last delta event (its data as JSON text, the slot's path), cloned to flush what was held. */
  template: { readonly event: string | undefined; readonly data: string; readonly path: Path }
}

/** The rewrite for one request. */
export const answerRewrite = (g: AnswerGuard): AnswerRewrite => {
  const walkers = WALKERS[g.format]
  const client = FORMATS[g.format]
  const warned = new Set<PiiKind>()
  const text = makeText(g, warned)
  const transforms = g.restore !== undefined || g.sanitize !== undefined
  const withHeaders = (h: Readonly<Record<string, string | number>>, extra?: string): Readonly<Record<string, string | number>> => {
    const values = [g.headers?.[GUARDRAIL_HEADER], extra].filter((v) => v !== undefined && v !== "")
    return values.length === 0 ? h : { ...h, [GUARDRAIL_HEADER]: values.join(", ") }
  }
  const warning = (): string =>
    g.sanitize === "warn" && warned.size !== 0 ? [...warned].map((k) => `pii-response:${k.toLowerCase()}`).join(", ") : ""

  // ------------------------------------------------------------ streams
  const held = new Map<string, Held>()
  let framing: "sse" | "ndjson" | "array" | undefined
  let arrayStarted = false
  let blocked: Blocked | undefined

  const serialize = (event: string | undefined, data: string): string => {
    if (framing === "sse") return (event ? `event: ${event}\n` : "") + `data: ${data}\n\n`
    if (framing === "ndjson") return `${data}\n`
    const prefix = arrayStarted ? "\r\n," : "["
    arrayStarted = true
    return prefix + data
  }

  /** What was held on `channel`, as a delta event of its own. */
  const flushOne = (channel: string, h: Held): string => {
    held.delete(channel)
    if (h.text === "") return ""
    const out = text.whole(h.text, h.json)
    if (out === "") return ""
    const data = JSON.parse(h.template.data) as Obj
    for (const slot of walkers.event(h.template.event, data)) setPath(data, slot.path, "")
    setPath(data, h.template.path, out)
    return serialize(h.template.event, JSON.stringify(data))
  }
  const flushExcept = (keep: ReadonlySet<string> | undefined): string => {
    let out = ""
    for (const [channel, h] of [...held]) if (!keep?.has(channel)) out += flushOne(channel, h)
    return out
  }

  /** One event's data: what goes out for it (held text of other channels first). */
  const onEvent = (event: string | undefined, raw: string, original: () => string): string => {
    let data: unknown
    try {
      data = raw.startsWith("{") ? JSON.parse(raw) : undefined
    } catch {
      data = undefined
    }
    if (!isObj(data)) return flushExcept(undefined) + original()
    const slots = walkers.event(event, data)
    const final = finalEvent(data)
    const channels = new Set<string>()
    for (const s of slots) if (s.channel !== undefined) channels.add(s.channel)
    const out = flushExcept(channels)
    if (slots.length === 0) return out + original()
    let changed = false
    for (const slot of slots) {
      let next: string
      if (slot.channel !== undefined) {
        const h = held.get(slot.channel)
        const buffer = (h?.text ?? "") + slot.text
        const template = { event, data: raw, path: slot.path }
        if (final) {
          held.delete(slot.channel)
          next = text.whole(buffer, slot.json === true)
        } else {
          const { out: now, kept } = text.partial(buffer, slot.json === true)
          next = now
          if (h) {
            h.text = kept
            h.template = template
          } else held.set(slot.channel, { text: kept, json: slot.json === true, template })
        }
      } else next = text.whole(slot.text, slot.json === true)
      if (next !== slot.text) {
        setPath(data, slot.path, next)
        changed = true
      }
    }
    return out + (changed ? serialize(event, JSON.stringify(data)) : original())
  }

  const errorText = (kind: PiiKind): string => {
    const e = blockError(kind)
    if (framing === "array") {
      const element = (arrayStarted ? "\r\n," : "[") + JSON.stringify(client.encodeError(e)) + "\r\n]"
      arrayStarted = true
      return element
    }
    return client.streamEncoder({ model: g.model, requestId: g.requestId }).push({ type: "error", error: e })
  }

  /** Every event of one write, rewritten. */
  const rewriteFrames = (chunk: string, atEnd: boolean): string => {
    if (framing === undefined)
      framing = client.framing === "ndjson" ? "ndjson" : g.format === "gemini" && /^\s*\[/.test(chunk) ? "array" : "sse"
    let out = ""
    if (framing === "sse") {
      // Whole events: blocks separated by a blank line.
      const blocks = chunk.split(/\n\n/)
      const rest = blocks.pop() ?? ""
      for (const block of blocks) {
        if (block === "" || block.startsWith(":")) {
          out += block + "\n\n"
          continue
        }
        let event: string | undefined
        const data: Array<string> = []
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim()
          else if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5))
        }
        out += onEvent(event, data.join("\n"), () => block + "\n\n")
      }
      out += rest
    } else if (framing === "ndjson") {
      const lines = chunk.split("\n")
      const rest = lines.pop() ?? ""
      for (const line of lines) out += line.trim() === "" ? line + "\n" : onEvent(undefined, line, () => line + "\n")
      out += rest
    } else {
      // One JSON array: "[" first, elements after "\r\n,", "\r\n]" (or "]") last.
      let body = chunk
      let close = ""
      const closing = /\r?\n?\]\s*$/.exec(body)
      if (closing && (atEnd || body.trim() === "]" || body.endsWith("\r\n]"))) {
        close = "]"
        body = body.slice(0, closing.index)
      }
      if (body.startsWith("[")) body = body.slice(1)
      for (const element of body.split("\r\n,")) {
        const e = element.replace(/^\r?\n?,?/, "")
        if (e.trim() === "") continue
        out += onEvent(undefined, e, () => serialize(undefined, e))
      }
      if (close) {
        out += flushExcept(undefined)
        out += arrayStarted ? "\r\n]" : "[]"
        arrayStarted = true
      }
    }
    return out
  }

  const frame = (chunk: string): string => {
    if (blocked) return ""
    try {
      return rewriteFrames(chunk, false)
    } catch (e) {
      if (!(e instanceof Blocked)) throw e
      blocked = e
      held.clear()
      return errorText(e.kind)
    }
  }

  const rewrite: AnswerRewrite = {
    head: (h) => withHeaders(h),
    whole: (a) => {
      if (!transforms || a.status < 200 || a.status >= 300) return { ...a, headers: withHeaders(a.headers) }
      try {
        const body = rewriteJson(a.body, walkers.answer, text.whole)
        return { status: a.status, headers: withHeaders(a.headers, warning()), body }
      } catch (e) {
        if (!(e instanceof Blocked)) throw e
        const err = blockError(e.kind)
        const body = JSON.stringify(client.encodeError(err))
        return { status: err.status, headers: { ...withHeaders(a.headers), "content-type": "application/json" }, body }
      }
    },
    ...(transforms
      ? {
          frame,
          end: (tail: string, error: string | null) => {
            if (blocked) return { text: "", error: error ?? blockError(blocked.kind).message }
            let out: string
            try {
              out = rewriteFrames(tail, true)
              out += framing === "array" ? "" : flushExcept(undefined)
            } catch (e) {
              if (!(e instanceof Blocked)) throw e
              blocked = e
              held.clear()
              return { text: errorText(e.kind), error: error ?? blockError(e.kind).message }
            }
            const w = warning()
            // Streams cannot take a header after the head: the warning is an SSE comment (ignored by SDKs) before the end.
            if (w !== "" && framing === "sse") out = `: ${GUARDRAIL_HEADER} ${w}\n\n` + out
            return { text: out, error }
          }
        }
      : {})
  }
  return rewrite
}
