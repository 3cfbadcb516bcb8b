import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { BadRequest, Forbidden, NotFound } from "../../../domain/errors.js"
import { Levels } from "../../../services/accounting/Levels.js"
import { ApiKeys } from "../../../services/auth/ApiKeys.js"
import { Directory } from "../../../services/teams/Directory.js"
import { adminOnlyKeyFields, canManageKey, canSeeKey, isAdmin, type KeyOwner, ownerOfNewKey, visibleKeys } from "../access.js"
import { ManagementApi } from "../Api.js"
import { keyOwnerOf } from "../Auth.js"
import { actor, Principal } from "../Principal.js"

/**
 * `/api/keys`, each caller within their own (docs/teams.md, "Roles and access"): an admin every
 * key, a viewer sees every key; a team-admin their own, their teams' and their members'; a member
 * their own. A key the caller may not see answers 404 as an unknown one.
 */
export const layer = HttpApiBuilder.group(ManagementApi, "keys", (handlers) =>
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    const directory = yield* Directory
    const levels = yield* Levels
    const users = directory.user

    /** The listed keys with their owners. */
    const owned = Effect.flatMap(keys.list, (list) =>
      Effect.forEach(list, (view) =>
        Effect.map(keys.byId(view.id), (record) => ({ view, ...(record ? keyOwnerOf(record) : { userId: null, teamId: null }) }))
      )
    )

    /** The key named by id or name, if the caller may manage it (404 when they may not even see it). */
    const manageable = (idOrName: string) =>
      Effect.gen(function* () {
        const { user } = yield* Principal
        if (isAdmin(user)) return
        const key = (yield* owned).find((k) => k.view.id === idOrName || k.view.name === idOrName)
        if (!key || !canSeeKey(user, key, users))
          return yield* new NotFound({ message: `no API key with id or name ${JSON.stringify(idOrName)}` })
        if (!canManageKey(user, key, users))
          return yield* new Forbidden({
            message: `the role ${user.role} may not change the key ${key.view.id}: it is not yours or your team's`
          })
      })

    /** The owner a create or update asks for, as ids (a user's email and a team's name looked up). */
    const ownerAsked = (payload: object): KeyOwner => {
      const wanted = payload as { readonly userId?: string | null; readonly teamId?: string | null }
      return {
        userId: wanted.userId == null ? null : (directory.findUser(wanted.userId)?.id ?? wanted.userId),
        teamId: wanted.teamId == null ? null : (directory.findTeam(wanted.teamId)?.id ?? wanted.teamId)
      }
    }

    /**
     * A key's own rpm and tpm stay within every level above it, as a level's own do on
     * /api/usage/limits (a 400 naming the level): the owner is the key's, or the one it is given.
     */
    const withinLevels = (owner: KeyOwner, payload: { readonly rpm?: number | null; readonly tpm?: number | null }) =>
      Effect.gen(function* () {
        for (const field of ["rpm", "tpm"] as const) {
          const value = payload[field]
          if (typeof value !== "number") continue
          const why = yield* levels.keyRateCeiling(owner, field, value)
          if (why) return yield* new BadRequest({ message: why })
        }
      })

    /** Fields only an admin changes on a key. */
    const adminFields = (payload: object) =>
      Effect.flatMap(Principal, ({ user }) => {
        const named = adminOnlyKeyFields.filter((f) => f in payload && (payload as Record<string, unknown>)[f] !== undefined)
        return isAdmin(user) || named.length === 0
          ? Effect.void
          : Effect.fail(new Forbidden({ message: `the role ${user.role} may not set ${named.join(", ")} on a key; an admin does` }))
      })

    return handlers
      .handle("list", () =>
        Effect.gen(function* () {
          const { user } = yield* Principal
          return { keys: visibleKeys(user, yield* owned, users).map((k) => k.view) }
        })
      )
      .handle("create", ({ payload }) =>
        Effect.gen(function* () {
          const { user } = yield* Principal
          yield* adminFields(payload)
          const a = yield* actor
          // The owner asked for (ids, or a user's email and a team's name), else the caller's user.
          const owner = ownerOfNewKey(user, ownerAsked(payload), users)
          if ("refused" in owner)
            return yield* new Forbidden({ message: `the role ${user.role} may not create this key: ${owner.refused}` })
          const given: KeyOwner = owner.userId === null && owner.teamId === null ? { userId: user.id, teamId: null } : owner
          yield* withinLevels(given, payload)
          const created = yield* keys.create({ ...payload, ...given } as typeof payload, { actor: a })
          if (isAdmin(user)) return created
          // A key whose owner did not stick would act as the first admin: it is taken back.
          const record = yield* keys.byId(created.id)
          const got: KeyOwner = record ? keyOwnerOf(record) : { userId: null, teamId: null }
          if (got.userId !== given.userId || got.teamId !== given.teamId) {
            yield* Effect.ignore(keys.remove(created.id, a))
            return yield* new Forbidden({ message: "this gateway cannot give the key an owner, so only an admin creates keys" })
          }
          return created
        })
      )
      .handle("update", ({ path, payload }) =>
        Effect.gen(function* () {
          yield* manageable(path.id)
          yield* adminFields(payload)
          // A new owner must be one the caller could have created the key for.
          const { user } = yield* Principal
          const asked = payload as { readonly userId?: unknown; readonly teamId?: unknown }
          if (!isAdmin(user) && (asked.userId !== undefined || asked.teamId !== undefined)) {
            const owner = ownerOfNewKey(user, ownerAsked(payload), users)
            if ("refused" in owner || (owner.userId === null && owner.teamId === null))
              return yield* new Forbidden({
                message: `the role ${user.role} may not give the key this owner: ${"refused" in owner ? owner.refused : "only an admin makes a key nobody's"}`
              })
          }
          if (typeof payload.rpm === "number" || typeof payload.tpm === "number") {
            const changesOwner = asked.userId !== undefined || asked.teamId !== undefined
            const current = (yield* owned).find((k) => k.view.id === path.id || k.view.name === path.id)
            const owner: KeyOwner = changesOwner
              ? ownerAsked(payload)
              : current
                ? { userId: current.userId, teamId: current.teamId }
                : { userId: null, teamId: null }
            yield* withinLevels(owner, payload)
          }
          return yield* keys.update(path.id, payload, yield* actor)
        })
      )
      .handle("remove", ({ path }) =>
        Effect.gen(function* () {
          yield* manageable(path.id)
          return { removed: yield* keys.remove(path.id, yield* actor) }
        })
      )
  })
)
