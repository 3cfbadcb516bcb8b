import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * People and teams (docs/teams.md): users, teams, their members, a key's owner and a session's user.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    disabled BIGINT NOT NULL DEFAULT 0,
    oidc_provider TEXT,
    oidc_subject TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    last_login_at BIGINT
  )`
  yield* sql`CREATE UNIQUE INDEX users_oidc ON users (oidc_provider, oidc_subject)`
  yield* sql`CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE team_members (
    team_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (team_id, user_id)
  )`
  yield* sql`CREATE INDEX team_members_user ON team_members (user_id)`
  yield* sql`ALTER TABLE api_keys ADD COLUMN user_id TEXT`
  yield* sql`ALTER TABLE api_keys ADD COLUMN team_id TEXT`
  yield* sql`CREATE INDEX api_keys_user ON api_keys (user_id)`
  yield* sql`CREATE INDEX api_keys_team ON api_keys (team_id)`
  yield* sql`ALTER TABLE admin_sessions ADD COLUMN user_id TEXT`
  for (const table of ["users", "teams", "team_members"]) yield* notifyOnChange(sql, table)
})
