import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as http from "node:http"
import { Forbidden, Unauthorized } from "../../domain/errors.js"
import type { Role } from "../../domain/teams.js"
import { AppConfig, isLoopbackHost, throughTunnel } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { Settings } from "../../platform/settings/Settings.js"
import { AdminAuth, SESSION_COOKIE } from "../../services/auth/AdminAuth.js"
import { type ApiKeyRecord, ApiKeys } from "../../services/auth/ApiKeys.js"
import { Directory, type DirectoryShape } from "../../services/teams/Directory.js"
import type { PrincipalUser } from "./access.js"
import { crossOrigin, makeIdentify, userOfIdentity } from "./Auth.js"
import { notePrincipal } from "./compliance/AuditSlot.js"
import { ManagementAuth, PlaygroundAuth, type PrincipalShape } from "./Principal.js"
import { routeAccess } from "./routeAccess.js"

/**
 * The management plane's authentication middlewares (the HttpApi's `ManagementAuth` and
 * `PlaygroundAuth`), apart from Auth.ts: they check a route's roles through the route table
 * (routeAccess.ts), which is the whole management API. Only the plane imports this, and the plane
 * is loaded on its first request (ManagementHandler.ts), so a start does not evaluate the API's
 * modules for the dashboard's feeds and the MCP endpoint, which identify callers with Auth.ts.
 */

const RANK: Record<Role, number> = { viewer: 0, member: 1, "team-admin": 2, admin: 3 }

/** The lower of the user's role and `ceiling`. */
const capped = (user: PrincipalUser, ceiling: Role): PrincipalUser =>
  RANK[user.role] <= RANK[ceiling] ? user : { ...user, role: ceiling, teamAdminOf: ceiling === "team-admin" ? user.teamAdminOf : [] }

/**
 * Whether the principal's role may call the route being served (its `Roles` annotation, read
 * through the route table): 403 naming the role, the route and the roles it is for.
 */
const checkRole = (principal: PrincipalShape): Effect.Effect<void, Forbidden, HttpRouter.RouteContext> =>
  Effect.flatMap(HttpRouter.RouteContext, ({ route }) => {
    const access = routeAccess(route.method, route.path)
    const roles: ReadonlyArray<Role> = access?.roles ?? ["admin"]
    if (roles.includes(principal.user.role)) return Effect.void
    const name = access ? ` (${access.id})` : ""
    return Effect.fail(
      new Forbidden({
        message: `the role ${principal.user.role} may not call ${route.method} ${route.path}${name}: it is for ${roles.join(", ")} (docs/teams.md, "Roles and access")`
      })
    )
  })

/**
 * An authentication middleware over `identify`: a session and a direct local caller are principals
 * as they are; `apiKey` decides what a valid key may do and `nobody` what no credential gets.
 * The principal is noted for the request's audit row (compliance/AuditSlot.ts), then its role is
 * checked against the route's.
 */
const authenticate = (
  identify: ReturnType<typeof makeIdentify>,
  directory: DirectoryShape,
  decide: {
    readonly apiKey: (key: ApiKeyRecord, user: PrincipalUser) => Effect.Effect<PrincipalShape, Unauthorized>
    readonly nobody: (req: HttpServerRequest.HttpServerRequest) => Effect.Effect<PrincipalShape, Unauthorized>
  }
) =>
  Effect.gen(function* () {
    const req = yield* HttpServerRequest.HttpServerRequest
    const who = yield* identify({
      method: req.method,
      headers: req.headers,
      sessionCookie: req.cookies[SESSION_COOKIE],
      source: req.source as http.IncomingMessage
    })
    const principal: PrincipalShape =
      who.kind === "none"
        ? yield* decide.nobody(req)
        : who.kind === "api-key"
          ? yield* decide.apiKey(who.key, yield* userOfIdentity(directory, who))
          : who.kind === "session"
            ? { kind: "session", id: who.userId ?? "admin", user: yield* userOfIdentity(directory, who) }
            : { kind: "local", id: "local", user: yield* userOfIdentity(directory, who) }
    yield* notePrincipal(principal)
    yield* checkRole(principal)
    return principal
  })

/**
 * `ManagementAuth`'s implementation. Not the tag's static `layer`: the tags (Principal.ts) are what
 * every area's Api.ts imports, and this reads the services; `<what>Layer` instead.
 */
export const managementAuthLayer = Layer.effect(
  ManagementAuth,
  Effect.map(Effect.all([ApiKeys, AdminAuth, Settings, Directory]), ([keys, admin, settings, directory]) =>
    authenticate(makeIdentify(keys, admin, settings), directory, {
      // Not an admin key is no management authentication at all: 401, as without a key. An admin
      // key acts as its owner, within the owner's role.
      apiKey: (key, user) =>
        key.scopes.includes("admin")
          ? Effect.succeed({ kind: "api-key" as const, id: key.id, user })
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
    const directory = yield* Directory
    const flags = yield* FeatureFlags
    const config = yield* AppConfig
    const openBind = isLoopbackHost(config.host) || config.allowUnauthenticatedRemote
    return authenticate(identify, directory, {
      // Any valid gateway key: the playground is a client of the inference routes. A key without
      // the admin scope acts at most as a member.
      apiKey: (key, user) =>
        Effect.succeed({ kind: "api-key" as const, id: key.id, user: key.scopes.includes("admin") ? user : capped(user, "member") }),
      nobody: (req) =>
        Effect.gen(function* () {
          // Not through a tunnel's edge: the helper connects from loopback, its requests come from the internet.
          if (!(yield* flags.enabled("REQUIRE_API_KEY")) && openBind && !crossOrigin(req.headers) && !throughTunnel(req.headers))
            return { kind: "local" as const, id: "anonymous", user: { id: null, role: "member", teamIds: [], teamAdminOf: [] } }
          return yield* new Unauthorized({
            message:
              "the playground needs a gateway API key ('Authorization: Bearer <key>') or a dashboard login: REQUIRE_API_KEY is on, or the gateway is reachable from other machines"
          })
        })
    })
  })
)
