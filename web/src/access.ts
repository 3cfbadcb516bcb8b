/**
 * What the signed-in caller's role may do (docs/teams.md, "Roles and access"): the route ids
 * `GET /api/auth/session` answers, so pages and buttons a role cannot use are not shown. Before
 * the first answer (or from a gateway that does not say) everything is shown, as before.
 */
let routes: ReadonlySet<string> | undefined
let role: string | null = null

export const setAccess = (next: { readonly role: string | null; readonly routes: ReadonlyArray<string> } | undefined) => {
  routes = next ? new Set(next.routes) : undefined
  role = next?.role ?? null
}

/** Whether the caller may call the route `id` (`group.endpoint`, the OpenAPI operationId). */
export const can = (id: string): boolean => routes === undefined || routes.has(id)

/** The caller's role, null when unknown. */
export const currentRole = (): string | null => role
