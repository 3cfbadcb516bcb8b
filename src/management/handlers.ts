import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as http from "node:http"
import { AdminAuth, SESSION_COOKIE, SESSION_TTL_MS } from "../auth/AdminAuth.js"
import { ApiKeys } from "../auth/ApiKeys.js"
import { FeatureFlags } from "../flags/FeatureFlags.js"
import { bearerToken, clientAddress } from "../http/request.js"
import { type Connection, Connections, connectionView } from "../providers/Connections.js"
import { toIso } from "../store/Db.js"
import { ProviderChecks } from "../providers/ProviderChecks.js"
import { Cooldowns } from "../resilience/Cooldowns.js"
import { VERSION } from "../version.js"
import { ManagementApi, Principal } from "./Api.js"
import { ManagementAuthLive } from "./Auth.js"
import { ResilienceLive } from "./resilience.js"
import { CombosLive } from "./routing.js"
import { UsageLive } from "./usage.js"
import { AccountingLive } from "./accounting.js"
import { BackupsLive } from "./backups.js"
import { ModelsLive } from "./models.js"

const startedAt = Date.now()

const actor = Effect.map(Principal, (p) => (p.kind === "session" ? "admin-session" : p.id))

const HealthLive = HttpApiBuilder.group(ManagementApi, "health", (handlers) =>
  handlers.handle("ping", () =>
    Effect.succeed({
      ok: true,
      version: VERSION,
      uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
      time: new Date().toISOString()
    })
  )
)

const AuthLive = HttpApiBuilder.group(ManagementApi, "auth", (handlers) =>
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

const KeysLive = HttpApiBuilder.group(ManagementApi, "keys", (handlers) =>
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    return handlers
      .handle("list", () => Effect.map(keys.list, (list) => ({ keys: list })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => keys.create(payload, { actor: a })))
      .handle("remove", ({ path }) =>
        Effect.flatMap(actor, (a) => Effect.map(keys.remove(path.id, a), (removed) => ({ removed })))
      )
  })
)

const ProvidersLive = HttpApiBuilder.group(ManagementApi, "providers", (handlers) =>
  Effect.gen(function* () {
    const connections = yield* Connections
    const checks = yield* ProviderChecks
    const cooldowns = yield* Cooldowns
    /** The stored connection with its live cooldown state (the request path keeps it in memory). */
    const live = (c: Connection) => {
      const view = connectionView(c)
      const h = cooldowns.healthAt(c.id, Date.now())
      if (h.testStatus === null && h.lastError === null && h.backoffLevel === 0) return view
      return { ...view, testStatus: h.testStatus ?? view.testStatus, rateLimitedUntil: toIso(h.rateLimitedUntil), lastError: h.lastError, lastErrorType: h.lastErrorType, errorCode: h.errorCode, backoffLevel: h.backoffLevel }
    }
    return handlers
      .handle("list", () => Effect.map(connections.list, (list) => ({ connections: list.map(live) })))
      .handle("create", ({ payload }) =>
        Effect.flatMap(actor, (a) => Effect.map(connections.create(payload, a), connectionView))
      )
      .handle("validate", ({ payload }) => checks.validate(payload))
      .handle("get", ({ path }) => Effect.map(connections.get(path.id), live))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function* () {
          const updated = yield* connections.update(path.id, payload, yield* actor)
          // New credentials or endpoint: earlier failures (terminal states included) no longer apply.
          if (payload.apiKey !== undefined || payload.baseUrl !== undefined) yield* cooldowns.forget(updated.id)
          return live(updated)
        })
      )
      .handle("remove", ({ path }) =>
        Effect.flatMap(actor, (a) => Effect.map(connections.remove(path.id, a), (c) => ({ removed: connectionView(c) })))
      )
      .handle("test", ({ path }) => checks.test(path.id))
      .handle("models", ({ path }) => checks.models(path.id))
  })
)

const FeatureFlagsLive = HttpApiBuilder.group(ManagementApi, "featureFlags", (handlers) =>
  Effect.gen(function* () {
    const flags = yield* FeatureFlags
    return handlers
      .handle("list", () => flags.list)
      .handle("set", ({ payload }) => flags.set(payload.key, payload.value))
      .handle("clear", () =>
        Effect.map(flags.clear, (cleared) => ({
          cleared,
          message:
            cleared === 0
              ? "no database overrides were set"
              : `cleared ${cleared} database override${cleared === 1 ? "" : "s"}; flags now resolve from the environment or their defaults`
        }))
      )
  })
)

/** The management API with every group implemented. */
export const ManagementApiLive = HttpApiBuilder.api(ManagementApi).pipe(
  Layer.provide([HealthLive, AuthLive, KeysLive, ProvidersLive, FeatureFlagsLive, CombosLive, ResilienceLive, UsageLive, AccountingLive, BackupsLive, ModelsLive]),
  Layer.provide(ManagementAuthLive)
)
