import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, Forbidden, NotFound } from "../../../domain/errors.js"
import { strict } from "../../../domain/parse.js"
import {
  AddTeamMember,
  CreateTeam,
  CreateUser,
  OrganisationView,
  TeamMemberView,
  TeamView,
  UpdateOrganisation,
  UpdateTeam,
  UpdateUser,
  UserView
} from "../../../domain/teams.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { CATALOG, CONFIGURATION, EVERY_ROLE, Roles, TEAM_ADMINS } from "../Roles.js"

/** `?force=true`: remove a user or team that owns keys; the keys are disabled and left without an owner (docs/teams.md). */
const RemoveQuery = Schema.Struct({ force: Schema.optional(Schema.BooleanFromString) }).annotations(strict)
const MemberPath = Schema.Struct({ id: Schema.String, userId: Schema.String })

/** People (docs/teams.md, "People and teams"): `:id` is a user's id or email. */
export class UsersGroup extends HttpApiGroup.make("users")
  .add(
    HttpApiEndpoint.get("list", "/api/users")
      .annotate(Roles, EVERY_ROLE)
      .addSuccess(Schema.Struct({ users: Schema.Array(UserView) }))
  )
  .add(
    HttpApiEndpoint.post("create", "/api/users")
      .annotate(Roles, TEAM_ADMINS)
      .setPayload(CreateUser)
      .addSuccess(UserView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
      .addError(Forbidden)
  )
  .add(HttpApiEndpoint.get("get", "/api/users/:id").annotate(Roles, EVERY_ROLE).setPath(IdPath).addSuccess(UserView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/api/users/:id")
      .annotate(Roles, TEAM_ADMINS)
      .setPath(IdPath)
      .setPayload(UpdateUser)
      .addSuccess(UserView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/users/:id")
      .setPath(IdPath)
      .setUrlParams(RemoveQuery)
      .addSuccess(Schema.Struct({ removed: UserView, disabledKeys: Schema.Array(Schema.String) }))
      .addError(NotFound)
      .addError(Conflict)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}

/** Teams and their members: `:id` is a team's id or name, `:userId` a user's id or email. */
export class TeamsGroup extends HttpApiGroup.make("teams")
  .add(
    HttpApiEndpoint.get("list", "/api/teams")
      .annotate(Roles, EVERY_ROLE)
      .addSuccess(Schema.Struct({ teams: Schema.Array(TeamView) }))
  )
  .add(
    HttpApiEndpoint.post("create", "/api/teams")
      .setPayload(CreateTeam)
      .addSuccess(TeamView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("get", "/api/teams/:id").annotate(Roles, EVERY_ROLE).setPath(IdPath).addSuccess(TeamView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/api/teams/:id")
      .setPath(IdPath)
      .setPayload(UpdateTeam)
      .addSuccess(TeamView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/teams/:id")
      .setPath(IdPath)
      .setUrlParams(RemoveQuery)
      .addSuccess(Schema.Struct({ removed: TeamView, disabledKeys: Schema.Array(Schema.String) }))
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.get("members", "/api/teams/:id/members")
      .annotate(Roles, EVERY_ROLE)
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ members: Schema.Array(TeamMemberView) }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("addMember", "/api/teams/:id/members")
      .annotate(Roles, TEAM_ADMINS)
      .setPath(IdPath)
      .setPayload(AddTeamMember)
      .addSuccess(TeamMemberView, { status: 201 })
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("removeMember", "/api/teams/:id/members/:userId")
      .annotate(Roles, TEAM_ADMINS)
      .setPath(MemberPath)
      .addSuccess(Schema.Struct({ removed: TeamMemberView }))
      .addError(NotFound)
      .addError(Forbidden)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}

/** The one organisation above the teams. */
export class OrganisationGroup extends HttpApiGroup.make("organisation")
  .add(HttpApiEndpoint.get("get", "/api/organisation").addSuccess(OrganisationView))
  .add(
    HttpApiEndpoint.patch("update", "/api/organisation").setPayload(UpdateOrganisation).addSuccess(OrganisationView).addError(BadRequest)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CATALOG) {}
