/**
 * Who a usage row counts for: the owner of its key as the key is now (docs/teams.md, "Usage by
 * team and user"). Attributed when usage is read, never on the request path: a row carries its key
 * id only, and the key's owner is joined in here. A key of a user counts for that user and for each
 * team the user is a member of; a key of a team for the team (and for its user too, should a key
 * name both); a key with neither, a deleted key and a request without a key count for nobody.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { NotFound } from "../../domain/errors.js"

/** The usage table with its key's owner: `owner_user`, `owner_team` (one row per team a user's key counts for). */
export const ownedUsage = (sql: SqlClient.SqlClient, teams: boolean) =>
  teams
    ? sql`(SELECT usage.*, k.user_id AS owner_user, COALESCE(k.team_id, tm.team_id) AS owner_team FROM usage
          LEFT JOIN api_keys k ON k.id = usage.api_key_id
          LEFT JOIN team_members tm ON k.team_id IS NULL AND tm.user_id = k.user_id) AS usage`
    : sql`(SELECT usage.*, k.user_id AS owner_user FROM usage LEFT JOIN api_keys k ON k.id = usage.api_key_id) AS usage`

/** The conditions of `teamId` (the team's keys and its members' keys) and `userId` (the user's keys). */
export const ownerFilters = (
  sql: SqlClient.SqlClient,
  q: { readonly teamId?: string | undefined; readonly userId?: string | undefined }
) => {
  const parts = []
  if (q.teamId)
    parts.push(
      sql`api_key_id IN (SELECT id FROM api_keys WHERE team_id = ${q.teamId}
            OR (team_id IS NULL AND user_id IN (SELECT user_id FROM team_members WHERE team_id = ${q.teamId})))`
    )
  if (q.userId) parts.push(sql`api_key_id IN (SELECT id FROM api_keys WHERE user_id = ${q.userId})`)
  return parts
}

/** A `teamId` or `userId` filter that names no team or user is a 404 saying which. */
export const checkOwners = (sql: SqlClient.SqlClient, q: { readonly teamId?: string | undefined; readonly userId?: string | undefined }) =>
  Effect.gen(function* () {
    if (q.teamId) {
      const found = yield* sql<{ id: string }>`SELECT id FROM teams WHERE id = ${q.teamId}`.pipe(Effect.orDie)
      if (found.length === 0) return yield* new NotFound({ message: `teamId: no team has the id ${JSON.stringify(q.teamId)}` })
    }
    if (q.userId) {
      const found = yield* sql<{ id: string }>`SELECT id FROM users WHERE id = ${q.userId}`.pipe(Effect.orDie)
      if (found.length === 0) return yield* new NotFound({ message: `userId: no user has the id ${JSON.stringify(q.userId)}` })
    }
  })

/** The names of the keys, teams or users behind these ids (a user's name, else the email). */
export const namesOf = (sql: SqlClient.SqlClient, of: "apiKey" | "team" | "user", ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    if (ids.length === 0) return new Map<string, string>()
    const rows =
      of === "apiKey"
        ? yield* sql<{ id: string; name: string }>`SELECT id, name FROM api_keys WHERE ${sql.in("id", ids)}`
        : of === "team"
          ? yield* sql<{ id: string; name: string }>`SELECT id, name FROM teams WHERE ${sql.in("id", ids)}`
          : yield* sql<{
              id: string
              name: string
            }>`SELECT id, CASE WHEN name = '' THEN email ELSE name END AS name FROM users WHERE ${sql.in("id", ids)}`
    return new Map(rows.map((r) => [r.id, r.name]))
  }).pipe(Effect.orDie)

/** Each key's owner, for the per-request export: the key's name, its user (name, email) and the teams it counts for. */
export interface KeyOwner {
  readonly keyName: string
  readonly userId: string | null
  readonly userName: string | null
  readonly userEmail: string | null
  readonly teams: ReadonlyArray<{ readonly id: string; readonly name: string }>
}

export const keyOwners = (sql: SqlClient.SqlClient, keyIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const out = new Map<string, KeyOwner>()
    if (keyIds.length === 0) return out
    const keys = yield* sql<{
      id: string
      name: string
      user_id: string | null
      team_id: string | null
      user_name: string | null
      user_email: string | null
    }>`SELECT k.id, k.name, k.user_id, k.team_id, u.name AS user_name, u.email AS user_email
        FROM api_keys k LEFT JOIN users u ON u.id = k.user_id WHERE ${sql.in("k.id", keyIds)}`
    const users = [...new Set(keys.flatMap((k) => (k.team_id === null && k.user_id !== null ? [k.user_id] : [])))]
    const memberships =
      users.length === 0
        ? []
        : yield* sql<{
            user_id: string
            team_id: string
          }>`SELECT user_id, team_id FROM team_members WHERE ${sql.in("user_id", users)} ORDER BY team_id`
    const teamIds = [...new Set([...keys.flatMap((k) => (k.team_id ? [k.team_id] : [])), ...memberships.map((m) => m.team_id)])]
    const teamNames =
      teamIds.length === 0
        ? new Map<string, string>()
        : new Map(
            (yield* sql<{ id: string; name: string }>`SELECT id, name FROM teams WHERE ${sql.in("id", teamIds)}`).map((t) => [t.id, t.name])
          )
    const team = (id: string) => ({ id, name: teamNames.get(id) ?? "" })
    for (const k of keys)
      out.set(k.id, {
        keyName: k.name,
        userId: k.user_id,
        userName: k.user_name,
        userEmail: k.user_email,
        teams: k.team_id ? [team(k.team_id)] : memberships.filter((m) => m.user_id === k.user_id).map((m) => team(m.team_id))
      })
    return out
  }).pipe(Effect.orDie)
