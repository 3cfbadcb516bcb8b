/**
 * The management middleware's audit capture (docs/guardrails.md, "Audit log"): every request
 * that may change something (POST, PUT, PATCH, DELETE) is written to the audit log once it was
 * answered: the actor (from the principal the auth middleware established), the client address,
 * method, route, target, status, the resource before (for PUT, PATCH and DELETE: the answer of a
 * GET of the same path, when it has one) and the answer after, secrets masked.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { FeatureFlagsShape } from "../../../platform/flags/FeatureFlags.js"
import type { AuditLogShape } from "../../../services/governance/AuditLog.js"
import { actorOf, type PrincipalShape } from "../Principal.js"

/** Where the auth middleware notes who is calling, for the audit row of this request. */
export class AuditSlot extends Context.Tag("gateway/AuditSlot")<AuditSlot, { actor: string | undefined }>() {}

/** Called by the auth middleware with the principal it established. */
export const notePrincipal = (p: PrincipalShape) =>
  Effect.map(Effect.serviceOption(AuditSlot), (slot) => {
    if (Option.isSome(slot)) slot.value.actor = actorOf(p)
  })

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"])
const VERB: Record<string, string> = { POST: "create", PUT: "update", PATCH: "update", DELETE: "remove" }

const bodyJson = (res: HttpServerResponse.HttpServerResponse): unknown => {
  const body = res.body
  if (body._tag !== "Uint8Array" || !(body.contentType ?? "").includes("json")) return undefined
  try {
    return JSON.parse(new TextDecoder().decode(body.body))
  } catch {
    return undefined
  }
}

/** The same request as a GET (the router reads `method`; nothing else differs). */
const asGet = (req: HttpServerRequest.HttpServerRequest): HttpServerRequest.HttpServerRequest =>
  new Proxy(req, { get: (target, prop) => (prop === "method" ? "GET" : Reflect.get(target, prop, target)) })

/**
 * Runs `guarded` (the request as the plane serves it) and writes its audit row; `app` is the bare
 * API, used for the GET of the resource before a change.
 */
export const audited = <E, R>(
  deps: { readonly audit: AuditLogShape; readonly flags: FeatureFlagsShape },
  req: HttpServerRequest.HttpServerRequest,
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  guarded: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> => {
  if (!MUTATING.has(req.method)) return guarded
  const { audit, flags } = deps
  return Effect.gen(function* () {
    const slot = { actor: undefined as string | undefined }
    const route = req.url.split("?")[0] ?? req.url
    const segments = route.split("/").filter((s) => s !== "")
    const area = segments[1] ?? "root"
    const pathTarget = segments.slice(2).join("/")
    let before: unknown
    if (req.method !== "POST" && pathTarget !== "") {
      const got = yield* Effect.either(
        Effect.provideService(Effect.provideService(app, HttpServerRequest.HttpServerRequest, asGet(req)), AuditSlot, slot)
      )
      if (got._tag === "Right" && got.right.status === 200) before = bodyJson(got.right)
    }
    const res = yield* Effect.provideService(guarded, AuditSlot, slot)
    const after = bodyJson(res)
    const created = after as { id?: unknown; name?: unknown } | undefined
    const target =
      pathTarget !== ""
        ? pathTarget
        : typeof created?.id === "string"
          ? created.id
          : typeof created?.name === "string"
            ? created.name
            : null
    const forwarded =
      flags.peekEnabled("GATEWAY_TRUST_PROXY_HEADERS") === true
        ? String(req.headers["x-forwarded-for"] ?? "")
            .split(",")
            .pop()
            ?.trim()
        : undefined
    audit.recordChange({
      actor: slot.actor ?? "anonymous",
      action: `${area}.${VERB[req.method] ?? req.method.toLowerCase()}`,
      target,
      ip: forwarded || Option.getOrElse(req.remoteAddress, () => "unknown"),
      method: req.method,
      route,
      status: res.status,
      before,
      after
    })
    return res
  })
}
