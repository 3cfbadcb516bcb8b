import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * People and teams (docs/teams.md): `users` (email stored lower-cased; `role` one of admin,
 * team-admin, member, viewer; `oidc_provider`/`oidc_subject` the identity a single sign-on
 * created it from, null for a user made through the API), `teams`, `team_members` (`role`
 * member or team-admin within that team). A key belongs to a user or a team
 * (`api_keys.user_id`, `api_keys.team_id`, null on both: the gateway's own, as before); a
 * dashboard session belongs to a user (`admin_sessions.user_id`, null: the admin password's).
 * The directory's cache (keys' owners and the limits above them on the request path) reloads on
 * the change counter of 0021, so the tables get its triggers.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0,
    oidc_provider TEXT,
    oidc_subject TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_login_at INTEGER
  )`
  yield* sql`CREATE UNIQUE INDEX users_oidc ON users (oidc_provider, oidc_subject)`
  yield* sql`CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE TABLE team_members (
    team_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (team_id, user_id)
  )`
  yield* sql`CREATE INDEX team_members_user ON team_members (user_id)`
  yield* sql`ALTER TABLE api_keys ADD COLUMN user_id TEXT`
  yield* sql`ALTER TABLE api_keys ADD COLUMN team_id TEXT`
  yield* sql`CREATE INDEX api_keys_user ON api_keys (user_id)`
  yield* sql`CREATE INDEX api_keys_team ON api_keys (team_id)`
  yield* sql`ALTER TABLE admin_sessions ADD COLUMN user_id TEXT`
  for (const table of ["users", "teams", "team_members"])
    for (const op of ["INSERT", "UPDATE", "DELETE"])
      yield* sql.unsafe(
        `CREATE TRIGGER ${table}_changed_${op.toLowerCase()} AFTER ${op} ON ${table} BEGIN UPDATE store_changes SET n = n + 1 WHERE id = 1; END`
      )
})
