import * as crypto from "node:crypto"
import type * as http from "node:http"
import { BoundedMap } from "../kernel/BoundedMap.js"
import type { RequestContext } from "../kernel/request.js"

/**
 * Headers that carry a client's own conversation id: the gateway's `X-Session-Id` (and its
 * underscore form), Claude Code's, Codex's, and a session-affinity header some agents send.
 */
const SESSION_HEADERS = [
  "x-session-id",
  "x_session_id",
  "x-claude-code-session-id",
  "session-id",
  "session_id",
  "x-session-affinity"
] as const

/** Longest session id kept (longer ones are hashed). */
const MAX_LENGTH = 128

const clean = (v: string | Array<string> | undefined): string | undefined => {
  const s = (Array.isArray(v) ? v[0] : v)?.trim()
  if (!s) return undefined
  return s.length <= MAX_LENGTH ? s : `sess_${crypto.createHash("sha256").update(s).digest("hex").slice(0, 32)}`
}

/** A session id the client chose (header or Codex's `prompt_cache_key`): it makes routing sticky. */
export const explicitSession = (req: http.IncomingMessage, body?: Readonly<Record<string, unknown>>): string | undefined => {
  // An indexed loop: no iterator per request.
  for (let i = 0; i < SESSION_HEADERS.length; i++) {
    const v = clean(req.headers[SESSION_HEADERS[i]!])
    if (v) return v
  }
  const key = body?.["prompt_cache_key"]
  return typeof key === "string" ? clean(key) : undefined
}

/**
 * Without one, a session id derived from what stays the same across a conversation's requests:
 * the key, the model, the system prompt and the first message (echoed in X-Gateway-Session-Id):
 * the conversation's stable prefix, which keeps it where its prompt cache is warm (`conversationOf`).
 */
export const derivedSession = (apiKeyId: string | null, model: string, body: Readonly<Record<string, unknown>>): string => {
  const list = body["messages"] ?? body["input"] ?? body["contents"] ?? body["prompt"]
  const first = Array.isArray(list) ? list[0] : list
  const system = body["system"] ?? body["instructions"] ?? body["systemInstruction"] ?? null
  const message = plainMessage(first)
  if (message !== undefined && (system === null || typeof system === "string")) {
    const seen = byFirstText.get(message.content)
    if (seen !== undefined && seen.apiKeyId === apiKeyId && seen.model === model && seen.system === system && seen.role === message.role)
      return seen.id
  }
  const prefix = JSON.stringify([apiKeyId, model, system, first ?? null])
  if (prefix.length > REMEMBERED_PREFIX_CHARS) return sessionOfPrefix(prefix)
  let id = remembered.get(prefix)
  if (id === undefined) {
    id = sessionOfPrefix(prefix)
    remembered.set(prefix, id)
  }
  if (message !== undefined && (system === null || typeof system === "string"))
    byFirstText.set(message.content, { apiKeyId, model, system, role: message.role, id })
  return id
}

const sessionOfPrefix = (prefix: string): string => `sess_${crypto.hash("sha256", prefix, "hex").slice(0, 24)}`

/**
 * The derived sessions of the conversations seen last, by their prefix's text: every request of a
 * conversation sends the same prefix, so its id is hashed once rather than per request (a SHA-256
 * and three strings). Only prefixes up to REMEMBERED_PREFIX_CHARS are kept (a few MB at most).
 */
const REMEMBERED_PREFIX_CHARS = 4096
const remembered = new BoundedMap<string, string>({ maxEntries: 512 })

/**
 * A first message of the usual shape, `{ role, content }` in that order with text in both and
 * nothing else: its prefix's text is then decided by its parts (equal parts, equal JSON).
 */
const plainMessage = (first: unknown): { readonly role: string; readonly content: string } | undefined => {
  if (typeof first !== "object" || first === null || Array.isArray(first)) return undefined
  const m = first as Record<string, unknown>
  if (typeof m["role"] !== "string" || typeof m["content"] !== "string") return undefined
  // Exactly these two keys, in this order (for-in reads them without an array of keys).
  let n = 0
  for (const k in m) {
    if (k !== (n === 0 ? "role" : n === 1 ? "content" : undefined)) return undefined
    n++
  }
  return n === 2 ? (m as { readonly role: string; readonly content: string }) : undefined
}

/**
 * The derived sessions of the conversations seen last whose first message is a `plainMessage`
 * and whose system prompt is text or absent, by that message's text, with the other parts of
 * their prefix: a request of a known conversation is matched by comparing its parts, without the
 * prefix's JSON text made each time (a string the size of the first message and system prompt).
 * Only prefixes `remembered` keeps are here, so the same id either way.
 */
interface SeenPrefix {
  readonly apiKeyId: string | null
  readonly model: string
  readonly system: string | null
  readonly role: string
  readonly id: string
}
const byFirstText = new BoundedMap<string, SeenPrefix>({ maxEntries: 512 })

/** The request's derived session, computed once per request (the answer's header and the plan read it). */
export const conversationOf = (ctx: RequestContext, model: string, body: Readonly<Record<string, unknown>>): string =>
  (ctx.conversation ??= derivedSession(ctx.apiKeyId, model, body))
