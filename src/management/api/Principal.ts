import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Forbidden, Unauthorized } from "../../domain/errors.js"
import { FIRST_ADMIN } from "../../domain/teams.js"
import type { PrincipalUser } from "./access.js"

export type { PrincipalUser } from "./access.js"

/**
 * Who is calling a management route: a cookie session, an admin-scope API key, or (with
 * `requireLogin` off in the settings) a direct caller on this machine without credentials; and
 * the user it acts as (docs/teams.md, "Who a caller is"): a session its user (the admin
 * password's: the first admin), a key its owner (never beyond the owner's role, whatever its
 * scopes), a team's key a `member` of that team, a key nobody owns and the local caller the
 * first admin.
 */
export interface PrincipalShape {
  readonly kind: "session" | "api-key" | "local"
  /** Key id; for a session the user's id, "admin" for the admin password's; "local" for a loopback caller without login. */
  readonly id: string
  readonly user: PrincipalUser
}
export class Principal extends Context.Tag("gateway/Principal")<Principal, PrincipalShape>() {}

/**
 * Management authentication: `Authorization: Bearer <admin key>`, or the `gw_session` cookie
 * from `POST /api/auth/login`. Cookie requests that change state (POST, PUT, PATCH, DELETE)
 * must carry the session's CSRF token in `X-CSRF-Token` and may not come from another origin.
 * Every area's group but health and login uses it (`.middleware(ManagementAuth)`); AuthMiddleware.ts implements it.
 */
export class ManagementAuth extends HttpApiMiddleware.Tag<ManagementAuth>()("gateway/ManagementAuth", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: Principal
}) {}

/**
 * The audit actor of a principal: the user's id for a user's session (`admin-session` for the
 * admin password's), the key id for a key (`<user or team>/<key id>` when it has an owner other
 * than the first admin), `local-no-login` for this machine without login (`anonymous` in the playground).
 */
export const actorOf = (p: PrincipalShape): string => {
  switch (p.kind) {
    case "session":
      return p.id === "admin" ? "admin-session" : p.id
    case "local":
      return p.id === "local" ? "local-no-login" : p.id
    case "api-key": {
      const owner = p.user.id ?? p.user.teamIds[0] ?? null
      return owner === null || owner === FIRST_ADMIN.id ? p.id : `${owner}/${p.id}`
    }
  }
}

/** The audit actor of the current management request (`actorOf`). */
export const actor = Effect.map(Principal, actorOf)

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
