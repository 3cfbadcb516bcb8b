import * as Context from "effect/Context"
import type { Role } from "../../domain/teams.js"

type RoleList = ReadonlyArray<Role>

/**
 * Which roles may call a management route (docs/teams.md, "Roles and access"): a list, or a
 * rule by method (`read` for GET and HEAD, `write` for the others). Set on an `HttpApiEndpoint`,
 * or on an `HttpApiGroup` as the default its endpoints override. A route without one is for
 * admins only. `ManagementAuth` enforces it (403 naming the role), the OpenAPI document shows
 * it as `x-gateway-roles`, docs/teams.md lists it, and `GET /api/auth/session` answers the
 * routes the caller may call: all from the table `routeAccess.ts` builds from these annotations.
 */
export type RoleRule = ReadonlyArray<Role> | { readonly read: ReadonlyArray<Role>; readonly write: ReadonlyArray<Role> }

export class Roles extends Context.Tag("gateway/Roles")<Roles, RoleRule>() {}

/** Every role: routes whose answer the handler narrows to what the caller may see (their keys, their usage). */
export const EVERY_ROLE: RoleList = ["admin", "team-admin", "member", "viewer"]
/** The gateway's own configuration: viewers read it, admins change it. */
export const CONFIGURATION: RoleRule = { read: ["admin", "viewer"], write: ["admin"] }
/** Admins only, reads included: what carries secrets or other callers' traffic, and what runs on the host. */
export const ADMIN_ONLY: RoleList = ["admin"]
/** Callers who hold keys and make requests: what the handler scopes to their own (and their team's). */
export const KEY_HOLDERS: RoleList = ["admin", "team-admin", "member"]
/** Reads for everyone signed in (what a caller needs to make requests), changes for admins. */
export const CATALOG: RoleRule = { read: ["admin", "team-admin", "member", "viewer"], write: ["admin"] }
/** Admins and viewers, whatever the method: what only reads, a POST that computes a preview included. */
export const READERS: RoleList = ["admin", "viewer"]
/** Admins, and team-admins within the teams they administer (the handler decides, access.ts). */
export const TEAM_ADMINS: RoleList = ["admin", "team-admin"]
