import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { AdminAuth, type AdminAuthShape, SESSION_COOKIE } from "../../services/auth/AdminAuth.js"
import { type ApiKeyRecord, ApiKeys, type ApiKeysShape } from "../../services/auth/ApiKeys.js"
import { safeEqual } from "../../services/auth/password.js"
import { Forbidden, Unauthorized } from "../../domain/errors.js"
import { isLoopbackHost, throughTunnel } from "../../platform/config/AppConfig.js"
import { bearerToken } from "../../platform/http/request.js"
import { Settings, type SettingsShape } from "../../platform/settings/Settings.js"
import type * as http from "node:http"
import { notePrincipal } from "./compliance/AuditSlot.js"
import { ManagementAuth, PlaygroundAuth, type PrincipalShape } from "./Principal.js"
import { Directory, type DirectoryShape } from "../../services/teams/Directory.js"
import { type KeyOwner, type PrincipalUser, principalUserOf, teamKeyUser } from "./access.js"
import { routeAccess } from "./routeAccess.js"
import type { Role } from "../../domain/teams.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"

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
export const directLocal = (source: http.IncomingMessage): boolean => {
  const socket = source.socket?.remoteAddress
  if (!socket || !isLoopbackHost(socket)) return false
  const h = source.headers
  if (h["x-forwarded-for"] !== undefined || h["forwarded"] !== undefined || h["x-real-ip"] !== undefined || throughTunnel(h)) return false
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

/** A request as authentication reads it, from the management plane or from the MCP endpoint. */
export interface AuthRequest {
  readonly method: string
  readonly headers: Readonly<Record<string, string | undefined>>
  /** The `gw_session` cookie, if sent. */
  readonly sessionCookie: string | undefined
  readonly source: http.IncomingMessage
}

/**
 * Who is calling, before any decision about what they may do: any valid gateway key (admin or
 * not), an admin cookie session (with its CSRF rules), this machine directly while
 * `requireLogin` is off, or nobody. Credentials that were sent and are wrong fail (401/403).
 */
export type Identity =
  | { readonly kind: "api-key"; readonly key: ApiKeyRecord }
  /** `userId`: the session's user (`admin_sessions.user_id`), null for the admin password's. */
  | { readonly kind: "session"; readonly userId: string | null }
  | { readonly kind: "local" }
  | { readonly kind: "none" }

export const makeIdentify =
  (keys: ApiKeysShape, admin: AdminAuthShape, settings: SettingsShape) =>
  (req: AuthRequest): Effect.Effect<Identity, Unauthorized | Forbidden> =>
    Effect.gen(function* () {
      const token = bearerToken(req.headers["authorization"])
      if (token) {
        const key = yield* keys.verify(token)
        if (Option.isNone(key)) return yield* new Unauthorized({ message: "invalid, disabled or expired API key" })
        return { kind: "api-key" as const, key: key.value }
      }
      if (req.sessionCookie) {
        const session = yield* admin.session(req.sessionCookie)
        if (Option.isNone(session)) return yield* new Unauthorized({ message: "session expired or invalid; log in again" })
        if (UNSAFE.has(req.method)) {
          if (crossOrigin(req.headers)) return yield* new Forbidden({ message: "cross-origin request refused" })
          const csrf = req.headers["x-csrf-token"]
          if (!csrf || !safeEqual(csrf, session.value.csrfToken)) {
            return yield* new Forbidden({ message: "missing or wrong X-CSRF-Token for this session (GET /api/auth/session returns it)" })
          }
        }
        return { kind: "session" as const, userId: session.value.userId }
      }
      if (!settings.current().requireLogin && directLocal(req.source)) return { kind: "local" as const }
      return { kind: "none" as const }
    })

/** A key's owner (null on both: nobody's, the gateway's own). */
export const keyOwnerOf = (key: ApiKeyRecord): KeyOwner => {
  const owned = key as ApiKeyRecord & Partial<KeyOwner>
  return { userId: owned.userId ?? null, teamId: owned.teamId ?? null }
}

/**
 * The user a caller acts as (docs/teams.md, "Who a caller is"): a session's user (the admin
 * password's: the first admin), a key's owner, a team's key a member of its team, a key nobody
 * owns and this machine without login the first admin. A user removed or disabled since is no
 * authentication (401).
 */
export const userOfIdentity = (
  directory: Pick<DirectoryShape, "user" | "team" | "firstAdmin">,
  who: Exclude<Identity, { readonly kind: "none" }>
): Effect.Effect<PrincipalUser, Unauthorized> => {
  const userNamed = (id: string, what: string) => {
    const user = directory.user(id)
    if (user === undefined) return Effect.fail(new Unauthorized({ message: `${what}'s user ${id} no longer exists` }))
    if (user.disabled) return Effect.fail(new Unauthorized({ message: `${what}'s user ${user.email} is disabled` }))
    return Effect.succeed(principalUserOf(user))
  }
  switch (who.kind) {
    case "api-key": {
      const owner = keyOwnerOf(who.key)
      if (owner.userId !== null) return userNamed(owner.userId, "this API key")
      if (owner.teamId !== null)
        return directory.team(owner.teamId) === undefined
          ? Effect.fail(new Unauthorized({ message: `this API key's team ${owner.teamId} no longer exists` }))
          : Effect.succeed(teamKeyUser(owner.teamId))
      return Effect.succeed(principalUserOf(directory.firstAdmin()))
    }
    case "session":
      return who.userId === null ? Effect.succeed(principalUserOf(directory.firstAdmin())) : userNamed(who.userId, "this session")
    case "local":
      return Effect.succeed(principalUserOf(directory.firstAdmin()))
  }
}

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

/**
 * `identify` for what only some roles may use outside the HttpApi (the dashboard's feeds): the
 * caller's user must have one of `roles`, else 403 naming the role; a removed or disabled user
 * 401. Without a directory (a test's own composition) it is `identify` as it is.
 */
export const identifyWithin =
  (identify: ReturnType<typeof makeIdentify>, directory: DirectoryShape | undefined, roles: ReadonlyArray<Role>, what: string) =>
  (req: AuthRequest): Effect.Effect<Identity, Unauthorized | Forbidden> =>
    Effect.flatMap(identify(req), (who) =>
      who.kind === "none" || directory === undefined
        ? Effect.succeed(who)
        : Effect.flatMap(userOfIdentity(directory, who), (user) =>
            roles.includes(user.role)
              ? Effect.succeed(who)
              : Effect.fail(new Forbidden({ message: `the role ${user.role} may not open ${what}: it is for ${roles.join(", ")}` }))
          )
    )
