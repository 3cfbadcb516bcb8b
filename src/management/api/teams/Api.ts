import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
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
import { CONFIGURATION, Roles } from "../Roles.js"

/** `?force=true`: remove a user or team that owns keys; the keys are disabled and left without an owner (docs/teams.md). */
const RemoveQuery = Schema.Struct({ force: Schema.optional(Schema.BooleanFromString) }).annotations(strict)
const MemberPath = Schema.Struct({ id: Schema.String, userId: Schema.String })

/** People (docs/teams.md, "People and teams"): `:id` is a user's id or email. */
export class UsersGroup extends HttpApiGroup.make("users")
  .add(HttpApiEndpoint.get("list", "/api/users").addSuccess(Schema.Struct({ users: Schema.Array(UserView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/users")
      .setPayload(CreateUser)
      .addSuccess(UserView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("get", "/api/users/:id").setPath(IdPath).addSuccess(UserView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/api/users/:id")
      .setPath(IdPath)
      .setPayload(UpdateUser)
      .addSuccess(UserView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
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
  .add(HttpApiEndpoint.get("list", "/api/teams").addSuccess(Schema.Struct({ teams: Schema.Array(TeamView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/teams")
      .setPayload(CreateTeam)
      .addSuccess(TeamView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("get", "/api/teams/:id").setPath(IdPath).addSuccess(TeamView).addError(NotFound))
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
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ members: Schema.Array(TeamMemberView) }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("addMember", "/api/teams/:id/members")
      .setPath(IdPath)
      .setPayload(AddTeamMember)
      .addSuccess(TeamMemberView, { status: 201 })
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("removeMember", "/api/teams/:id/members/:userId")
      .setPath(MemberPath)
      .addSuccess(Schema.Struct({ removed: TeamMemberView }))
      .addError(NotFound)
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
  .annotate(Roles, CONFIGURATION) {}
