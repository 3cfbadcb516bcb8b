import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { DisplayName, Role, TeamRole, UserEmail } from "../../domain/teams.js"
import { lazy } from "../handler.js"
import { json, remoteOptions, ServerUrl } from "../options.js"
import { schemaArg, schemaOption, schemaOptions } from "../schema.js"

const impl = () => import("./teams.impl.js")

/** Local by default (the database in DATA_DIR, as `gateway keys`); `--url` runs the command against a running gateway. */
const where = {
  url: schemaOption("url", ServerUrl).pipe(
    Options.withDescription("A running gateway's address: the command goes through its API instead of the local database."),
    Options.optional
  ),
  apiKey: remoteOptions.apiKey
}
const force = Options.boolean("force").pipe(
  Options.withDescription("Remove even when it owns keys: those keys are disabled and left without an owner (docs/teams.md).")
)
const userArg = Args.text({ name: "user" }).pipe(Args.withDescription("A user's id (usr_…) or email."))
const teamArg = Args.text({ name: "team" }).pipe(Args.withDescription("A team's id (team_…) or name."))

export const userAddOptions = {
  email: schemaOption("email", UserEmail).pipe(Options.withDescription("The user's email (unique, stored lower-cased).")),
  name: schemaOption("name", DisplayName("name")).pipe(
    Options.withDescription("A display name (default: the email's local part)."),
    Options.optional
  ),
  role: schemaOption("role", Role).pipe(Options.withDescription("admin, team-admin, member (default) or viewer."), Options.optional),
  team: schemaOptions("team", DisplayName("team")).pipe(Options.withDescription("A team (id or name) the user joins as a member; repeat.")),
  ...where,
  json
}
export const userListOptions = { ...where, json }
export const userUpdateOptions = {
  user: userArg,
  email: schemaOption("email", UserEmail).pipe(Options.withDescription("A new email."), Options.optional),
  name: schemaOption("name", DisplayName("name")).pipe(Options.withDescription("A new display name."), Options.optional),
  role: schemaOption("role", Role).pipe(Options.withDescription("A new role: admin, team-admin, member or viewer."), Options.optional),
  team: schemaOptions("team", DisplayName("team")).pipe(Options.withDescription("The user's teams (id or name), replacing them; repeat.")),
  disable: Options.boolean("disable").pipe(Options.withDescription("The user can no longer sign in; their sessions end.")),
  enable: Options.boolean("enable").pipe(Options.withDescription("The user can sign in again.")),
  ...where,
  json
}
export const userRemoveOptions = { user: userArg, force, ...where, json }

export const teamAddOptions = { name: schemaArg("name", DisplayName("name")), ...where, json }
export const teamListOptions = { ...where, json }
export const teamRemoveOptions = { team: teamArg, force, ...where, json }
export const teamMembersOptions = { team: teamArg, ...where, json }
export const teamAddMemberOptions = {
  team: teamArg,
  user: userArg,
  role: schemaOption("role", TeamRole).pipe(
    Options.withDescription("member (default) or team-admin; a member already in the team gets this role."),
    Options.optional
  ),
  ...where,
  json
}
export const teamRemoveMemberOptions = { team: teamArg, user: userArg, ...where, json }

export const usersCommand = Command.make("users").pipe(
  Command.withDescription("Manage the people who use the gateway (docs/teams.md); the local database, or a gateway with --url."),
  Command.withSubcommands([
    Command.make(
      "add",
      userAddOptions,
      lazy(impl, (m) => m.userAdd)
    ).pipe(Command.withDescription("Add a user.")),
    Command.make(
      "list",
      userListOptions,
      lazy(impl, (m) => m.userList)
    ).pipe(Command.withDescription("List users, their roles and teams.")),
    Command.make(
      "update",
      userUpdateOptions,
      lazy(impl, (m) => m.userUpdate)
    ).pipe(Command.withDescription("Change a user's email, name, role, teams, or disable or enable them.")),
    Command.make(
      "remove",
      userRemoveOptions,
      lazy(impl, (m) => m.userRemove)
    ).pipe(Command.withDescription("Remove a user (refused while they own keys, unless --force)."))
  ])
)

export const teamsCommand = Command.make("teams").pipe(
  Command.withDescription("Manage teams and their members (docs/teams.md); the local database, or a gateway with --url."),
  Command.withSubcommands([
    Command.make(
      "add",
      teamAddOptions,
      lazy(impl, (m) => m.teamAdd)
    ).pipe(Command.withDescription("Add a team.")),
    Command.make(
      "list",
      teamListOptions,
      lazy(impl, (m) => m.teamList)
    ).pipe(Command.withDescription("List teams.")),
    Command.make(
      "remove",
      teamRemoveOptions,
      lazy(impl, (m) => m.teamRemove)
    ).pipe(Command.withDescription("Remove a team (refused while it owns keys, unless --force).")),
    Command.make(
      "members",
      teamMembersOptions,
      lazy(impl, (m) => m.teamMembers)
    ).pipe(Command.withDescription("List a team's members.")),
    Command.make(
      "add-member",
      teamAddMemberOptions,
      lazy(impl, (m) => m.teamAddMember)
    ).pipe(Command.withDescription("Add a user to a team, or change their role in it.")),
    Command.make(
      "remove-member",
      teamRemoveMemberOptions,
      lazy(impl, (m) => m.teamRemoveMember)
    ).pipe(Command.withDescription("Take a user out of a team."))
  ])
)
