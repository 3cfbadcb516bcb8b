/**
 * The directory's tables as the service keeps them: `users`, `teams` and `team_members` read whole
 * into one snapshot with its indexes (by id, email, single sign-on identity, team name), and the
 * views the management API shows.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { Role, TeamMemberView, TeamRole, TeamView, UserView } from "../../domain/teams.js"
import { toIso } from "../../platform/store/Db.js"

/** A user as the request path and management auth read it (from memory). */
export interface DirectoryUser {
  readonly id: string
  /** Lower-cased. */
  readonly email: string
  readonly name: string
  readonly role: Role
  readonly disabled: boolean
  readonly teams: ReadonlyArray<{ readonly teamId: string; readonly role: TeamRole }>
  readonly oidcProvider: string | null
  readonly oidcSubject: string | null
  /** Epoch ms. */
  readonly createdAt: number
  readonly lastLoginAt: number | null
}

export interface DirectoryTeam {
  readonly id: string
  readonly name: string
  /** Epoch ms. */
  readonly createdAt: number
}

export interface DirectoryMember {
  readonly userId: string
  readonly role: TeamRole
  /** Epoch ms. */
  readonly addedAt: number
}

/** Everything in the directory, as loaded once per change. */
export interface DirectorySnapshot {
  readonly users: ReadonlyMap<string, DirectoryUser>
  readonly byEmail: ReadonlyMap<string, DirectoryUser>
  /** Keyed `provider\0subject`. */
  readonly byIdentity: ReadonlyMap<string, DirectoryUser>
  readonly teams: ReadonlyMap<string, DirectoryTeam>
  /** Keyed by the lower-cased name. */
  readonly teamsByName: ReadonlyMap<string, DirectoryTeam>
  /** A team's members, oldest first. */
  readonly members: ReadonlyMap<string, ReadonlyArray<DirectoryMember>>
}

export const EMPTY_SNAPSHOT: DirectorySnapshot = {
  users: new Map(),
  byEmail: new Map(),
  byIdentity: new Map(),
  teams: new Map(),
  teamsByName: new Map(),
  members: new Map()
}

export const identityKey = (provider: string, subject: string) => `${provider}\u0000${subject}`

interface UserRow {
  readonly id: string
  readonly email: string
  readonly name: string
  readonly role: string
  readonly disabled: number | boolean
  readonly oidc_provider: string | null
  readonly oidc_subject: string | null
  readonly created_at: number | string
  readonly last_login_at: number | string | null
}
interface TeamRow {
  readonly id: string
  readonly name: string
  readonly created_at: number | string
}
interface MemberRow {
  readonly team_id: string
  readonly user_id: string
  readonly role: string
  readonly created_at: number | string
}

// PostgreSQL answers a BIGINT as a string.
const ms = (v: number | string): number => Number(v)

/** Every row of the three tables, read and indexed. */
export const loadSnapshot = (sql: SqlClient.SqlClient): Effect.Effect<DirectorySnapshot> =>
  Effect.gen(function* () {
    const userRows =
      yield* sql<UserRow>`SELECT id, email, name, role, disabled, oidc_provider, oidc_subject, created_at, last_login_at FROM users`
    const teamRows = yield* sql<TeamRow>`SELECT id, name, created_at FROM teams`
    const memberRows = yield* sql<MemberRow>`SELECT team_id, user_id, role, created_at FROM team_members`
    const members = new Map<string, Array<DirectoryMember>>()
    const teamsOf = new Map<string, Array<{ teamId: string; role: TeamRole }>>()
    for (const r of [...memberRows].sort((a, b) => ms(a.created_at) - ms(b.created_at) || a.user_id.localeCompare(b.user_id))) {
      const role = r.role as TeamRole
      const list = members.get(r.team_id) ?? []
      list.push({ userId: r.user_id, role, addedAt: ms(r.created_at) })
      members.set(r.team_id, list)
      const mine = teamsOf.get(r.user_id) ?? []
      mine.push({ teamId: r.team_id, role })
      teamsOf.set(r.user_id, mine)
    }
    const users = new Map<string, DirectoryUser>()
    const byEmail = new Map<string, DirectoryUser>()
    const byIdentity = new Map<string, DirectoryUser>()
    for (const r of [...userRows].sort((a, b) => ms(a.created_at) - ms(b.created_at) || a.id.localeCompare(b.id))) {
      const user: DirectoryUser = {
        id: r.id,
        email: r.email,
        name: r.name,
        role: r.role as Role,
        disabled: r.disabled === 1 || r.disabled === true,
        teams: teamsOf.get(r.id) ?? [],
        oidcProvider: r.oidc_provider,
        oidcSubject: r.oidc_subject,
        createdAt: ms(r.created_at),
        lastLoginAt: r.last_login_at === null ? null : ms(r.last_login_at)
      }
      users.set(user.id, user)
      byEmail.set(user.email, user)
      if (user.oidcProvider !== null && user.oidcSubject !== null) byIdentity.set(identityKey(user.oidcProvider, user.oidcSubject), user)
    }
    const teams = new Map<string, DirectoryTeam>()
    const teamsByName = new Map<string, DirectoryTeam>()
    for (const r of [...teamRows].sort((a, b) => ms(a.created_at) - ms(b.created_at) || a.id.localeCompare(b.id))) {
      const team: DirectoryTeam = { id: r.id, name: r.name, createdAt: ms(r.created_at) }
      teams.set(team.id, team)
      teamsByName.set(team.name.toLowerCase(), team)
    }
    return { users, byEmail, byIdentity, teams, teamsByName, members } satisfies DirectorySnapshot
  }).pipe(Effect.orDie)

export const userView = (u: DirectoryUser): UserView => ({
  id: u.id,
  email: u.email,
  name: u.name,
  role: u.role,
  disabled: u.disabled,
  teams: u.teams,
  oidcProvider: u.oidcProvider,
  oidcSubject: u.oidcSubject,
  createdAt: toIso(u.createdAt)!,
  lastLoginAt: toIso(u.lastLoginAt)
})

export const teamView = (t: DirectoryTeam, memberCount: number): TeamView => ({
  id: t.id,
  name: t.name,
  createdAt: toIso(t.createdAt)!,
  memberCount
})

export const memberView = (m: DirectoryMember, user: DirectoryUser | undefined): TeamMemberView => ({
  userId: m.userId,
  email: user?.email ?? "",
  name: user?.name ?? "",
  role: m.role,
  addedAt: toIso(m.addedAt)!
})
