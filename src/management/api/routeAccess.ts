import * as HttpApi from "@effect/platform/HttpApi"
import * as Context from "effect/Context"
import { ROLES, type Role } from "../../domain/teams.js"
import { ManagementApi } from "./Api.js"
import { MetricsAuth } from "./metrics/Api.js"
import { ManagementAuth, PlaygroundAuth } from "./Principal.js"
import { ADMIN_ONLY, type RoleRule, Roles } from "./Roles.js"

/**
 * How a route is authenticated: `management` (an admin-scope key, a session, or this machine
 * without login), `playground` (also any gateway key, docs/playground.md), `metrics` (also
 * GATEWAY_METRICS_TOKEN), `public` (no credentials: health, login, the gateway's descriptions of itself).
 */
export type RouteAuth = "management" | "playground" | "metrics" | "public"

export interface RouteAccess {
  /** `group.endpoint`, the OpenAPI operationId. */
  readonly id: string
  readonly method: string
  /** The route's path as declared (`/api/keys/:id`). */
  readonly path: string
  readonly auth: RouteAuth
  /** The roles that may call it; every role for a public route. */
  readonly roles: ReadonlyArray<Role>
}

const READ_METHODS = new Set(["GET", "HEAD"])

/** The roles a rule gives a route of this method. */
export const rolesOf = (rule: RoleRule, method: string): ReadonlyArray<Role> =>
  "read" in rule ? (READ_METHODS.has(method) ? rule.read : rule.write) : rule

const authOf = (middleware: ReadonlySet<{ readonly key: string }>): RouteAuth => {
  const keys = new Set([...middleware].map((m) => m.key))
  if (keys.has(ManagementAuth.key)) return "management"
  if (keys.has(PlaygroundAuth.key)) return "playground"
  if (keys.has(MetricsAuth.key)) return "metrics"
  return "public"
}

let table: ReadonlyArray<RouteAccess> | undefined
let byRoute: ReadonlyMap<string, RouteAccess> | undefined

/**
 * Every route of the management API with who may call it, read from the `Roles` annotations of
 * the same `HttpApi` the server implements (an endpoint's own, else its group's, else admins
 * only), in the API's order.
 */
export const routeAccessTable = (): ReadonlyArray<RouteAccess> => {
  if (table) return table
  const rows: Array<RouteAccess> = []
  HttpApi.reflect(ManagementApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group, middleware, mergedAnnotations }) => {
      const auth = authOf(middleware)
      const rule = Context.getOrElse(mergedAnnotations, Roles, () => ADMIN_ONLY)
      rows.push({
        id: `${group.identifier}.${endpoint.name}`,
        method: endpoint.method,
        path: endpoint.path,
        auth,
        roles: auth === "public" ? ROLES : ROLES.filter((r) => rolesOf(rule, endpoint.method).includes(r))
      })
    }
  })
  table = rows
  return rows
}

/** A route by its method and declared path (what the router's RouteContext carries). */
export const routeAccess = (method: string, path: string): RouteAccess | undefined => {
  if (!byRoute) byRoute = new Map(routeAccessTable().map((r) => [`${r.method} ${r.path}`, r]))
  return byRoute.get(`${method} ${path}`)
}

/** The ids of the authenticated routes a role may call (`GET /api/auth/session`, the dashboard). */
export const routesFor = (role: Role): ReadonlyArray<string> =>
  routeAccessTable()
    .filter((r) => r.auth !== "public" && r.roles.includes(role))
    .map((r) => r.id)
