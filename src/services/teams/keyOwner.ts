/**
 * A key's owner (docs/teams.md, "Keys and their owners"): a user or a team, not both; given by id,
 * or a user by email and a team by name; stored as ids.
 */
import * as Effect from "effect/Effect"
import { BadRequest } from "../../domain/errors.js"
import type { DirectorySnapshot } from "./directoryRows.js"
import { findTeamIn, findUserIn } from "./directoryWrites.js"
import type { KeyOwner, KeyOwnerInput } from "./Directory.js"

export const makeKeyOwner =
  (fresh: Effect.Effect<DirectorySnapshot>) =>
  (input: KeyOwnerInput): Effect.Effect<KeyOwner, BadRequest> =>
    Effect.flatMap(fresh, (s) => {
      const userRef = input.userId ?? null
      const teamRef = input.teamId ?? null
      if (userRef !== null && teamRef !== null)
        return Effect.fail(new BadRequest({ message: "userId, teamId: a key belongs to a user or to a team, not both" }))
      let userId: string | null = null
      let teamId: string | null = null
      if (userRef !== null) {
        const user = findUserIn(s, userRef)
        if (user === undefined)
          return Effect.fail(new BadRequest({ message: `userId: no user with id or email ${JSON.stringify(userRef)}` }))
        userId = user.id
      }
      if (teamRef !== null) {
        const team = findTeamIn(s, teamRef)
        if (team === undefined)
          return Effect.fail(new BadRequest({ message: `teamId: no team with id or name ${JSON.stringify(teamRef)}` }))
        teamId = team.id
      }
      return Effect.succeed({ userId, teamId })
    })
