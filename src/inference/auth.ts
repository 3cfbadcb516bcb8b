import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as http from "node:http"
import type { ApiKeysShape } from "../services/auth/ApiKeys.js"
import { type InferenceAccess, originAllowed, throughTunnel } from "../platform/config/AppConfig.js"
import type { FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import { bearerToken, trimmedHeader as header } from "../platform/http/request.js"
import { InferenceError } from "../kernel/errors.js"

const QUERY_KEYS = ["token", "apiKey", "api_key", "key"] as const

/**
 * The key a client presented, wherever its SDK puts it: `Authorization: Bearer` (OpenAI and
 * most clients), `x-api-key` (Anthropic), `x-goog-api-key` (Google), or the query parameters
 * `token`, `apiKey`, `api_key`, `key` for clients that cannot set headers.
 */
export const presentedKey = (req: http.IncomingMessage, query: URLSearchParams, preset?: string): string | undefined => {
  if (preset) return preset
  const bearer = bearerToken(header(req, "authorization"))
  if (bearer) return bearer
  const direct = header(req, "x-api-key") ?? header(req, "x-goog-api-key")
  if (direct) return direct
  for (const k of QUERY_KEYS) {
    const v = query.get(k)?.trim()
    if (v) return v
  }
  return undefined
}

/**
 * Authenticates an inference request and returns its key's id. A valid key is required when `REQUIRE_API_KEY` is on, on a
 * non-loopback bind (unless opted out) and from a foreign browser origin (docs/auth.md, "Inference routes").
 */
export const authenticateInference = (
  keys: ApiKeysShape,
  flags: FeatureFlagsShape,
  access: InferenceAccess,
  req: http.IncomingMessage,
  query: URLSearchParams,
  /** A key carried in the path (tokenized editor routes). */
  preset?: string
): Effect.Effect<string | null, InferenceError> => {
  const presented = presentedKey(req, query, preset)
  // Every request passes here: with the keys cached and fresh, the key is hashed and looked up once.
  if (!presented) return unrecognised(flags, access, req, presented)
  const recognised = (record: Option.Option<{ readonly id: string }>) =>
    Option.isSome(record) ? Effect.succeed(record.value.id) : unrecognised(flags, access, req, presented)
  const known = keys.peekVerify(presented)
  return known !== undefined ? recognised(known) : Effect.flatMap(keys.verify(presented), recognised)
}

/**
 * `authenticateInference` without an effect (the common path): the key's id, null for a request
 * let in without a recognised key, or undefined when that cannot be decided from memory or the
 * request is refused (the pipeline then decides, and answers the refusal).
 */
export const authenticateNow = (
  keys: ApiKeysShape,
  flags: FeatureFlagsShape,
  access: InferenceAccess,
  req: http.IncomingMessage,
  query: URLSearchParams
): string | null | undefined => {
  const presented = presentedKey(req, query)
  if (presented) {
    const known = keys.peekVerify(presented)
    if (known === undefined) return undefined
    if (Option.isSome(known)) return known.value.id
  }
  // Unrecognised: let in only where `unrecognised` would let it in, decided from memory.
  if (!originAllowed(header(req, "origin"), access.allowedOrigins)) return undefined
  const required = flags.peekEnabled("REQUIRE_API_KEY")
  if (required !== false) return undefined
  if (access.keyRequiredThroughTunnel && throughTunnel(req.headers)) return undefined
  return access.keyRequiredByBind ? undefined : null
}

const unrecognised = Effect.fnUntraced(function* (
  flags: FeatureFlagsShape,
  access: InferenceAccess,
  req: http.IncomingMessage,
  presented: string | undefined
) {
  const origin = header(req, "origin")
  if (!originAllowed(origin, access.allowedOrigins)) {
    return yield* new InferenceError({
      status: 403,
      kind: "permission",
      code: "origin_not_allowed",
      message: `browser requests from ${origin} need a gateway API key (or add the origin to GATEWAY_ALLOWED_ORIGINS)`
    })
  }
  if (!(yield* flags.enabled("REQUIRE_API_KEY"))) {
    if (access.keyRequiredThroughTunnel && throughTunnel(req.headers))
      return yield* new InferenceError({
        status: 401,
        kind: "authentication",
        code: "invalid_api_key",
        message: `${presented ? "Invalid API key: the key is unknown, disabled or expired." : "Missing API key."} This request came through a tunnel from the internet, so inference needs a gateway API key even though REQUIRE_API_KEY is off: create one with \`gateway keys add\` and send it as 'Authorization: Bearer <key>'.`
      })
    if (!access.keyRequiredByBind) return null
    return yield* new InferenceError({
      status: 401,
      kind: "authentication",
      code: "invalid_api_key",
      message: `${presented ? "Invalid API key: the key is unknown, disabled or expired." : "Missing API key."} This gateway listens on ${access.host}, reachable from other machines, so inference needs a gateway API key even though REQUIRE_API_KEY is off: create one with \`gateway keys add\` and send it as 'Authorization: Bearer <key>'. To serve without keys on this address anyway, the operator sets GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true.`
    })
  }
  return yield* new InferenceError({
    status: 401,
    kind: "authentication",
    code: "invalid_api_key",
    message: presented
      ? "Invalid API key: the key is unknown, disabled or expired."
      : "Missing API key: send it as 'Authorization: Bearer <key>' (or x-api-key, x-goog-api-key, or the api_key query parameter)."
  })
})
