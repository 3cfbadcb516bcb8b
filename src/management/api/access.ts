/**
 * The authorization decisions inside the management handlers, where the route table
 * (`routeAccess.ts`) is not enough (docs/teams.md, "Roles and access"): whose keys a caller sees
 * and manages, which teams and members, whose usage. Pure functions over the caller
 * (`PrincipalUser`) and what the directory knows, so every handler decides the same way.
 */
import { levelOf, type Role, type TeamRole } from "../../domain/teams.js"

/** The user a management caller acts as (`Principal.user`). */
export interface PrincipalUser {
  /** The user's id; null for a team's key, which acts as a member of its team and is nobody in particular. */
  readonly id: string | null
  readonly role: Role
  /** The teams the user belongs to (a team's key: its team). */
  readonly teamIds: ReadonlyArray<string>
  /** The teams the user administers: those where a `team-admin` user has the team role `team-admin`. */
  readonly teamAdminOf: ReadonlyArray<string>
}

/** A user as these decisions read it: the directory's `user(id)` answers one. */
export interface UserLike {
  readonly id: string
  readonly role: Role
  readonly disabled?: boolean
  readonly teams: ReadonlyArray<{ readonly teamId: string; readonly role: TeamRole }>
}

/** Looks users up (the directory's synchronous `user(id)`). */
export type UserLookup = (id: string) => UserLike | undefined

/** A key's owner: a user, a team, or neither (the gateway's own). */
export interface KeyOwner {
  readonly userId: string | null
  readonly teamId: string | null
}

/** The caller of a user's session or key. */
export const principalUserOf = (u: UserLike): PrincipalUser => ({
  id: u.id,
  role: u.role,
  teamIds: u.teams.map((t) => t.teamId),
  teamAdminOf: u.role === "team-admin" ? u.teams.filter((t) => t.role === "team-admin").map((t) => t.teamId) : []
})

/** The caller of a team's key: a `member` of that team, no user. */
export const teamKeyUser = (teamId: string): PrincipalUser => ({ id: null, role: "member", teamIds: [teamId], teamAdminOf: [] })

/** The caller with every right, as the single-user gateway had it: the local caller, and callers named nowhere else. */
export const adminUser = (id: string): PrincipalUser => ({ id, role: "admin", teamIds: [], teamAdminOf: [] })

export const isAdmin = (p: PrincipalUser): boolean => p.role === "admin"

/** Reads everything there is to read: admins and viewers. */
export const readsEverything = (p: PrincipalUser): boolean => p.role === "admin" || p.role === "viewer"

/** May change a team's members, keys and limits: an admin, or a team-admin of that team. */
export const canManageTeam = (p: PrincipalUser, teamId: string): boolean => isAdmin(p) || p.teamAdminOf.includes(teamId)

/** May read a team and its members: admins and viewers, and the team's own members. */
export const canReadTeam = (p: PrincipalUser, teamId: string): boolean => readsEverything(p) || p.teamIds.includes(teamId)

/**
 * May manage this user (their keys, their membership of a team the caller administers): an admin
 * anyone; a team-admin themselves and the non-admin members of the teams they administer; anyone
 * else themselves only.
 */
export const canManageUser = (p: PrincipalUser, userId: string, users: UserLookup): boolean => {
  if (isAdmin(p)) return true
  if (p.id !== null && p.id === userId) return true
  if (p.teamAdminOf.length === 0) return false
  const user = users(userId)
  if (!user || user.role === "admin") return false
  return user.teams.some((t) => p.teamAdminOf.includes(t.teamId))
}

/**
 * May grant this role to a user (creating one, changing one's role): admins any role; a
 * team-admin any but `admin`; nobody else.
 */
export const canGrantRole = (p: PrincipalUser, role: Role): boolean => isAdmin(p) || (p.role === "team-admin" && role !== "admin")

/** May change, disable or remove this key: its owner, their team's admins, the key's team's admins, admins. */
export const canManageKey = (p: PrincipalUser, key: KeyOwner, users: UserLookup): boolean => {
  if (isAdmin(p)) return true
  if (p.role === "viewer") return false
  if (key.teamId !== null) return canManageTeam(p, key.teamId)
  if (key.userId !== null) return canManageUser(p, key.userId, users)
  return false
}

/** May see this key in a listing: whoever may manage it, and viewers (read only). */
export const canSeeKey = (p: PrincipalUser, key: KeyOwner, users: UserLookup): boolean => readsEverything(p) || canManageKey(p, key, users)

/** The keys of a list the caller may see. */
export const visibleKeys = <K extends KeyOwner>(p: PrincipalUser, keys: ReadonlyArray<K>, users: UserLookup): ReadonlyArray<K> =>
  readsEverything(p) ? keys : keys.filter((k) => canSeeKey(p, k, users))

/**
 * Who a new key belongs to when this caller creates it, or why it may not: admins give any owner
 * (none named: the caller's choice stands as before); a team-admin themselves, a member of a team
 * they administer, or such a team; a member themselves only. A team's key creates no keys.
 */
export const ownerOfNewKey = (p: PrincipalUser, wanted: Partial<KeyOwner>, users: UserLookup): KeyOwner | { readonly refused: string } => {
  const userId = wanted.userId ?? null
  const teamId = wanted.teamId ?? null
  if (isAdmin(p)) return { userId, teamId }
  if (p.id === null) return { refused: "a team's key cannot create keys; a member of the team or an admin creates them" }
  if (p.role === "viewer") return { refused: "a viewer cannot create keys" }
  if (teamId !== null && !canManageTeam(p, teamId))
    return { refused: `only an admin or a team-admin of ${teamId} creates keys for that team` }
  if (userId !== null && !canManageUser(p, userId, users))
    return {
      refused: p.role === "team-admin" ? `${userId} is not a member of a team you administer` : "a member creates keys for themselves only"
    }
  if (teamId !== null) return { userId, teamId }
  return { userId: userId ?? p.id, teamId: null }
}

/**
 * The key changes only an admin makes: shadow targets send every request of the key to a second
 * model as well, at the gateway's cost.
 */
export const adminOnlyKeyFields = ["shadow"] as const

/**
 * Whose usage the caller reads: `undefined` for everything (admins, viewers), else the ids of the
 * keys they may see (a member their own, a team-admin also their teams' and their members').
 */
export const usageKeyScope = (
  p: PrincipalUser,
  keys: ReadonlyArray<KeyOwner & { readonly id: string }>,
  users: UserLookup
): ReadonlyArray<string> | undefined => (readsEverything(p) ? undefined : visibleKeys(p, keys, users).map((k) => k.id))

/** The owner filters of a usage read (`GET /api/usage/history`, `logs`, `request-logs`, `export`). */
export interface UsageFilters {
  readonly apiKeyId?: string | undefined
  readonly teamId?: string | undefined
  readonly userId?: string | undefined
}

/**
 * A usage read narrowed to what the caller may read, or why not (docs/teams.md, "Roles and
 * access"): admins and viewers read everything as asked; a member their own keys' usage (a key
 * of theirs, or all of them); a team-admin also a team they administer or one of its members
 * (without a filter: the first team they administer); a team's key its own usage.
 * `keyOwner` is the owner of the key `apiKeyId` names (undefined: no such key).
 */
export const scopeUsage = <Q extends UsageFilters>(
  p: PrincipalUser,
  callerKeyId: string | null,
  q: Q,
  keyOwner: KeyOwner | undefined,
  users: UserLookup
): { readonly query: Q } | { readonly refused: string } => {
  if (readsEverything(p)) return { query: q }
  if (q.apiKeyId !== undefined && q.apiKeyId !== callerKeyId && (keyOwner === undefined || !canSeeKey(p, keyOwner, users)))
    return { refused: `apiKeyId: ${q.apiKeyId} is not a key of yours or of a team you administer` }
  if (p.id === null) {
    if (q.teamId !== undefined || q.userId !== undefined) return { refused: "a team's key reads its own usage only" }
    return callerKeyId === null ? { refused: "no key to read the usage of" } : { query: { ...q, apiKeyId: callerKeyId } }
  }
  if (q.teamId !== undefined && !canManageTeam(p, q.teamId)) return { refused: `teamId: you do not administer ${q.teamId}` }
  if (q.userId !== undefined && !canManageUser(p, q.userId, users))
    return { refused: `userId: ${q.userId} is not you or a member of a team you administer` }
  if (q.teamId !== undefined || q.userId !== undefined || q.apiKeyId !== undefined) return { query: q }
  const team = p.teamAdminOf[0]
  return { query: team !== undefined ? { ...q, teamId: team } : { ...q, userId: p.id } }
}

/** May see this user: admins and viewers anyone; others themselves and the members of their teams. */
export const canSeeUser = (p: PrincipalUser, user: UserLike): boolean =>
  readsEverything(p) || user.id === p.id || user.teams.some((t) => p.teamIds.includes(t.teamId))

/**
 * Whether the caller may create a user with this role in these teams (ids), or why not: an admin
 * anyone; a team-admin a user of any role but admin, in teams they administer only (at least one,
 * so the user is theirs to manage).
 */
export const refusalToCreateUser = (p: PrincipalUser, role: Role, teamIds: ReadonlyArray<string>): string | undefined => {
  if (isAdmin(p)) return undefined
  if (!canGrantRole(p, role)) return `a ${p.role} may not make a user ${role}`
  if (teamIds.length === 0) return "a team-admin creates users in a team they administer (teamIds)"
  const other = teamIds.find((t) => !canManageTeam(p, t))
  return other === undefined ? undefined : `you do not administer ${other}`
}

/**
 * Whether the caller may make these changes to this user, or why not: an admin anything; a
 * team-admin the name, role (not admin) and disabled state of a user they manage, not their teams
 * (the team's members routes change those) nor their email; anyone else nothing.
 */
export const refusalToUpdateUser = (
  p: PrincipalUser,
  user: UserLike,
  change: { readonly role?: Role | undefined; readonly email?: unknown; readonly teamIds?: unknown },
  users: UserLookup
): string | undefined => {
  if (isAdmin(p)) return undefined
  if (user.id === p.id) return "an admin changes your own user"
  if (p.role !== "team-admin" || !canManageUser(p, user.id, users)) return `${user.id} is not a member of a team you administer`
  if (change.role !== undefined && !canGrantRole(p, change.role)) return `a ${p.role} may not make a user ${change.role}`
  if (change.email !== undefined || change.teamIds !== undefined)
    return "a team-admin changes a user's name, role and disabled state; teams through /api/teams/{id}/members"
  return undefined
}

/**
 * Whether the caller may set or remove limits on this subject (`org`, `team_…`, `usr_…`, a key
 * id), or why not: an admin any; a team-admin a team they administer, a user they manage
 * (themselves included) and such a user's or team's key; the level above still caps what they
 * set. `keyOwner` is the owner of the key a key id names (undefined: no such key).
 */
export const refusalToLimit = (
  p: PrincipalUser,
  subjectId: string,
  keyOwner: KeyOwner | undefined,
  users: UserLookup
): string | undefined => {
  if (isAdmin(p)) return undefined
  if (p.role !== "team-admin") return `a ${p.role} does not set limits`
  switch (levelOf(subjectId)) {
    case "organisation":
      return "only an admin sets the organisation's limits"
    case "team":
      return canManageTeam(p, subjectId) ? undefined : `you do not administer ${subjectId}`
    case "user":
      return canManageUser(p, subjectId, users) ? undefined : `${subjectId} is not a member of a team you administer`
    case "key":
      return keyOwner !== undefined && canManageKey(p, keyOwner, users) ? undefined : `the key ${subjectId} is not yours or your team's`
  }
}

/** Whether the caller may read the limits of this subject: whoever may set them, admins and viewers, and anyone their own (user, teams, keys). */
export const canReadLimitsOf = (p: PrincipalUser, subjectId: string, keyOwner: KeyOwner | undefined, users: UserLookup): boolean => {
  if (readsEverything(p) || refusalToLimit(p, subjectId, keyOwner, users) === undefined) return true
  switch (levelOf(subjectId)) {
    case "organisation":
      return true
    case "team":
      return p.teamIds.includes(subjectId)
    case "user":
      return subjectId === p.id
    case "key":
      return keyOwner !== undefined && canSeeKey(p, keyOwner, users)
  }
}
