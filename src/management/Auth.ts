import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { AdminAuth, SESSION_COOKIE } from "../auth/AdminAuth.js"
import { ApiKeys } from "../auth/ApiKeys.js"
import { safeEqual } from "../auth/password.js"
import { Forbidden, Unauthorized } from "../domain/errors.js"
import { isLoopbackHost } from "../config/AppConfig.js"
import { bearerToken } from "../http/request.js"
import { Settings } from "../settings/Settings.js"
import type * as http from "node:http"
import { notePrincipal } from "./compliance/capture.js"
import { ManagementAuth } from "./Principal.js"

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
const directLocal = (req: HttpServerRequest.HttpServerRequest): boolean => {
  const source = req.source as http.IncomingMessage
  const socket = source.socket?.remoteAddress
  if (!socket || !isLoopbackHost(socket)) return false
  const h = req.headers
  if (h["x-forwarded-for"] !== undefined || h["forwarded"] !== undefined || h["x-real-ip"] !== undefined) return false
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

export const ManagementAuthLive = Layer.effect(
  ManagementAuth,
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    const admin = yield* AdminAuth
    const settings = yield* Settings
    // The principal is noted for the request's audit row (compliance/capture.ts).
    return Effect.tap(Effect.gen(function* () {
      const req = yield* HttpServerRequest.HttpServerRequest
      const token = bearerToken(req.headers["authorization"])
      if (token) {
        const key = yield* keys.verify(token)
        if (Option.isNone(key)) return yield* new Unauthorized({ message: "invalid, disabled or expired API key" })
        if (!key.value.scopes.includes("admin")) {
          // Not an admin key is no management authentication at all: 401, as without a key.
          return yield* new Unauthorized({ message: "this API key lacks the admin scope needed for management routes" })
        }
        return { kind: "api-key" as const, id: key.value.id }
      }
      const cookie = req.cookies[SESSION_COOKIE]
      if (cookie) {
        const session = yield* admin.session(cookie)
        if (Option.isNone(session)) return yield* new Unauthorized({ message: "session expired or invalid; log in again" })
        if (UNSAFE.has(req.method)) {
          if (crossOrigin(req.headers)) return yield* new Forbidden({ message: "cross-origin request refused" })
          const csrf = req.headers["x-csrf-token"]
          if (!csrf || !safeEqual(csrf, session.value.csrfToken)) {
            return yield* new Forbidden({ message: "missing or wrong X-CSRF-Token for this session (GET /api/auth/session returns it)" })
          }
        }
        return { kind: "session" as const, id: "admin" }
      }
      if (!settings.current().requireLogin && directLocal(req)) return { kind: "local" as const, id: "local" }
      return yield* new Unauthorized({
        message: "management authentication required: log in (POST /api/auth/login) or send an admin API key as 'Authorization: Bearer <key>'"
      })
    }), notePrincipal)
  })
)
