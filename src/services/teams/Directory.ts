/**
 * People and teams (docs/teams.md): the users, teams and their members in `users`, `teams` and
 * `team_members` (migration 0025), held in memory for the request path and management auth
 * (`user`, `team`, `firstAdmin` answer synchronously), read again when the store's change counter
 * moves; the management API's and the CLI's changes; single sign-on's `signIn`; the one
 * organisation's name (kv namespace `organisation`).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type { CreateTeam, CreateUser, OrganisationView, Role, TeamRole, UpdateTeam, UpdateUser } from "../../domain/teams.js"
import { ORGANISATION_ID } from "../../domain/teams.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { followVersion, makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import {
  type DirectoryMember,
  type DirectorySnapshot,
  type DirectoryTeam,
  type DirectoryUser,
  EMPTY_SNAPSHOT,
  loadSnapshot
} from "./directoryRows.js"
import { adminsIn, findTeamIn, findUserIn, makeDirectoryWrites } from "./directoryWrites.js"
import { ensureFirstAdmin, fallbackAdmin } from "./firstAdmin.js"
import { makeKeyOwner } from "./keyOwner.js"

export type { DirectoryMember, DirectoryTeam, DirectoryUser } from "./directoryRows.js"
export { memberView, teamView, userView } from "./directoryRows.js"

/** Who single sign-on says signed in, and the role and teams a first sign-in gets. */
export interface SignInIdentity {
  readonly provider: string
  readonly subject: string
  readonly email: string
  readonly name: string
  readonly teams: ReadonlyArray<{ readonly teamId: string; readonly role: TeamRole }>
  readonly role: Role
}

/** A key's owner as given (`userId` an id or email, `teamId` an id or name; null: none). */
export interface KeyOwnerInput {
  readonly userId?: string | null | undefined
  readonly teamId?: string | null | undefined
}
/** A key's owner as stored: at most one of the two. */
export interface KeyOwner {
  readonly userId: string | null
  readonly teamId: string | null
}

export interface DirectoryShape {
  /** A user by id, from memory (synchronous; may lag another process's change by a second). */
  readonly user: (id: string) => DirectoryUser | undefined
  /** A team by id, from memory. */
  readonly team: (id: string) => DirectoryTeam | undefined
  /** The user the admin password and unowned keys act as: the oldest enabled admin (`usr_admin` after the upgrade). */
  readonly firstAdmin: () => DirectoryUser
  /** A user by id or email (any case), from memory. */
  readonly findUser: (idOrEmail: string) => DirectoryUser | undefined
  /** A team by id or name (any case), from memory. */
  readonly findTeam: (idOrName: string) => DirectoryTeam | undefined
  /** A team's members from memory (oldest first; [] for an unknown team). */
  readonly membersOf: (teamId: string) => ReadonlyArray<DirectoryMember>
  /** Read the store again if another process changed it. */
  readonly refresh: Effect.Effect<void>

  readonly listUsers: Effect.Effect<ReadonlyArray<DirectoryUser>>
  readonly createUser: (input: CreateUser, actor?: string) => Effect.Effect<DirectoryUser, BadRequest | Conflict>
  /** By id or email. */
  readonly updateUser: (
    idOrEmail: string,
    input: UpdateUser,
    actor?: string
  ) => Effect.Effect<DirectoryUser, BadRequest | NotFound | Conflict>
  /** By id or email; a user owning keys is refused (409 naming them) unless `force` (docs/teams.md). */
  readonly removeUser: (
    idOrEmail: string,
    options?: { readonly force?: boolean; readonly actor?: string }
  ) => Effect.Effect<{ readonly removed: DirectoryUser; readonly disabledKeys: ReadonlyArray<string> }, NotFound | Conflict>
  readonly listTeams: Effect.Effect<ReadonlyArray<DirectoryTeam>>
  readonly createTeam: (input: CreateTeam, actor?: string) => Effect.Effect<DirectoryTeam, Conflict>
  /** By id or name. */
  readonly updateTeam: (idOrName: string, input: UpdateTeam, actor?: string) => Effect.Effect<DirectoryTeam, NotFound | Conflict>
  readonly removeTeam: (
    idOrName: string,
    options?: { readonly force?: boolean; readonly actor?: string }
  ) => Effect.Effect<{ readonly removed: DirectoryTeam; readonly disabledKeys: ReadonlyArray<string> }, NotFound | Conflict>
  readonly listMembers: (teamId: string) => Effect.Effect<ReadonlyArray<DirectoryMember>, NotFound>
  /** Adds the user to the team, or sets its role there when it is a member already. */
  readonly addMember: (teamId: string, userId: string, role: TeamRole, actor?: string) => Effect.Effect<DirectoryMember, NotFound>
  readonly removeMember: (teamId: string, userId: string, actor?: string) => Effect.Effect<DirectoryMember, NotFound>
  /** Single sign-on: finds the user by (provider, subject) or email, makes it on first sign-in, moves lastLoginAt. */
  readonly signIn: (identity: SignInIdentity) => Effect.Effect<DirectoryUser>

  /** A key's owner checked: not both, each known (400 naming the unknown one), stored as ids. */
  readonly keyOwner: (input: KeyOwnerInput) => Effect.Effect<KeyOwner, BadRequest>
  readonly organisation: Effect.Effect<OrganisationView>
  readonly updateOrganisation: (name: string, actor?: string) => Effect.Effect<OrganisationView>
}

/** The kv namespace of the organisation (carried by configuration bundles). */
export const ORGANISATION_NAMESPACE = "organisation"
export const DEFAULT_ORGANISATION_NAME = "default"

export class Directory extends Context.Tag("gateway/Directory")<Directory, DirectoryShape>() {
  /**
   * The directory over the store: the upgrade first (the first admin while there is no user), then
   * every row read into memory, read again when the store says it changed (checked every second in
   * the background, and before each change) and after each change here.
   */
  static readonly layer = Layer.scoped(
    Directory,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const kv = yield* KeyValue
      const version = yield* Effect.serviceOption(StoreVersion)
      const writer = Option.getOrUndefined(yield* Effect.serviceOption(BatchWriter))

      yield* ensureFirstAdmin(sql)

      let snapshot: DirectorySnapshot = EMPTY_SNAPSHOT
      const reload = Effect.tap(loadSnapshot(sql), (s) => {
        snapshot = s
      })
      yield* reload
      const refresh = yield* makeVersionedReload(version, Effect.asVoid(reload))
      // On the timer shared with the other followers of the store version (FOLLOW_RENEW_EVERY_MS).
      yield* followVersion(version, refresh.pipe(Effect.catchAllCause((cause) => Effect.logDebug("directory: reload failed", cause))))
      const fresh = Effect.zipRight(
        refresh,
        Effect.sync(() => snapshot)
      )

      const writes = makeDirectoryWrites({ sql, writer, version: Option.getOrUndefined(version), fresh, reload })
      const keyOwner = makeKeyOwner(fresh)

      const organisation = Effect.map(
        kv.get(ORGANISATION_NAMESPACE, "name"),
        (name): OrganisationView => ({
          id: ORGANISATION_ID,
          name: Option.getOrElse(name, () => DEFAULT_ORGANISATION_NAME)
        })
      )

      return {
        user: (id) => snapshot.users.get(id),
        team: (id) => snapshot.teams.get(id),
        firstAdmin: () => adminsIn(snapshot)[0] ?? fallbackAdmin,
        findUser: (ref) => findUserIn(snapshot, ref),
        findTeam: (ref) => findTeamIn(snapshot, ref),
        membersOf: (teamId) => snapshot.members.get(teamId) ?? [],
        refresh,
        listUsers: Effect.map(fresh, (s) => Array.from(s.users.values())),
        createUser: writes.createUser,
        updateUser: writes.updateUser,
        removeUser: writes.removeUser,
        listTeams: Effect.map(fresh, (s) => Array.from(s.teams.values())),
        createTeam: writes.createTeam,
        updateTeam: writes.updateTeam,
        removeTeam: writes.removeTeam,
        listMembers: writes.listMembers,
        addMember: writes.addMember,
        removeMember: writes.removeMember,
        signIn: writes.signIn,
        keyOwner,
        organisation,
        updateOrganisation: (name, actor = "system") =>
          Effect.gen(function* (): Effect.fn.Return<OrganisationView> {
            yield* kv.set(ORGANISATION_NAMESPACE, "name", name)
            writer?.append("audit_log", { ts: Date.now(), actor, action: "organisation.update", target: ORGANISATION_ID, detail: name })
            return { id: ORGANISATION_ID, name } satisfies OrganisationView
          })
      } satisfies DirectoryShape
    })
  )
}
