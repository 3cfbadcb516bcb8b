import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { AdminAuth, SESSION_COOKIE } from "../auth/AdminAuth.js"
import { ApiKeys } from "../auth/ApiKeys.js"
import { safeEqual } from "../auth/password.js"
import { Forbidden, Unauthorized } from "../domain/errors.js"
import { bearerToken } from "../http/request.js"
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

export const ManagementAuthLive = Layer.effect(
  ManagementAuth,
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    const admin = yield* AdminAuth
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
      return yield* new Unauthorized({
        message: "management authentication required: log in (POST /api/auth/login) or send an admin API key as 'Authorization: Bearer <key>'"
      })
    }), notePrincipal)
  })
)
