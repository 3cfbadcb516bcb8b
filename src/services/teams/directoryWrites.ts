/**
 * The directory's changes: users, teams and members created, changed and removed, single sign-on's
 * sign-in, each checked against what is in memory (read fresh first), written, audited, and the
 * snapshot loaded again. What the rules decide is in docs/teams.md.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import {
  type CreateTeam,
  type CreateUser,
  type Role,
  TEAM_ID_PREFIX,
  type TeamRole,
  USER_ID_PREFIX,
  type UpdateTeam,
  type UpdateUser
} from "../../domain/teams.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import type { StoreVersionShape } from "../../platform/store/StoreVersion.js"
import { type DirectoryMember, type DirectorySnapshot, type DirectoryTeam, type DirectoryUser, identityKey } from "./directoryRows.js"
import type { SignInIdentity } from "./Directory.js"

export interface DirectoryWritesDeps {
  readonly sql: SqlClient.SqlClient
  readonly writer: BatchWriterShape | undefined
  readonly version: StoreVersionShape | undefined
  /** The snapshot, fresh: read again first if another process changed the store. */
  readonly fresh: Effect.Effect<DirectorySnapshot>
  /** Loads the snapshot again after a write here. */
  readonly reload: Effect.Effect<DirectorySnapshot>
}

const newId = (prefix: string) => prefix + crypto.randomBytes(8).toString("hex")

const normalEmail = (email: string) => email.trim().toLowerCase()

/** A user by id, or by email (any case). */
export const findUserIn = (s: DirectorySnapshot, ref: string): DirectoryUser | undefined =>
  s.users.get(ref) ?? s.byEmail.get(normalEmail(ref))

/** A team by id, or by name (any case). */
export const findTeamIn = (s: DirectorySnapshot, ref: string): DirectoryTeam | undefined =>
  s.teams.get(ref) ?? s.teamsByName.get(ref.trim().toLowerCase())

/** The enabled admins, oldest first. */
export const adminsIn = (s: DirectorySnapshot): ReadonlyArray<DirectoryUser> =>
  Array.from(s.users.values()).filter((u) => u.role === "admin" && !u.disabled)

/** The keys a user or team owns, as `name (id)`. */
const keysOwned = (sql: SqlClient.SqlClient, column: "user_id" | "team_id", id: string) =>
  Effect.orDie(
    column === "user_id"
      ? sql<{ id: string; name: string }>`SELECT id, name FROM api_keys WHERE user_id = ${id} ORDER BY created_at`
      : sql<{ id: string; name: string }>`SELECT id, name FROM api_keys WHERE team_id = ${id} ORDER BY created_at`
  )

export const makeDirectoryWrites = ({ sql, writer, version, fresh, reload }: DirectoryWritesDeps) => {
  const audit = (actor: string, action: string, target: string, detail: string | null = null) =>
    writer?.append("audit_log", { ts: Date.now(), actor, action, target, detail })

  // A statement refused for a duplicate becomes the 409 `conflict` says; anything else is a defect.
  const write = <A>(effect: Effect.Effect<A, unknown>, conflict: string): Effect.Effect<A, Conflict> =>
    Effect.catchAll(effect, (e) => (isUniqueViolation(e) ? Effect.fail(new Conflict({ message: conflict })) : Effect.die(e)))

  const teamRefs = (s: DirectorySnapshot, refs: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<DirectoryTeam>, BadRequest> => {
    const teams: Array<DirectoryTeam> = []
    for (const ref of refs) {
      const team = findTeamIn(s, ref)
      if (team === undefined) return Effect.fail(new BadRequest({ message: `teamIds: no team with id or name ${JSON.stringify(ref)}` }))
      if (!teams.includes(team)) teams.push(team)
    }
    return Effect.succeed(teams)
  }

  const userOf = (s: DirectorySnapshot, ref: string) => {
    const user = findUserIn(s, ref)
    return user === undefined
      ? Effect.fail(new NotFound({ message: `no user with id or email ${JSON.stringify(ref)}` }))
      : Effect.succeed(user)
  }
  const teamOf = (s: DirectorySnapshot, ref: string) => {
    const team = findTeamIn(s, ref)
    return team === undefined
      ? Effect.fail(new NotFound({ message: `no team with id or name ${JSON.stringify(ref)}` }))
      : Effect.succeed(team)
  }

  const emailTaken = (s: DirectorySnapshot, email: string, self?: string) => {
    const other = s.byEmail.get(email)
    return other !== undefined && other.id !== self
      ? Effect.fail(new Conflict({ message: `email: a user with email ${JSON.stringify(email)} exists (${other.id})` }))
      : Effect.void
  }

  /** The change would leave no enabled admin. */
  const lastAdmin = (s: DirectorySnapshot, user: DirectoryUser, what: string) => {
    const admins = adminsIn(s)
    return admins.length === 1 && admins[0]!.id === user.id
      ? Effect.fail(new Conflict({ message: `${user.id} is the last enabled admin: ${what} would leave nobody to manage the gateway` }))
      : Effect.void
  }

  const insertUser = (u: {
    id: string
    email: string
    name: string
    role: Role
    oidcProvider: string | null
    oidcSubject: string | null
    t: number
    lastLoginAt: number | null
  }) =>
    sql`INSERT INTO users ${sql.insert({
      id: u.id,
      email: u.email,
      name: u.name,
      role: u.role,
      disabled: 0,
      oidc_provider: u.oidcProvider,
      oidc_subject: u.oidcSubject,
      created_at: u.t,
      updated_at: u.t,
      last_login_at: u.lastLoginAt
    })}`

  const insertMembers = (userId: string, teams: ReadonlyArray<{ teamId: string; role: TeamRole }>, t: number) =>
    teams.length === 0
      ? Effect.void
      : sql`INSERT INTO team_members ${sql.insert(teams.map((m) => ({ team_id: m.teamId, user_id: userId, role: m.role, created_at: t })))} ON CONFLICT DO NOTHING`

  const createUser = (input: CreateUser, actor = "system"): Effect.Effect<DirectoryUser, BadRequest | Conflict> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const email = normalEmail(input.email)
      yield* emailTaken(s, email)
      const teams = yield* teamRefs(s, input.teamIds ?? [])
      const id = newId(USER_ID_PREFIX)
      const t = Date.now()
      yield* write(
        sql.withTransaction(
          Effect.zipRight(
            insertUser({
              id,
              email,
              name: input.name ?? email.split("@")[0]!,
              role: input.role ?? "member",
              oidcProvider: null,
              oidcSubject: null,
              t,
              lastLoginAt: null
            }),
            insertMembers(
              id,
              teams.map((team) => ({ teamId: team.id, role: "member" as const })),
              t
            )
          )
        ),
        `email: a user with email ${JSON.stringify(email)} exists`
      )
      audit(actor, "user.create", id, email)
      return (yield* reload).users.get(id)!
    })

  const updateUser = (ref: string, input: UpdateUser, actor = "system"): Effect.Effect<DirectoryUser, BadRequest | NotFound | Conflict> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const user = yield* userOf(s, ref)
      const email = input.email === undefined ? user.email : normalEmail(input.email)
      yield* emailTaken(s, email, user.id)
      const role = input.role ?? user.role
      const disabled = input.disabled ?? user.disabled
      if (role !== "admin" && user.role === "admin") yield* lastAdmin(s, user, `making it ${role}`)
      if (disabled && !user.disabled) yield* lastAdmin(s, user, "disabling it")
      const teams = input.teamIds === undefined ? undefined : yield* teamRefs(s, input.teamIds)
      const t = Date.now()
      yield* write(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`UPDATE users SET email = ${email}, name = ${input.name ?? user.name}, role = ${role}, disabled = ${disabled ? 1 : 0}, updated_at = ${t} WHERE id = ${user.id}`
            if (teams !== undefined) {
              const keep = new Map(user.teams.map((m) => [m.teamId, m.role]))
              yield* sql`DELETE FROM team_members WHERE user_id = ${user.id}`
              yield* insertMembers(
                user.id,
                teams.map((team) => ({ teamId: team.id, role: keep.get(team.id) ?? ("member" as const) })),
                t
              )
            }
            // A disabled user's dashboard sessions end with it.
            if (disabled && !user.disabled) yield* sql`DELETE FROM admin_sessions WHERE user_id = ${user.id}`
          })
        ),
        `email: a user with email ${JSON.stringify(email)} exists`
      )
      audit(actor, "user.update", user.id, Object.keys(input).join(","))
      return (yield* reload).users.get(user.id)!
    })

  /**
   * Keys the subject owns refuse the removal (409 naming them) unless `force`: then they are
   * disabled and left without an owner, so nobody's request runs on a removed person's key.
   */
  const releaseKeys = (column: "user_id" | "team_id", id: string, force: boolean, what: string) =>
    Effect.gen(function* () {
      const keys = yield* keysOwned(sql, column, id)
      if (keys.length === 0) return [] as ReadonlyArray<string>
      if (!force) {
        return yield* new Conflict({
          message: `${what} owns ${keys.length} key(s): ${keys.map((k) => `${k.name} (${k.id})`).join(", ")}; give them another owner (PATCH /api/keys/{id}) or remove with ?force=true, which disables them and leaves them without an owner`
        })
      }
      return keys.map((k) => k.id)
    })

  const removeUser = (ref: string, options: { readonly force?: boolean; readonly actor?: string } = {}) =>
    Effect.gen(function* () {
      const s = yield* fresh
      const user = yield* userOf(s, ref)
      yield* lastAdmin(s, user, "removing it")
      const released = yield* releaseKeys("user_id", user.id, options.force === true, `user ${user.email} (${user.id})`)
      yield* Effect.orDie(
        sql.withTransaction(
          Effect.gen(function* () {
            if (released.length > 0) yield* sql`UPDATE api_keys SET enabled = 0, user_id = NULL WHERE user_id = ${user.id}`
            yield* sql`DELETE FROM team_members WHERE user_id = ${user.id}`
            yield* sql`DELETE FROM admin_sessions WHERE user_id = ${user.id}`
            yield* sql`DELETE FROM users WHERE id = ${user.id}`
          })
        )
      )
      // The keys' cache (another service) learns now that its rows changed, not at its next check.
      if (released.length > 0 && version !== undefined) yield* version.changed
      audit(options.actor ?? "system", "user.remove", user.id, released.length > 0 ? `keys disabled: ${released.join(",")}` : user.email)
      yield* reload
      return { removed: user, disabledKeys: released }
    })

  const createTeam = (input: CreateTeam, actor = "system"): Effect.Effect<DirectoryTeam, Conflict> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const name = input.name
      const other = s.teamsByName.get(name.toLowerCase())
      if (other !== undefined)
        return yield* new Conflict({ message: `name: a team named ${JSON.stringify(other.name)} exists (${other.id})` })
      const id = newId(TEAM_ID_PREFIX)
      const t = Date.now()
      yield* write(
        sql`INSERT INTO teams ${sql.insert({ id, name, created_at: t, updated_at: t })}`,
        `name: a team named ${JSON.stringify(name)} exists`
      )
      audit(actor, "team.create", id, name)
      return (yield* reload).teams.get(id)!
    })

  const updateTeam = (ref: string, input: UpdateTeam, actor = "system"): Effect.Effect<DirectoryTeam, NotFound | Conflict> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const team = yield* teamOf(s, ref)
      const name = input.name ?? team.name
      const other = s.teamsByName.get(name.toLowerCase())
      if (other !== undefined && other.id !== team.id)
        return yield* new Conflict({ message: `name: a team named ${JSON.stringify(other.name)} exists (${other.id})` })
      yield* write(
        sql`UPDATE teams SET name = ${name}, updated_at = ${Date.now()} WHERE id = ${team.id}`,
        `name: a team named ${JSON.stringify(name)} exists`
      )
      audit(actor, "team.update", team.id, name)
      return (yield* reload).teams.get(team.id)!
    })

  const removeTeam = (ref: string, options: { readonly force?: boolean; readonly actor?: string } = {}) =>
    Effect.gen(function* () {
      const s = yield* fresh
      const team = yield* teamOf(s, ref)
      const released = yield* releaseKeys("team_id", team.id, options.force === true, `team ${team.name} (${team.id})`)
      yield* Effect.orDie(
        sql.withTransaction(
          Effect.gen(function* () {
            if (released.length > 0) yield* sql`UPDATE api_keys SET enabled = 0, team_id = NULL WHERE team_id = ${team.id}`
            yield* sql`DELETE FROM team_members WHERE team_id = ${team.id}`
            yield* sql`DELETE FROM teams WHERE id = ${team.id}`
          })
        )
      )
      if (released.length > 0 && version !== undefined) yield* version.changed
      audit(options.actor ?? "system", "team.remove", team.id, released.length > 0 ? `keys disabled: ${released.join(",")}` : team.name)
      yield* reload
      return { removed: team, disabledKeys: released }
    })

  const listMembers = (teamRef: string): Effect.Effect<ReadonlyArray<DirectoryMember>, NotFound> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const team = yield* teamOf(s, teamRef)
      return s.members.get(team.id) ?? []
    })

  const addMember = (teamRef: string, userRef: string, role: TeamRole, actor = "system"): Effect.Effect<DirectoryMember, NotFound> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const team = yield* teamOf(s, teamRef)
      const user = yield* userOf(s, userRef)
      const t = Date.now()
      yield* Effect.orDie(
        sql`INSERT INTO team_members ${sql.insert({ team_id: team.id, user_id: user.id, role, created_at: t })} ON CONFLICT (team_id, user_id) DO UPDATE SET role = excluded.role`
      )
      audit(actor, "team.member.add", team.id, `${user.id} ${role}`)
      const next = yield* reload
      return (next.members.get(team.id) ?? []).find((m) => m.userId === user.id) ?? { userId: user.id, role, addedAt: t }
    })

  const removeMember = (teamRef: string, userRef: string, actor = "system"): Effect.Effect<DirectoryMember, NotFound> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const team = yield* teamOf(s, teamRef)
      const user = findUserIn(s, userRef)
      const member = user === undefined ? undefined : (s.members.get(team.id) ?? []).find((m) => m.userId === user.id)
      if (user === undefined || member === undefined)
        return yield* new NotFound({ message: `${JSON.stringify(userRef)} is not a member of team ${team.name} (${team.id})` })
      yield* Effect.orDie(sql`DELETE FROM team_members WHERE team_id = ${team.id} AND user_id = ${user.id}`)
      audit(actor, "team.member.remove", team.id, user.id)
      yield* reload
      return member
    })

  /**
   * Single sign-on: the user of the identity, else the user with its email (the identity is then
   * linked to it), else a new user with the identity's role and teams (unknown teams skipped).
   * `lastLoginAt` moves. A disabled user is answered as it is: refusing it is the caller's.
   */
  const signIn = (identity: SignInIdentity): Effect.Effect<DirectoryUser> =>
    Effect.gen(function* () {
      const s = yield* fresh
      const email = normalEmail(identity.email)
      const t = Date.now()
      const known = s.byIdentity.get(identityKey(identity.provider, identity.subject)) ?? s.byEmail.get(email)
      if (known !== undefined) {
        const link = known.oidcProvider === null && known.oidcSubject === null
        yield* Effect.orDie(
          link
            ? sql`UPDATE users SET last_login_at = ${t}, oidc_provider = ${identity.provider}, oidc_subject = ${identity.subject}, updated_at = ${t} WHERE id = ${known.id}`
            : sql`UPDATE users SET last_login_at = ${t} WHERE id = ${known.id}`
        )
        if (link) audit(`oidc:${identity.provider}`, "user.link", known.id, identity.subject)
        return (yield* reload).users.get(known.id) ?? { ...known, lastLoginAt: t }
      }
      const id = newId(USER_ID_PREFIX)
      const teams = identity.teams.filter((m) => s.teams.has(m.teamId))
      const made = yield* Effect.either(
        write(
          sql.withTransaction(
            Effect.zipRight(
              insertUser({
                id,
                email,
                name: identity.name.trim() === "" ? email.split("@")[0]! : identity.name.trim(),
                role: identity.role,
                oidcProvider: identity.provider,
                oidcSubject: identity.subject,
                t,
                lastLoginAt: t
              }),
              insertMembers(id, teams, t)
            )
          ),
          "taken"
        )
      )
      const next = yield* reload
      if (made._tag === "Left") {
        // Another sign-in of the same person (another gateway, a second tab) made it first.
        const other = next.byIdentity.get(identityKey(identity.provider, identity.subject)) ?? next.byEmail.get(email)
        if (other === undefined) return yield* Effect.die(new Error(`sign-in of ${email}: the user could be neither made nor found`))
        return other
      }
      audit(`oidc:${identity.provider}`, "user.create", id, email)
      return next.users.get(id)!
    })

  return { createUser, updateUser, removeUser, createTeam, updateTeam, removeTeam, listMembers, addMember, removeMember, signIn }
}
