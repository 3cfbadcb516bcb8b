/**
 * `POST /v1/realtime/client_secrets` (also `/realtime/client_secrets`, `/api/v1/realtime/client_secrets`):
 * an ephemeral client secret for a browser's realtime session, minted by the gateway for the
 * calling key, as OpenAI's API mints them (docs/realtime.md, "Ephemeral client secrets").
 */
import * as Effect from "effect/Effect"
import { InferenceError } from "../../kernel/errors.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { type HttpRequestContext, sendJson, withJsonObject } from "../io.js"
import { DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS, type RealtimeSecretsShape } from "../RealtimeSecrets.js"
import type { RouteDef } from "./types.js"

const MIN_TTL_SECONDS = 10

const invalid = (message: string, param: string) =>
  new InferenceError({ status: 400, kind: "invalid_request", code: "invalid_value", message, param })

/** The secret's lifetime from `expires_after: { anchor: "created_at", seconds }` (default 60 s, 10 to 600). */
export const ttlOf = (body: Record<string, unknown>): number | InferenceError => {
  const after = body["expires_after"]
  if (after === undefined || after === null) return DEFAULT_TTL_SECONDS
  if (typeof after !== "object" || Array.isArray(after)) return invalid("expires_after must be an object", "expires_after")
  const { anchor, seconds } = after as Record<string, unknown>
  if (anchor !== undefined && anchor !== "created_at") return invalid('expires_after.anchor must be "created_at"', "expires_after.anchor")
  if (seconds === undefined) return DEFAULT_TTL_SECONDS
  if (typeof seconds !== "number" || !Number.isInteger(seconds) || seconds < MIN_TTL_SECONDS || seconds > MAX_TTL_SECONDS)
    return invalid(`expires_after.seconds must be an integer from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS}`, "expires_after.seconds")
  return seconds
}

const mint = (secrets: RealtimeSecretsShape) => (ctx: HttpRequestContext) =>
  withJsonObject(ctx, (body) => {
    const ttl = ttlOf(body)
    if (ttl instanceof InferenceError) return Effect.fail(ttl)
    const session = body["session"]
    if (session !== undefined && (session === null || typeof session !== "object" || Array.isArray(session)))
      return Effect.fail(invalid("session must be an object", "session"))
    const minted = secrets.mint(ctx.apiKeyId, ttl, session as Record<string, unknown> | undefined)
    sendJson(ctx, 200, { value: minted.value, expires_at: minted.expiresAt, session: session ?? { type: "realtime" } })
    return Effect.void
  })

export const realtimeRoutes = (secrets: RealtimeSecretsShape | undefined): ReadonlyArray<RouteDef> =>
  secrets === undefined
    ? []
    : ["/v1/realtime/client_secrets", "/realtime/client_secrets", "/api/v1/realtime/client_secrets"].map((path) => ({
        method: "POST" as const,
        path,
        format: openAiChat,
        handle: mint(secrets),
        summary: "An ephemeral client secret for a browser's realtime session (`/v1/realtime`), bound to the calling key; docs/realtime.md."
      }))
