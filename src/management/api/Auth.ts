import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { AdminAuthShape } from "../../services/auth/AdminAuth.js"
import type { ApiKeyRecord, ApiKeysShape } from "../../services/auth/ApiKeys.js"
import { safeEqual } from "../../services/auth/password.js"
import { Forbidden, Unauthorized } from "../../domain/errors.js"
import { isLoopbackHost, throughTunnel } from "../../platform/config/AppConfig.js"
import { bearerToken } from "../../platform/http/request.js"
import type { SettingsShape } from "../../platform/settings/Settings.js"
import type * as http from "node:http"
import type { DirectoryShape } from "../../services/teams/Directory.js"
import { type KeyOwner, type PrincipalUser, principalUserOf, teamKeyUser } from "./access.js"
import type { Role } from "../../domain/teams.js"

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** Whether a browser request's Origin is not this server's own (Host header); "null" counts as another. */
export const crossOrigin = (headers: Readonly<Record<string, string | undefined>>): boolean => {
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
