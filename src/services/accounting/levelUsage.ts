import type * as SqlClient from "@effect/sql/SqlClient"
import { levelOf } from "../../domain/teams.js"

/**
 * Which usage rows count toward a subject, as a condition on `usage` (the spend and tokens a budget
 * or a token limit starts from when it is loaded): a key's own rows; a user's, those of the keys
 * they own; a team's, those of the keys it owns and of its members' keys that name no team of their
 * own (the rule `ancestorsOf` applies on the request path); the organisation's, every row with a
 * key. Ownership is read as it is now: a key that changed owner brings its past rows along.
 */
export const usageOfSubject = (sql: SqlClient.SqlClient, subjectId: string) => {
  switch (levelOf(subjectId)) {
    case "key":
      return sql`api_key_id = ${subjectId}`
    case "user":
      return sql`api_key_id IN (SELECT id FROM api_keys WHERE user_id = ${subjectId})`
    case "team":
      return sql`api_key_id IN (SELECT id FROM api_keys WHERE team_id = ${subjectId}
        OR (team_id IS NULL AND user_id IN (SELECT user_id FROM team_members WHERE team_id = ${subjectId})))`
    case "organisation":
      return sql`api_key_id IS NOT NULL`
  }
}
