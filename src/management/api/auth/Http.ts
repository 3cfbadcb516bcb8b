import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as http from "node:http"
import { AdminAuth, SESSION_COOKIE, SESSION_TTL_MS } from "../../../services/auth/AdminAuth.js"
import { ApiKeys } from "../../../services/auth/ApiKeys.js"
import { FeatureFlags } from "../../../platform/flags/FeatureFlags.js"
import { bearerToken, clientAddress } from "../../../platform/http/request.js"
import { ManagementApi } from "../Api.js"
import { directLocal, userOfIdentity } from "../Auth.js"
import { principalUserOf } from "../access.js"
import { callerView } from "./sessionView.js"
import { Directory } from "../../../services/teams/Directory.js"
import { Settings } from "../../../platform/settings/Settings.js"
import { Conflict, Forbidden } from "../../../domain/errors.js"
import { KeyValue } from "../../../platform/store/KeyValue.js"
import { passwordLoginEnabled } from "../../../services/auth/SingleSignOn.js"

/** Login, logout and the session probe (docs/management.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "auth", (handlers) =>
  Effect.gen(function* () {
    const admin = yield* AdminAuth
    const keys = yield* ApiKeys
    const flags = yield* FeatureFlags
    const setupLock = yield* Effect.makeSemaphore(1)
    const directory = yield* Directory
    const settings = yield* Settings
    const kv = yield* KeyValue
    /** Logs in and sets the session cookie (HttpOnly, SameSite=Strict, Secure over TLS). */
    const startSession = (password: string) =>
      Effect.gen(function* () {
        const req = yield* HttpServerRequest.HttpServerRequest
        const source = req.source as http.IncomingMessage
        const trustProxy = yield* flags.enabled("GATEWAY_TRUST_PROXY_HEADERS")
        const { token, session } = yield* admin
          .login(password, {
            ip: clientAddress(source, trustProxy),
            userAgent: req.headers["user-agent"]
          })
          .pipe(
            Effect.tapError((e) =>
              e._tag === "TooManyRequests"
                ? HttpApp.appendPreResponseHandler((_req, res) =>
                    Effect.succeed(HttpServerResponse.setHeader(res, "retry-after", String(e.retryAfterSeconds)))
                  )
                : Effect.void
            )
          )
        const secure =
          (source.socket as { encrypted?: boolean }).encrypted === true || (trustProxy && req.headers["x-forwarded-proto"] === "https")
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
    return handlers
      .handle("login", ({ payload }) =>
        Effect.gen(function* () {
          // Turned off once single sign-on works (docs/sso.md, "Turning password sign-in off"); an admin key still works.
          if (!(yield* passwordLoginEnabled(kv)))
            return yield* new Forbidden({
              message:
                "password sign-in is turned off on this gateway: sign in with single sign-on (GET /api/auth/oidc/providers lists the providers)"
            })
          return yield* startSession(payload.password)
        })
      )
      .handle("setup", ({ payload }) =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          const source = req.source as http.IncomingMessage
          // Who may choose the first password: this machine talking directly (the operator who just
          // started it), or a holder of an admin key. Anyone else who reaches the port could take
          // the gateway over; they are told how to do it on the host.
          const token = bearerToken(req.headers["authorization"])
          const admin_ = token ? Option.exists(yield* keys.verify(token), (k) => k.scopes.includes("admin")) : false
          if (!admin_ && !directLocal(source)) {
            return yield* new Forbidden({
              message:
                "first-run setup is allowed only from the gateway's own machine (loopback, no proxy) or with an admin API key; on the host run `gateway setup`, or start with INITIAL_PASSWORD"
            })
          }
          yield* setupLock.withPermits(1)(
            Effect.gen(function* () {
              if (yield* admin.hasPassword) {
                return yield* new Conflict({
                  message: "an admin password is already set: log in (POST /api/auth/login); to change it run `gateway reset-password`"
                })
              }
              yield* admin.setPassword(payload.password, "setup")
            })
          )
          return yield* startSession(payload.password)
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
            // An admin-scope key whose owner may still act (docs/teams.md, "Who a caller is").
            const key = Option.filter(yield* keys.verify(token), (k) => k.scopes.includes("admin"))
            const user = Option.isSome(key)
              ? yield* Effect.option(userOfIdentity(directory, { kind: "api-key", key: key.value }))
              : Option.none()
            const ok = Option.isSome(user)
            return {
              authenticated: ok,
              via: ok ? ("api-key" as const) : null,
              csrfToken: null,
              passwordSet,
              ...callerView(directory, Option.getOrNull(user))
            }
          }
          const cookie = req.cookies[SESSION_COOKIE]
          const session = cookie ? yield* admin.session(cookie) : Option.none()
          const user = Option.isSome(session)
            ? yield* Effect.option(userOfIdentity(directory, { kind: "session", userId: session.value.userId }))
            : Option.none()
          if (Option.isSome(session) && Option.isSome(user))
            return {
              authenticated: true,
              via: "session" as const,
              csrfToken: session.value.csrfToken,
              passwordSet,
              ...callerView(directory, user.value)
            }
          // This machine without login (requireLogin off) acts as the first admin, as the management API lets it.
          const local = !settings.current().requireLogin && directLocal(req.source as http.IncomingMessage)
          return {
            authenticated: false,
            via: null,
            csrfToken: null,
            passwordSet,
            ...callerView(directory, local ? principalUserOf(directory.firstAdmin()) : null)
          }
        })
      )
  })
)
