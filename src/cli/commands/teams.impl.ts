import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { TeamMemberView, TeamView, UserView } from "../../domain/teams.js"
import { Directory, memberView, teamView, userView } from "../../services/teams/Directory.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { orDash, printJson, table } from "../output.js"
import { explain, type managementClient, remote, withHttp } from "../remote.js"
import { UsageError } from "../schema.js"
import type {
  teamAddMemberOptions,
  teamAddOptions,
  teamListOptions,
  teamMembersOptions,
  teamRemoveMemberOptions,
  teamRemoveOptions,
  userAddOptions,
  userListOptions,
  userRemoveOptions,
  userUpdateOptions
} from "./teams.js"

type Client = Effect.Effect.Success<ReturnType<typeof managementClient>>
interface Where {
  readonly url: Option.Option<string>
  readonly apiKey: Option.Option<string>
}

/** The local database (the directory itself), or the gateway at `--url` through its API. */
const via = <A, E1, E2>(where: Where, local: Effect.Effect<A, E1, Directory>, api: (client: Client) => Effect.Effect<A, E2>) =>
  Option.isSome(where.url)
    ? Effect.gen(function* () {
        const { url, client } = yield* remote(where)
        return yield* api(client).pipe(Effect.mapError(explain(url)))
      }).pipe(withHttp)
    : withLocalGateway(local)

const withTeams = <A>(f: (d: Effect.Effect.Success<typeof Directory>) => Effect.Effect<A, unknown>) => Effect.flatMap(Directory, f)

const teamsOf = (u: UserView) =>
  u.teams.length === 0 ? "-" : u.teams.map((t) => (t.role === "member" ? t.teamId : `${t.teamId} (${t.role})`)).join(", ")

const printUsers = (users: ReadonlyArray<UserView>, json: boolean) =>
  json
    ? printJson({ users })
    : Console.log(
        table(
          ["ID", "EMAIL", "NAME", "ROLE", "TEAMS", "STATUS", "SIGN-IN", "LAST LOGIN"],
          users.map((u) => [
            u.id,
            u.email,
            u.name,
            u.role,
            teamsOf(u),
            u.disabled ? "disabled" : "active",
            u.oidcProvider ?? "-",
            orDash(u.lastLoginAt)
          ])
        )
      )

const printUser = (verb: string, u: UserView, json: boolean) =>
  json ? printJson(u) : Console.log(`${verb} ${u.id} (${u.email}, ${u.role}${u.teams.length > 0 ? `, teams ${teamsOf(u)}` : ""})`)

const printTeams = (teams: ReadonlyArray<TeamView>, json: boolean) =>
  json
    ? printJson({ teams })
    : teams.length === 0
      ? Console.log("no teams yet: add one with `gateway teams add <name>`")
      : Console.log(
          table(
            ["ID", "NAME", "MEMBERS", "CREATED"],
            teams.map((t) => [t.id, t.name, String(t.memberCount), t.createdAt])
          )
        )

const printMembers = (members: ReadonlyArray<TeamMemberView>, json: boolean) =>
  json
    ? printJson({ members })
    : members.length === 0
      ? Console.log("no members yet: add one with `gateway teams add-member <team> <user>`")
      : Console.log(
          table(
            ["USER", "EMAIL", "NAME", "ROLE", "ADDED"],
            members.map((m) => [m.userId, m.email, m.name, m.role, m.addedAt])
          )
        )

const disabledNote = (keys: ReadonlyArray<string>) =>
  keys.length > 0 ? `; keys disabled and left without an owner: ${keys.join(", ")}` : ""

export const userAdd = (opts: Parsed<typeof userAddOptions>) => {
  const payload = {
    email: opts.email,
    name: Option.getOrUndefined(opts.name),
    role: Option.getOrUndefined(opts.role),
    teamIds: opts.team.length > 0 ? opts.team : undefined
  }
  return via(
    opts,
    withTeams((d) => Effect.map(d.createUser(payload, "cli"), userView)),
    (c) => c.users.create({ payload })
  ).pipe(Effect.flatMap((u) => printUser("added", u, opts.json)))
}

export const userList = (opts: Parsed<typeof userListOptions>) =>
  via(
    opts,
    withTeams((d) => Effect.map(d.listUsers, (list) => list.map(userView))),
    (c) => Effect.map(c.users.list(), (r) => r.users)
  ).pipe(Effect.flatMap((users) => printUsers(users, opts.json)))

export const userUpdate = (opts: Parsed<typeof userUpdateOptions>) =>
  Effect.gen(function* () {
    if (opts.disable && opts.enable) return yield* new UsageError({ message: "--disable and --enable: give one of them" })
    const payload = {
      email: Option.getOrUndefined(opts.email),
      name: Option.getOrUndefined(opts.name),
      role: Option.getOrUndefined(opts.role),
      disabled: opts.disable ? true : opts.enable ? false : undefined,
      teamIds: opts.team.length > 0 ? opts.team : undefined
    }
    if (Object.values(payload).every((v) => v === undefined))
      return yield* new UsageError({ message: "nothing to change: give --email, --name, --role, --team, --disable or --enable" })
    const user = yield* via(
      opts,
      withTeams((d) => Effect.map(d.updateUser(opts.user, payload, "cli"), userView)),
      (c) => c.users.update({ path: { id: opts.user }, payload })
    )
    return yield* printUser("updated", user, opts.json)
  })

export const userRemove = (opts: Parsed<typeof userRemoveOptions>) =>
  via(
    opts,
    withTeams((d) =>
      Effect.map(d.removeUser(opts.user, { force: opts.force, actor: "cli" }), (r) => ({
        removed: userView(r.removed),
        disabledKeys: r.disabledKeys
      }))
    ),
    (c) => c.users.remove({ path: { id: opts.user }, urlParams: { force: opts.force ? true : undefined } })
  ).pipe(
    Effect.flatMap((r) =>
      opts.json ? printJson(r) : Console.log(`removed ${r.removed.id} (${r.removed.email})${disabledNote(r.disabledKeys)}`)
    )
  )

export const teamAdd = (opts: Parsed<typeof teamAddOptions>) =>
  via(
    opts,
    withTeams((d) => Effect.map(d.createTeam({ name: opts.name }, "cli"), (t) => teamView(t, 0))),
    (c) => c.teams.create({ payload: { name: opts.name } })
  ).pipe(Effect.flatMap((t) => (opts.json ? printJson(t) : Console.log(`added ${t.id} (${t.name})`))))

export const teamList = (opts: Parsed<typeof teamListOptions>) =>
  via(
    opts,
    withTeams((d) => Effect.map(d.listTeams, (list) => list.map((t) => teamView(t, d.membersOf(t.id).length)))),
    (c) => Effect.map(c.teams.list(), (r) => r.teams)
  ).pipe(Effect.flatMap((teams) => printTeams(teams, opts.json)))

export const teamRemove = (opts: Parsed<typeof teamRemoveOptions>) =>
  via(
    opts,
    withTeams((d) =>
      Effect.map(d.removeTeam(opts.team, { force: opts.force, actor: "cli" }), (r) => ({
        removed: teamView(r.removed, 0),
        disabledKeys: r.disabledKeys
      }))
    ),
    (c) => c.teams.remove({ path: { id: opts.team }, urlParams: { force: opts.force ? true : undefined } })
  ).pipe(
    Effect.flatMap((r) =>
      opts.json ? printJson(r) : Console.log(`removed ${r.removed.id} (${r.removed.name})${disabledNote(r.disabledKeys)}`)
    )
  )

export const teamMembers = (opts: Parsed<typeof teamMembersOptions>) =>
  via(
    opts,
    withTeams((d) => Effect.map(d.listMembers(opts.team), (list) => list.map((m) => memberView(m, d.user(m.userId))))),
    (c) => Effect.map(c.teams.members({ path: { id: opts.team } }), (r) => r.members)
  ).pipe(Effect.flatMap((members) => printMembers(members, opts.json)))

export const teamAddMember = (opts: Parsed<typeof teamAddMemberOptions>) => {
  const role = Option.getOrElse(opts.role, () => "member" as const)
  return via(
    opts,
    withTeams((d) => Effect.map(d.addMember(opts.team, opts.user, role, "cli"), (m) => memberView(m, d.user(m.userId)))),
    (c) => c.teams.addMember({ path: { id: opts.team }, payload: { userId: opts.user, role } })
  ).pipe(Effect.flatMap((m) => (opts.json ? printJson(m) : Console.log(`${m.userId} (${m.email}) is ${m.role} of ${opts.team}`))))
}

export const teamRemoveMember = (opts: Parsed<typeof teamRemoveMemberOptions>) =>
  via(
    opts,
    withTeams((d) => Effect.map(d.removeMember(opts.team, opts.user, "cli"), (m) => memberView(m, d.user(m.userId)))),
    (c) => Effect.map(c.teams.removeMember({ path: { id: opts.team, userId: opts.user } }), (r) => r.removed)
  ).pipe(Effect.flatMap((m) => (opts.json ? printJson({ removed: m }) : Console.log(`${m.userId} (${m.email}) left ${opts.team}`))))
