import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as http from "node:http"
import { AdminAuth, SESSION_COOKIE, SESSION_TTL_MS } from "../../auth/AdminAuth.js"
import { ApiKeys } from "../../auth/ApiKeys.js"
import { FeatureFlags } from "../../flags/FeatureFlags.js"
import { bearerToken, clientAddress } from "../../http/request.js"
import { ManagementApi } from "../Api.js"

/** Login, logout and the session probe (docs/management.md). */
export const AuthLive = HttpApiBuilder.group(ManagementApi, "auth", (handlers) =>
  Effect.gen(function* () {
    const admin = yield* AdminAuth
    const keys = yield* ApiKeys
    const flags = yield* FeatureFlags
    return handlers
      .handle("login", ({ payload }) =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          const source = req.source as http.IncomingMessage
          const trustProxy = yield* flags.enabled("GATEWAY_TRUST_PROXY_HEADERS")
          const { token, session } = yield* admin.login(payload.password, {
            ip: clientAddress(source, trustProxy),
            userAgent: req.headers["user-agent"]
          }).pipe(
            Effect.tapError((e) =>
              e._tag === "TooManyRequests"
                ? HttpApp.appendPreResponseHandler((_req, res) => Effect.succeed(HttpServerResponse.setHeader(res, "retry-after", String(e.retryAfterSeconds))))
                : Effect.void
            )
          )
          const secure =
            (source.socket as { encrypted?: boolean }).encrypted === true ||
            (trustProxy && req.headers["x-forwarded-proto"] === "https")
          yield* HttpApp.appendPreResponseHandler((_req, res) =>
            Effect.succeed(
              HttpServerResponse.unsafeSetCookie(res, SESSION_COOKIE, token, {
                httpOnly: true,
                sameSite: "strict",
                path: "/",
                secure,
                maxAge: `${SESSION_TTL_MS} millis`
              })
            )
          )
          return { ok: true, csrfToken: session.csrfToken, expiresAt: new Date(session.expiresAt).toISOString() }
        })
      )
      .handle("logout", () =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          const cookie = req.cookies[SESSION_COOKIE]
          if (cookie) yield* admin.logout(cookie)
          yield* HttpApp.appendPreResponseHandler((_req, res) =>
            Effect.succeed(HttpServerResponse.expireCookie(res, SESSION_COOKIE, { path: "/", httpOnly: true, sameSite: "strict" }))
          )
          return { ok: true }
        })
      )
      .handle("session", () =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          const passwordSet = yield* admin.hasPassword
          const token = bearerToken(req.headers["authorization"])
          if (token) {
            const key = yield* keys.verify(token)
            const ok = Option.isSome(key) && key.value.scopes.includes("admin")
            return { authenticated: ok, via: ok ? ("api-key" as const) : null, csrfToken: null, passwordSet }
          }
          const cookie = req.cookies[SESSION_COOKIE]
          const session = cookie ? yield* admin.session(cookie) : Option.none()
          return Option.isSome(session)
            ? { authenticated: true, via: "session" as const, csrfToken: session.value.csrfToken, passwordSet }
            : { authenticated: false, via: null, csrfToken: null, passwordSet }
        })
      )
  })
)
