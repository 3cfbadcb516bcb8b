import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Forbidden, Unauthorized } from "../../domain/errors.js"

/**
 * Who is calling a management route: an admin cookie session, an admin-scope API key, or (with
 * `requireLogin` off in the settings) a direct caller on this machine without credentials.
 */
export interface PrincipalShape {
  readonly kind: "session" | "api-key" | "local"
  /** Key id, "admin" for a session, "local" for a loopback caller without login; used as the audit actor. */
  readonly id: string
}
export class Principal extends Context.Tag("gateway/Principal")<Principal, PrincipalShape>() {}

/**
 * Management authentication: `Authorization: Bearer <admin key>`, or the `gw_session` cookie
 * from `POST /api/auth/login`. Cookie requests that change state (POST, PUT, PATCH, DELETE)
 * must carry the session's CSRF token in `X-CSRF-Token` and may not come from another origin.
 * Every area's group but health and login uses it (`.middleware(ManagementAuth)`); Auth.ts implements it.
 */
export class ManagementAuth extends HttpApiMiddleware.Tag<ManagementAuth>()("gateway/ManagementAuth", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: Principal
}) {}

/** The audit actor of the current management request: the key id, "admin-session", or "local-no-login". */
export const actor = Effect.map(Principal, (p) => (p.kind === "session" ? "admin-session" : p.kind === "local" ? "local-no-login" : p.id))

/** The `:id` path parameter most areas use. */
export const IdPath = Schema.Struct({ id: Schema.String })

/**
 * The playground's authentication (spec document 3: "optional and follows REQUIRE_API_KEY"):
 * any valid gateway API key (its id is who the playground's own calls are made for), an admin
 * session, or this machine without login; with REQUIRE_API_KEY off on a loopback bind, also no
 * credentials at all (as inference is), except from a foreign browser origin.
 */
export class PlaygroundAuth extends HttpApiMiddleware.Tag<PlaygroundAuth>()("gateway/PlaygroundAuth", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: Principal
}) {}
