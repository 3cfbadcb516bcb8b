import type { DirectoryShape } from "../../../services/teams/Directory.js"
import type { PrincipalUser } from "../access.js"
import { routesFor } from "../routeAccess.js"

/**
 * What `GET /api/auth/session` says of the caller (docs/teams.md, "Roles and access"): the user
 * it acts as, its role, and the ids of the management routes that role may call, so the
 * dashboard shows only what the caller can use. Null and none for nobody.
 */
export const callerView = (directory: Pick<DirectoryShape, "user">, user: PrincipalUser | null) => {
  if (user === null) return { user: null, role: null, routes: [] }
  const known = user.id === null ? undefined : directory.user(user.id)
  return {
    user: {
      id: user.id,
      email: known?.email ?? null,
      name: known?.name ?? null,
      role: user.role,
      teamIds: user.teamIds,
      teamAdminOf: user.teamAdminOf
    },
    role: user.role,
    routes: routesFor(user.role)
  }
}
