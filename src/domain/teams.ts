import * as Schema from "effect/Schema"
import { oneOf, strict } from "./parse.js"

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
  Schema.filter((s) => /^[^\s@]+@[^\s@]+$/.test(s), {
    message: (i) => `email must look like name@domain (got ${JSON.stringify(i.actual)})`
  })
)

/** A user's email as stored: trimmed and lower-cased (unique across users). */
export const UserEmail = Email.pipe(Schema.maxLength(254, { message: () => "email must be at most 254 characters" }))

/** A user's or team's display name. */
export const DisplayName = (what: string) =>
  Schema.Trim.pipe(
    Schema.minLength(1, { message: () => `${what} must not be empty` }),
    Schema.maxLength(128, { message: () => `${what} must be at most 128 characters` })
  )

/** Teams named on a user: ids (`team_…`) or names. */
const TeamRefs = Schema.Array(Schema.String)

/** `POST /api/users`. `teamIds`: the teams the user joins as a member (ids or names). */
export const CreateUser = Schema.Struct({
  email: UserEmail,
  name: Schema.optional(DisplayName("name")),
  /** Default `member`. */
  role: Schema.optional(Role),
  teamIds: Schema.optional(TeamRefs)
}).annotations(strict)
export type CreateUser = typeof CreateUser.Type

/** `PATCH /api/users/{id}`: the fields given change; `teamIds` replaces the user's teams (a team kept keeps its role). */
export const UpdateUser = Schema.Struct({
  email: Schema.optional(UserEmail),
  name: Schema.optional(DisplayName("name")),
  role: Schema.optional(Role),
  /** true: the user can no longer sign in, and their sessions end. */
  disabled: Schema.optional(Schema.Boolean),
  teamIds: Schema.optional(TeamRefs)
}).annotations(strict)
export type UpdateUser = typeof UpdateUser.Type

export const UserTeam = Schema.Struct({ teamId: Schema.String, role: TeamRole })

export const UserView = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  name: Schema.String,
  role: Role,
  disabled: Schema.Boolean,
  teams: Schema.Array(UserTeam),
  /** The single sign-on identity the user signs in with (null: none). */
  oidcProvider: Schema.NullOr(Schema.String),
  oidcSubject: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  lastLoginAt: Schema.NullOr(Schema.String)
})
export type UserView = typeof UserView.Type

/** `POST /api/teams`. */
export const CreateTeam = Schema.Struct({ name: DisplayName("name") }).annotations(strict)
export type CreateTeam = typeof CreateTeam.Type
/** `PATCH /api/teams/{id}`. */
export const UpdateTeam = Schema.Struct({ name: Schema.optional(DisplayName("name")) }).annotations(strict)
export type UpdateTeam = typeof UpdateTeam.Type

export const TeamView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  createdAt: Schema.String,
  memberCount: Schema.Number
})
export type TeamView = typeof TeamView.Type

/** `POST /api/teams/{id}/members`: `userId` an id or an email; `role` default `member`. Adding a member again sets the role. */
export const AddTeamMember = Schema.Struct({
  userId: Schema.String.pipe(Schema.minLength(1, { message: () => "userId must not be empty" })),
  role: Schema.optional(TeamRole)
}).annotations(strict)
export type AddTeamMember = typeof AddTeamMember.Type

export const TeamMemberView = Schema.Struct({
  userId: Schema.String,
  email: Schema.String,
  name: Schema.String,
  role: TeamRole,
  addedAt: Schema.String
})
export type TeamMemberView = typeof TeamMemberView.Type

/** The one organisation above the teams (its name kept in the settings). */
export const OrganisationView = Schema.Struct({ id: Schema.Literal(ORGANISATION_ID), name: Schema.String })
export type OrganisationView = typeof OrganisationView.Type
export const UpdateOrganisation = Schema.Struct({ name: DisplayName("name") }).annotations(strict)
export type UpdateOrganisation = typeof UpdateOrganisation.Type

/** The first admin the upgrade makes (docs/teams.md, "Upgrading a single-user install"). */
export const FIRST_ADMIN = { id: "usr_admin", name: "admin", email: "admin@localhost" } as const
