import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Forbidden, NotFound } from "../../../domain/errors.js"
import { Directory, memberView, teamView, userView } from "../../../services/teams/Directory.js"
import { ManagementApi } from "../Api.js"
import { canManageTeam, canReadTeam, canSeeUser, refusalToCreateUser, refusalToUpdateUser } from "../access.js"
import { actor, Principal } from "../Principal.js"

/** 403 naming the caller's role and why (docs/teams.md, "Roles and access"). */
const refuse = (role: string, why: string) => Effect.fail(new Forbidden({ message: `the role ${role} may not do this: ${why}` }))

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
    return (
      handlers
        // Each caller sees the users their role may (access.ts): admins and viewers all, others themselves and their teams' members.
        .handle("list", () =>
          Effect.gen(function* () {
            const { user } = yield* Principal
            return { users: (yield* directory.listUsers).filter((u) => canSeeUser(user, u)).map(userView) }
          })
        )
        .handle("create", ({ payload }) =>
          Effect.gen(function* () {
            const { user } = yield* Principal
            const teams = (payload.teamIds ?? []).map((ref) => directory.findTeam(ref)?.id ?? ref)
            const refused = refusalToCreateUser(user, payload.role ?? "member", teams)
            if (refused !== undefined) return yield* refuse(user.role, refused)
            return userView(yield* directory.createUser(payload, yield* actor))
          })
        )
        .handle("get", ({ path }) =>
          Effect.gen(function* () {
            const { user } = yield* Principal
            const target = yield* found(path.id)
            if (!canSeeUser(user, target)) return yield* new NotFound({ message: `no user with id or email ${JSON.stringify(path.id)}` })
            return userView(target)
          })
        )
        .handle("update", ({ path, payload }) =>
          Effect.gen(function* () {
            const { user } = yield* Principal
            const target = yield* found(path.id)
            const refused = refusalToUpdateUser(user, target, payload, directory.user)
            if (refused !== undefined) return yield* refuse(user.role, refused)
            return userView(yield* directory.updateUser(path.id, payload, yield* actor))
          })
        )
        .handle("remove", ({ path, urlParams }) =>
          Effect.flatMap(actor, (a) =>
            Effect.map(directory.removeUser(path.id, { force: urlParams.force === true, actor: a }), (r) => ({
              removed: userView(r.removed),
              disabledKeys: r.disabledKeys
            }))
          )
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
    /** The team, if the caller may read it (404 as an unknown one otherwise). */
    const readable = (ref: string) =>
      Effect.gen(function* () {
        const { user } = yield* Principal
        const team = yield* found(ref)
        if (!canReadTeam(user, team.id)) return yield* new NotFound({ message: `no team with id or name ${JSON.stringify(ref)}` })
        return team
      })
    /** The team, if the caller may change its members (an admin, or a team-admin of it). */
    const manageable = (ref: string) =>
      Effect.gen(function* () {
        const { user } = yield* Principal
        const team = yield* found(ref)
        if (!canManageTeam(user, team.id)) return yield* refuse(user.role, `you do not administer ${team.id}`)
        return team
      })
    return handlers
      .handle("list", () =>
        Effect.gen(function* () {
          const { user } = yield* Principal
          return { teams: (yield* directory.listTeams).filter((t) => canReadTeam(user, t.id)).map(view) }
        })
      )
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => Effect.map(directory.createTeam(payload, a), view)))
      .handle("get", ({ path }) => Effect.map(readable(path.id), view))
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
        Effect.flatMap(readable(path.id), () =>
          Effect.map(directory.listMembers(path.id), (list) => ({ members: list.map((m) => memberView(m, directory.user(m.userId))) }))
        )
      )
      .handle("addMember", ({ path, payload }) =>
        Effect.flatMap(manageable(path.id), () => actor).pipe(
          Effect.flatMap((a) =>
            Effect.map(directory.addMember(path.id, payload.userId, payload.role ?? "member", a), (m) =>
              memberView(m, directory.user(m.userId))
            )
          )
        )
      )
      .handle("removeMember", ({ path }) =>
        Effect.flatMap(manageable(path.id), () => actor).pipe(
          Effect.flatMap((a) =>
            Effect.map(directory.removeMember(path.id, path.userId, a), (m) => ({ removed: memberView(m, directory.user(m.userId)) }))
          )
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
