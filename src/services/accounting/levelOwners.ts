import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { type Level, levelOf, ORGANISATION_ID } from "../../domain/teams.js"

/**
 * Who is above whom (docs/accounting.md, "Limits at every level"): each key's owner (`api_keys.user_id`
 * or `team_id`), each user's teams (`team_members`), and the names the refusals and the API's
 * messages show, read from the directory's tables (migration 0025) whenever the change counter
 * moves. The limits' request path reads `above`, worked out once per key and kept until the next load.
 */
export interface Owners {
  readonly keys: ReadonlyMap<string, { readonly name: string; readonly userId: string | null; readonly teamId: string | null }>
  readonly users: ReadonlyMap<string, { readonly email: string; readonly teams: ReadonlyArray<string> }>
  readonly teams: ReadonlyMap<string, { readonly name: string }>
  readonly usersByEmail: ReadonlyMap<string, string>
  readonly teamsByName: ReadonlyMap<string, string>
}

export const NO_OWNERS: Owners = { keys: new Map(), users: new Map(), teams: new Map(), usersByEmail: new Map(), teamsByName: new Map() }

/** The directory's tables and the keys' owners, whole. A table missing (a store not migrated yet) reads as empty. */
export const loadOwners = (sql: SqlClient.SqlClient): Effect.Effect<Owners> =>
  Effect.gen(function* () {
    const rows = <A extends object>(q: Effect.Effect<ReadonlyArray<A>, unknown>) => Effect.orElseSucceed(q, (): ReadonlyArray<A> => [])
    const keyRows = yield* rows(sql<{ id: string; name: string; user_id: string | null; team_id: string | null }>`
      SELECT id, name, user_id, team_id FROM api_keys`)
    const userRows = yield* rows(sql<{ id: string; email: string }>`SELECT id, email FROM users`)
    const teamRows = yield* rows(sql<{ id: string; name: string }>`SELECT id, name FROM teams`)
    const memberRows = yield* rows(
      sql<{ team_id: string; user_id: string }>`SELECT team_id, user_id FROM team_members ORDER BY created_at, team_id`
    )
    const teamsOf = new Map<string, Array<string>>()
    for (const m of memberRows) {
      const list = teamsOf.get(m.user_id)
      if (list) list.push(m.team_id)
      else teamsOf.set(m.user_id, [m.team_id])
    }
    return {
      keys: new Map(keyRows.map((k) => [k.id, { name: k.name, userId: k.user_id ?? null, teamId: k.team_id ?? null }])),
      users: new Map(userRows.map((u) => [u.id, { email: u.email, teams: teamsOf.get(u.id) ?? [] }])),
      teams: new Map(teamRows.map((t) => [t.id, { name: t.name }])),
      usersByEmail: new Map(userRows.map((u) => [u.email.toLowerCase(), u.id])),
      teamsByName: new Map(teamRows.map((t) => [t.name.toLowerCase(), t.id]))
    }
  })

/**
 * The levels above a subject whose limits bind it too, nearest first, the organisation last:
 * - a key: its user (`user_id`), then its team (`team_id`), or, for a key of a user without a team
 *   of its own, every team the user belongs to; then the organisation;
 * - a user: each of their teams, then the organisation;
 * - a team: the organisation; the organisation: none.
 */
export const ancestorsOf = (owners: Owners, subjectId: string): ReadonlyArray<string> => {
  switch (levelOf(subjectId)) {
    case "organisation":
      return []
    case "team":
      return [ORGANISATION_ID]
    case "user":
      return [...(owners.users.get(subjectId)?.teams ?? []), ORGANISATION_ID]
    case "key": {
      const key = owners.keys.get(subjectId)
      if (key === undefined) return [ORGANISATION_ID]
      const out: Array<string> = []
      if (key.userId !== null) out.push(key.userId)
      if (key.teamId !== null) out.push(key.teamId)
      else if (key.userId !== null) out.push(...(owners.users.get(key.userId)?.teams ?? []))
      out.push(ORGANISATION_ID)
      return out
    }
  }
}

/** How a subject is named in messages: `team 'research' (team_ab12)`, `user 'ana@example.com' (usr_…)`, `key 'ci' (key_…)`, `the organisation`. */
export const labelOf = (owners: Owners, subjectId: string): string => {
  const level: Level = levelOf(subjectId)
  switch (level) {
    case "organisation":
      return "the organisation"
    case "team": {
      const t = owners.teams.get(subjectId)
      return t ? `team '${t.name}' (${subjectId})` : `team ${subjectId}`
    }
    case "user": {
      const u = owners.users.get(subjectId)
      return u ? `user '${u.email}' (${subjectId})` : `user ${subjectId}`
    }
    case "key": {
      const k = owners.keys.get(subjectId)
      return k ? `key '${k.name}' (${subjectId})` : `key ${subjectId}`
    }
  }
}

/** A subject's name alone (the view's `name`). */
export const nameOf = (owners: Owners, subjectId: string): string => {
  switch (levelOf(subjectId)) {
    case "organisation":
      return "organisation"
    case "team":
      return owners.teams.get(subjectId)?.name ?? subjectId
    case "user":
      return owners.users.get(subjectId)?.email ?? subjectId
    case "key":
      return owners.keys.get(subjectId)?.name ?? subjectId
  }
}
