import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { NotFound } from "../../../domain/errors.js"
import { Directory, memberView, teamView, userView } from "../../../services/teams/Directory.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

const users = HttpApiBuilder.group(ManagementApi, "users", (handlers) =>
  Effect.gen(function* () {
    const directory = yield* Directory
    const found = (ref: string) =>
      Effect.flatMap(directory.refresh, () => {
        const user = directory.findUser(ref)
        return user === undefined
          ? Effect.fail(new NotFound({ message: `no user with id or email ${JSON.stringify(ref)}` }))
          : Effect.succeed(user)
      })
    return handlers
      .handle("list", () => Effect.map(directory.listUsers, (list) => ({ users: list.map(userView) })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => Effect.map(directory.createUser(payload, a), userView)))
      .handle("get", ({ path }) => Effect.map(found(path.id), userView))
      .handle("update", ({ path, payload }) =>
        Effect.flatMap(actor, (a) => Effect.map(directory.updateUser(path.id, payload, a), userView))
      )
      .handle("remove", ({ path, urlParams }) =>
        Effect.flatMap(actor, (a) =>
          Effect.map(directory.removeUser(path.id, { force: urlParams.force === true, actor: a }), (r) => ({
            removed: userView(r.removed),
            disabledKeys: r.disabledKeys
          }))
        )
      )
  })
)

const teams = HttpApiBuilder.group(ManagementApi, "teams", (handlers) =>
  Effect.gen(function* () {
    const directory = yield* Directory
    const view = (team: Parameters<typeof teamView>[0]) => teamView(team, directory.membersOf(team.id).length)
    const found = (ref: string) =>
      Effect.flatMap(directory.refresh, () => {
        const team = directory.findTeam(ref)
        return team === undefined
          ? Effect.fail(new NotFound({ message: `no team with id or name ${JSON.stringify(ref)}` }))
          : Effect.succeed(team)
      })
    return handlers
      .handle("list", () => Effect.map(directory.listTeams, (list) => ({ teams: list.map(view) })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => Effect.map(directory.createTeam(payload, a), view)))
      .handle("get", ({ path }) => Effect.map(found(path.id), view))
      .handle("update", ({ path, payload }) => Effect.flatMap(actor, (a) => Effect.map(directory.updateTeam(path.id, payload, a), view)))
      .handle("remove", ({ path, urlParams }) =>
        Effect.flatMap(actor, (a) =>
          Effect.map(directory.removeTeam(path.id, { force: urlParams.force === true, actor: a }), (r) => ({
            removed: teamView(r.removed, 0),
            disabledKeys: r.disabledKeys
          }))
        )
      )
      .handle("members", ({ path }) =>
        Effect.map(directory.listMembers(path.id), (list) => ({ members: list.map((m) => memberView(m, directory.user(m.userId))) }))
      )
      .handle("addMember", ({ path, payload }) =>
        Effect.flatMap(actor, (a) =>
          Effect.map(directory.addMember(path.id, payload.userId, payload.role ?? "member", a), (m) =>
            memberView(m, directory.user(m.userId))
          )
        )
      )
      .handle("removeMember", ({ path }) =>
        Effect.flatMap(actor, (a) =>
          Effect.map(directory.removeMember(path.id, path.userId, a), (m) => ({ removed: memberView(m, directory.user(m.userId)) }))
        )
      )
  })
)

const organisation = HttpApiBuilder.group(ManagementApi, "organisation", (handlers) =>
  Effect.gen(function* () {
    const directory = yield* Directory
    return handlers
      .handle("get", () => directory.organisation)
      .handle("update", ({ payload }) => Effect.flatMap(actor, (a) => directory.updateOrganisation(payload.name, a)))
  })
)

/** People, teams and the organisation (docs/teams.md). */
export const layer = Layer.mergeAll(users, teams, organisation)
