import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as http from "node:http"
import { providerView } from "../../../services/auth/ssoProviders.js"
import { SESSION_COOKIE, SESSION_TTL_MS } from "../../../services/auth/AdminAuth.js"
import { type ClientInfo, SingleSignOn, type SsoRefusal } from "../../../services/auth/SingleSignOn.js"
import { FeatureFlags } from "../../../platform/flags/FeatureFlags.js"
import { clientAddress } from "../../../platform/http/request.js"
import { ManagementApi } from "../Api.js"
import { makeCallbackBase } from "../callbackBase.js"
import { actor } from "../Principal.js"

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const STATUS: Record<SsoRefusal["_tag"], number> = { BadRequest: 400, Forbidden: 403, NotFound: 404, BadGateway: 502 }

/**
 * A refused browser step as the browser sees it: a page saying why, with the same status (a
 * client that asks for JSON gets the API's error body instead).
 */
const refusedPage = (e: SsoRefusal) =>
  Effect.gen(function* () {
    const req = yield* HttpServerRequest.HttpServerRequest
    const accept = req.headers["accept"] ?? ""
    if (!accept.includes("text/html")) return yield* Effect.fail(e)
    const body = `<!doctype html><html><head><meta charset="utf-8"><title>Sign-in refused</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#222}p.why{background:#fdecea;border-radius:6px;padding:1rem}</style></head>
<body><h1>Sign-in refused</h1><p class="why">${escapeHtml(e.message)}</p><p><a href="/">Back to the sign-in page</a></p></body></html>`
    return HttpServerResponse.html(body).pipe(
      HttpServerResponse.setStatus(STATUS[e._tag]),
      HttpServerResponse.setHeader("cache-control", "no-store")
    )
  })

/** Who is signing in, as the session row records it. */
const clientInfo = (trustProxy: boolean) =>
  Effect.map(HttpServerRequest.HttpServerRequest, (req): ClientInfo & { secure: boolean } => {
    const source = req.source as http.IncomingMessage
    return {
      ip: clientAddress(source, trustProxy),
      userAgent: req.headers["user-agent"],
      secure: (source.socket as { encrypted?: boolean }).encrypted === true || (trustProxy && req.headers["x-forwarded-proto"] === "https")
    }
  })

const redirect = (location: string) =>
  HttpServerResponse.empty({ status: 302 }).pipe(
    HttpServerResponse.setHeader("location", location),
    HttpServerResponse.setHeader("cache-control", "no-store")
  )

/** The public steps of a sign-in (docs/sso.md, "The flow"). */
const publicGroup = HttpApiBuilder.group(ManagementApi, "ssoPublic", (handlers) =>
  Effect.gen(function* () {
    const sso = yield* SingleSignOn
    const flags = yield* FeatureFlags
    const callbackBase = yield* makeCallbackBase
    const client = Effect.flatMap(flags.enabled("GATEWAY_TRUST_PROXY_HEADERS"), clientInfo)
    return handlers
      .handle("providers", () => sso.publicList)
      .handle("login", ({ path, urlParams }) =>
        Effect.flatMap(callbackBase, (base) => sso.beginLogin(path.id, urlParams, base)).pipe(
          Effect.map(redirect),
          Effect.catchAll(refusedPage)
        )
      )
      .handle("callback", ({ path, urlParams }) =>
        Effect.gen(function* () {
          const who = yield* client
          const done = yield* sso.completeLogin(path.id, urlParams, who)
          if (done.kind === "cli") return redirect(done.location)
          return yield* redirect(done.returnTo).pipe(
            HttpServerResponse.setCookie(SESSION_COOKIE, done.token, {
              httpOnly: true,
              // Lax, not Strict: the browser arrives here from the provider's site, and the dashboard it is sent on to must see the cookie.
              sameSite: "lax",
              path: "/",
              secure: who.secure,
              maxAge: `${SESSION_TTL_MS} millis`
            }),
            Effect.orDie
          )
        }).pipe(Effect.catchAll(refusedPage))
      )
      .handle("deviceStart", ({ path }) => sso.startDevice(path.id))
      .handle("devicePoll", ({ path, payload }) => Effect.flatMap(client, (who) => sso.pollDevice(path.id, payload.handle, who)))
      .handle("cliToken", ({ payload }) => sso.cliToken(payload.code, payload.verifier))
      .handle("passwordLogin", () => Effect.map(sso.passwordLogin, (enabled) => ({ enabled })))
  })
)

/** The providers' configuration and the password switch (admins). */
const adminGroup = HttpApiBuilder.group(ManagementApi, "sso", (handlers) =>
  Effect.gen(function* () {
    const sso = yield* SingleSignOn
    return handlers
      .handle("list", () => Effect.map(sso.providers.all, (list) => ({ providers: list.map(providerView) })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => sso.create(payload, a)).pipe(Effect.map(providerView)))
      .handle("get", ({ path }) => Effect.map(sso.providers.get(path.id), providerView))
      .handle("update", ({ path, payload }) => Effect.flatMap(actor, (a) => sso.update(path.id, payload, a)).pipe(Effect.map(providerView)))
      .handle("remove", ({ path }) =>
        Effect.flatMap(actor, (a) => sso.remove(path.id, a)).pipe(Effect.map((p) => ({ removed: providerView(p) })))
      )
      .handle("add", ({ payload }) => Effect.flatMap(actor, (a) => sso.create(payload, a)).pipe(Effect.map(providerView)))
      .handle("read", ({ path }) => Effect.map(sso.providers.get(path.id), providerView))
      .handle("change", ({ path, payload }) => Effect.flatMap(actor, (a) => sso.update(path.id, payload, a)).pipe(Effect.map(providerView)))
      .handle("delete", ({ path }) =>
        Effect.flatMap(actor, (a) => sso.remove(path.id, a)).pipe(Effect.map((p) => ({ removed: providerView(p) })))
      )
      .handle("setPasswordLogin", ({ payload }) =>
        Effect.flatMap(actor, (a) => sso.setPasswordLogin(payload.enabled, a)).pipe(Effect.map((enabled) => ({ enabled })))
      )
  })
)

/**
 * Single sign-on's handlers, over its service (only these routes use it). The service is built at
 * start by ManagementLive (it reads and checks GATEWAY_OIDC_PROVIDERS then), these handlers with
 * the rest of the plane on its first request (../ManagementHandler.ts).
 */
export const layer = Layer.mergeAll(publicGroup, adminGroup)
