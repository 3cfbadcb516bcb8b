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
  const prefix = JSON.stringify([apiKeyId, model, system, first ?? null])
  if (prefix.length > REMEMBERED_PREFIX_CHARS) return sessionOfPrefix(prefix)
  let id = remembered.get(prefix)
  if (id === undefined) {
    id = sessionOfPrefix(prefix)
    remembered.set(prefix, id)
  }
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

/** The request's derived session, computed once per request (the answer's header and the plan read it). */
export const conversationOf = (ctx: RequestContext, model: string, body: Readonly<Record<string, unknown>>): string =>
  (ctx.conversation ??= derivedSession(ctx.apiKeyId, model, body))
