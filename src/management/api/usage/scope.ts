import * as Effect from "effect/Effect"
import { Forbidden } from "../../../domain/errors.js"
import type { ApiKeysShape } from "../../../services/auth/ApiKeys.js"
import type { DirectoryShape } from "../../../services/teams/Directory.js"
import { readsEverything, scopeUsage, type UsageFilters } from "../access.js"
import { keyOwnerOf } from "../Auth.js"
import { Principal } from "../Principal.js"

/**
 * A usage read narrowed to what the caller may read (docs/teams.md, "Roles and access";
 * `scopeUsage`): as asked for admins and viewers, else to the caller's keys, team or members, and
 * 403 naming what was asked beyond that.
 */
export const makeUsageScope =
  (keys: Pick<ApiKeysShape, "byId">, directory: Pick<DirectoryShape, "user">) =>
  <Q extends UsageFilters>(q: Q): Effect.Effect<Q, Forbidden, Principal> =>
    Effect.gen(function* () {
      const principal = yield* Principal
      if (readsEverything(principal.user)) return q
      const record = q.apiKeyId === undefined ? undefined : yield* keys.byId(q.apiKeyId)
      const scoped = scopeUsage(
        principal.user,
        principal.kind === "api-key" ? principal.id : null,
        q,
        record ? keyOwnerOf(record) : undefined,
        directory.user
      )
      if ("refused" in scoped)
        return yield* new Forbidden({ message: `the role ${principal.user.role} may not read this usage: ${scoped.refused}` })
      return scoped.query
    })
