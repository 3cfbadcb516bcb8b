import { ANONYMOUS_SCOPES, isMcpScope, MCP_SCOPES, type McpScope } from "../../domain/mcp.js"
import type { Role } from "../../domain/teams.js"
import type { Identity } from "../api/Auth.js"

/**
 * Who calls an MCP tool and what they may do (docs/mcp.md, "Authentication and scopes"). The
 * scopes are decided once, from the caller's credentials; whether they are enforced is the flag
 * GATEWAY_MCP_ENFORCE_SCOPES, read at each call.
 */
export interface McpCaller {
  /** `api-key` is a key without the admin scope; an admin key is `admin-key`. */
  readonly kind: "admin-key" | "api-key" | "session" | "local" | "stdio" | "anonymous"
  /** The key id, or `admin-session`, `local`, `stdio`, `anonymous`: the audit actor is `mcp:<id>`. */
  readonly id: string
  /** May do everything, minting admin keys included (an admin key, session or local operator). */
  readonly admin: boolean
  readonly scopes: ReadonlySet<McpScope>
  /** The origin skill raw URLs are made absolute with (the address the caller used). */
  readonly baseUrl: string | undefined
}

export const ALL_SCOPES: ReadonlySet<McpScope> = new Set(MCP_SCOPES)

/**
 * The scopes a user's role allows at most (docs/teams.md, "Roles and access"): a viewer reads, a
 * member or team-admin reads the catalog (their keys and usage are the management API's, scoped
 * there); an admin everything.
 */
const ROLE_SCOPES: Record<Exclude<Role, "admin">, ReadonlyArray<McpScope>> = {
  viewer: MCP_SCOPES.filter((s) => s.startsWith("read:")),
  "team-admin": ANONYMOUS_SCOPES,
  member: ANONYMOUS_SCOPES
}

/**
 * An HTTP caller from its management identity and the role of the user it acts as: admins get
 * every scope, other keys the catalog and the MCP scopes they carry; a user's role caps both.
 */
export const callerOfIdentity = (who: Identity, baseUrl: string | undefined, role?: Role): McpCaller => {
  const caller = callerOf(who, baseUrl)
  if (role === undefined || role === "admin") return caller
  const allowed = new Set(ROLE_SCOPES[role])
  return { ...caller, admin: false, scopes: new Set([...caller.scopes].filter((s) => allowed.has(s))) }
}

const callerOf = (who: Identity, baseUrl: string | undefined): McpCaller => {
  switch (who.kind) {
    case "api-key": {
      if (who.key.scopes.includes("admin")) return { kind: "admin-key", id: who.key.id, admin: true, scopes: ALL_SCOPES, baseUrl }
      const carried = who.key.scopes.filter(isMcpScope)
      return { kind: "api-key", id: who.key.id, admin: false, scopes: new Set([...ANONYMOUS_SCOPES, ...carried]), baseUrl }
    }
    case "session":
      return { kind: "session", id: "admin-session", admin: true, scopes: ALL_SCOPES, baseUrl }
    case "local":
      return { kind: "local", id: "local", admin: true, scopes: ALL_SCOPES, baseUrl }
    case "none":
      return { kind: "anonymous", id: "anonymous", admin: false, scopes: new Set(ANONYMOUS_SCOPES), baseUrl }
  }
}

/**
 * The operator at this machine, over stdio: every scope, unless GATEWAY_MCP_SCOPES (a comma or
 * space separated list) narrows them. Answers a problem instead when the list names no scope or
 * an unknown one.
 */
export const stdioCaller = (narrowed: string | undefined, baseUrl: string | undefined): McpCaller | string => {
  if (narrowed === undefined || narrowed.trim() === "") return { kind: "stdio", id: "stdio", admin: true, scopes: ALL_SCOPES, baseUrl }
  const names = narrowed.split(/[\s,]+/).filter((s) => s !== "")
  const unknown = names.filter((s) => !isMcpScope(s))
  if (unknown.length > 0) return `GATEWAY_MCP_SCOPES names unknown scopes (${unknown.join(", ")}); known: ${MCP_SCOPES.join(", ")}`
  return { kind: "stdio", id: "stdio", admin: false, scopes: new Set(names.filter(isMcpScope)), baseUrl }
}

/** How a caller appears in the audit log. */
export const actorOf = (caller: McpCaller): string => `mcp:${caller.id}`

export const describeCaller = (caller: McpCaller): string => {
  switch (caller.kind) {
    case "admin-key":
      return `admin key ${caller.id}`
    case "api-key":
      return `API key ${caller.id}`
    case "session":
      return "the admin session"
    case "local":
      return "the local operator"
    case "stdio":
      return "the stdio operator"
    case "anonymous":
      return "an unauthenticated caller"
  }
}
