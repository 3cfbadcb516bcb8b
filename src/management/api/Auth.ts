import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { AdminAuth, type AdminAuthShape, SESSION_COOKIE } from "../../services/auth/AdminAuth.js"
import { type ApiKeyRecord, ApiKeys, type ApiKeysShape } from "../../services/auth/ApiKeys.js"
import { safeEqual } from "../../services/auth/password.js"
import { Forbidden, Unauthorized } from "../../domain/errors.js"
import { isLoopbackHost, throughTunnel } from "../../platform/config/AppConfig.js"
import { bearerToken } from "../../platform/http/request.js"
import { Settings, type SettingsShape } from "../../platform/settings/Settings.js"
import type * as http from "node:http"
import { notePrincipal } from "./compliance/AuditSlot.js"
import { ManagementAuth, PlaygroundAuth, type PrincipalShape } from "./Principal.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** The Origin of a browser request must be this server's own (Host header). */
const crossOrigin = (headers: Readonly<Record<string, string | undefined>>): boolean => {
  const origin = headers["origin"]
  if (!origin || origin === "null") return origin === "null"
  try {
    return new URL(origin).host !== headers["host"]
  } catch {
    return true
  }
}

/**
 * With `requireLogin` off, a caller without credentials is let in only when it is this machine
 * talking to the gateway directly: a loopback socket, no forwarding header (a local reverse proxy
 * would make every remote client look local), a loopback Host (DNS rebinding), and for writes no
 * Origin but a loopback one (a web page in the operator's browser cannot post cross-site).
 */
export const directLocal = (source: http.IncomingMessage): boolean => {
  const socket = source.socket?.remoteAddress
  if (!socket || !isLoopbackHost(socket)) return false
  const h = source.headers
  if (h["x-forwarded-for"] !== undefined || h["forwarded"] !== undefined || h["x-real-ip"] !== undefined || throughTunnel(h)) return false
  const host = h["host"]
  if (!host) return false
  const hostname = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.split(":")[0]!
  if (!isLoopbackHost(hostname)) return false
  const origin = h["origin"]
  if (origin !== undefined) {
    try {
      if (new URL(origin).host !== host) return false
    } catch {
      return false
    }
  }
  return true
}

/** A request as authentication reads it, from the management plane or from the MCP endpoint. */
export interface AuthRequest {
  readonly method: string
  readonly headers: Readonly<Record<string, string | undefined>>
  /** The `gw_session` cookie, if sent. */
  readonly sessionCookie: string | undefined
  readonly source: http.IncomingMessage
}

/**
 * Who is calling, before any decision about what they may do: any valid gateway key (admin or
 * not), an admin cookie session (with its CSRF rules), this machine directly while
 * `requireLogin` is off, or nobody. Credentials that were sent and are wrong fail (401/403).
 */
export type Identity =
  | { readonly kind: "api-key"; readonly key: ApiKeyRecord }
  | { readonly kind: "session" }
  | { readonly kind: "local" }
  | { readonly kind: "none" }

export const makeIdentify =
  (keys: ApiKeysShape, admin: AdminAuthShape, settings: SettingsShape) =>
  (req: AuthRequest): Effect.Effect<Identity, Unauthorized | Forbidden> =>
    Effect.gen(function* () {
      const token = bearerToken(req.headers["authorization"])
      if (token) {
        const key = yield* keys.verify(token)
        if (Option.isNone(key)) return yield* new Unauthorized({ message: "invalid, disabled or expired API key" })
        return { kind: "api-key" as const, key: key.value }
      }
      if (req.sessionCookie) {
        const session = yield* admin.session(req.sessionCookie)
        if (Option.isNone(session)) return yield* new Unauthorized({ message: "session expired or invalid; log in again" })
        if (UNSAFE.has(req.method)) {
          if (crossOrigin(req.headers)) return yield* new Forbidden({ message: "cross-origin request refused" })
          const csrf = req.headers["x-csrf-token"]
          if (!csrf || !safeEqual(csrf, session.value.csrfToken)) {
            return yield* new Forbidden({ message: "missing or wrong X-CSRF-Token for this session (GET /api/auth/session returns it)" })
          }
        }
        return { kind: "session" as const }
      }
      if (!settings.current().requireLogin && directLocal(req.source)) return { kind: "local" as const }
      return { kind: "none" as const }
    })

/**
 * An authentication middleware over `identify`: a session and a direct local caller are principals
 * as they are; `apiKey` decides what a valid key may do and `nobody` what no credential gets.
 * The principal is noted for the request's audit row (compliance/AuditSlot.ts).
 */
const authenticate = (
  identify: ReturnType<typeof makeIdentify>,
  decide: {
    readonly apiKey: (key: ApiKeyRecord) => Effect.Effect<PrincipalShape, Unauthorized>
    readonly nobody: (req: HttpServerRequest.HttpServerRequest) => Effect.Effect<PrincipalShape, Unauthorized>
  }
) =>
  Effect.tap(
    Effect.gen(function* () {
      const req = yield* HttpServerRequest.HttpServerRequest
      const who = yield* identify({
        method: req.method,
        headers: req.headers,
        sessionCookie: req.cookies[SESSION_COOKIE],
        source: req.source as http.IncomingMessage
      })
      switch (who.kind) {
        case "api-key":
          return yield* decide.apiKey(who.key)
        case "session":
          return { kind: "session" as const, id: "admin" }
        case "local":
          return { kind: "local" as const, id: "local" }
        case "none":
          return yield* decide.nobody(req)
      }
    }),
    notePrincipal
  )

/**
 * `ManagementAuth`'s implementation. Not the tag's static `layer`: the tags (Principal.ts) are what
 * every area's Api.ts imports, and this reads the services; `<what>Layer` instead.
 */
export const managementAuthLayer = Layer.effect(
  ManagementAuth,
  Effect.map(Effect.all([ApiKeys, AdminAuth, Settings]), ([keys, admin, settings]) =>
    authenticate(makeIdentify(keys, admin, settings), {
      // Not an admin key is no management authentication at all: 401, as without a key.
      apiKey: (key) =>
        key.scopes.includes("admin")
          ? Effect.succeed({ kind: "api-key" as const, id: key.id })
          : Effect.fail(new Unauthorized({ message: "this API key lacks the admin scope needed for management routes" })),
      nobody: () =>
        Effect.fail(
          new Unauthorized({
            message:
              "management authentication required: log in (POST /api/auth/login) or send an admin API key as 'Authorization: Bearer <key>'"
          })
        )
    })
  )
)

/** `PlaygroundAuth`'s implementation (beside `managementAuthLayer`, for the same reason). */
export const playgroundAuthLayer = Layer.effect(
  PlaygroundAuth,
  Effect.gen(function* () {
    const identify = makeIdentify(yield* ApiKeys, yield* AdminAuth, yield* Settings)
    const flags = yield* FeatureFlags
    const config = yield* AppConfig
    const openBind = isLoopbackHost(config.host) || config.allowUnauthenticatedRemote
    return authenticate(identify, {
      // Any valid gateway key: the playground is a client of the inference routes.
      apiKey: (key) => Effect.succeed({ kind: "api-key" as const, id: key.id }),
      nobody: (req) =>
        Effect.gen(function* () {
          // Not through a tunnel's edge: the helper connects from loopback, its requests come from the internet.
          if (!(yield* flags.enabled("REQUIRE_API_KEY")) && openBind && !crossOrigin(req.headers) && !throughTunnel(req.headers))
            return { kind: "local" as const, id: "anonymous" }
          return yield* new Unauthorized({
            message:
              "the playground needs a gateway API key ('Authorization: Bearer <key>') or a dashboard login: REQUIRE_API_KEY is on, or the gateway is reachable from other machines"
          })
        })
    })
  })
)
