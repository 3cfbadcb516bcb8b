import * as Schema from "effect/Schema"
import { oneOf } from "./parse.js"

/**
 * People and teams (docs/teams.md): who may manage the gateway, the keys they own, and the levels
 * limits are set on. Tables: migration 0025 (`users`, `teams`, `team_members`, `api_keys.user_id`,
 * `api_keys.team_id`, `admin_sessions.user_id`).
 */

/**
 * A user's role across the gateway: `admin` everything; `team-admin` their teams' members, keys and
 * limits (within the team's own); `member` their own keys and usage; `viewer` reads only.
 */
export const ROLES = ["admin", "team-admin", "member", "viewer"] as const
export const Role = oneOf(ROLES, "role")
export type Role = (typeof ROLES)[number]

/** A member's role within one team. */
export const TEAM_ROLES = ["member", "team-admin"] as const
export const TeamRole = oneOf(TEAM_ROLES, "team role")
export type TeamRole = (typeof TEAM_ROLES)[number]

/**
 * The levels a limit is set on, outermost first. A request must be within every level's limits;
 * a level's limit cannot exceed its parent's. The one organisation's subject id is `ORGANISATION_ID`.
 */
export const LEVELS = ["organisation", "team", "user", "key"] as const
export const Level = oneOf(LEVELS, "level")
export type Level = (typeof LEVELS)[number]
export const ORGANISATION_ID = "org"

/** Id prefixes: a subject's id says its level (keys are `key_…`). */
export const USER_ID_PREFIX = "usr_"
export const TEAM_ID_PREFIX = "team_"

/** The level a subject id belongs to (`org`, `team_…`, `usr_…`, else a key). */
export const levelOf = (subjectId: string): Level =>
  subjectId === ORGANISATION_ID
    ? "organisation"
    : subjectId.startsWith(TEAM_ID_PREFIX)
      ? "team"
      : subjectId.startsWith(USER_ID_PREFIX)
        ? "user"
        : "key"

export const Email = Schema.String.pipe(
  Schema.trimmed(),
  Schema.filter((s) => /^[^\s@]+@[^\s@]+$/.test(s), { message: (i) => `email must look like name@domain (got ${JSON.stringify(i.actual)})` })
)
