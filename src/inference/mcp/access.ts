/**
 * What a caller of `/v1/mcp` may use (docs/mcp.md, "Who may call what"): lists each of which
 * must allow a tool. The server's `allowedTools` (what the admin exposed), the key's `mcp.allow`
 * (its ceiling; absent: everything exposed), the MCP access of each level above the key (its user,
 * team(s), the organisation; docs/accounting.md, "Limits at every level") and the session's
 * `X-Gateway-MCP-Allow` header (narrows the key for one session; it can never widen it). Plain functions: they run for
 * every listing and call.
 */
import { MCP_NAME_SEPARATOR } from "../../domain/mcpServers.js"

/** The header a client narrows its key's MCP access with, for one session. */
export const MCP_ALLOW_HEADER = "x-gateway-mcp-allow"

/** Whether one `mcp.allow` pattern covers a server's tool: `*`, `<server>`, `<server>__*`, `<server>__<tool>` (a `*` inside matches any run). */
export const patternCovers = (pattern: string, server: string, name: string): boolean => {
  if (pattern === "*" || pattern === server) return true
  const at = pattern.indexOf(MCP_NAME_SEPARATOR)
  if (at < 0 || pattern.slice(0, at) !== server) return false
  const rest = pattern.slice(at + MCP_NAME_SEPARATOR.length)
  if (rest === "*" || rest === name) return true
  if (!rest.includes("*")) return false
  const re = new RegExp(
    `^${rest
      .split("*")
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`
  )
  return re.test(name)
}

/** Whether a pattern list names the server at all (a list entry `<server>...` or `*`): a server none names is hidden whole. */
export const patternsReachServer = (patterns: ReadonlyArray<string>, server: string): boolean =>
  patterns.some((p) => p === "*" || p === server || p.startsWith(`${server}${MCP_NAME_SEPARATOR}`))

/** Whether the server's `allowedTools` expose a name (a tool's or a prompt's name, or a resource's URI). */
export const serverExposes = (allowedTools: ReadonlyArray<string>, name: string): boolean =>
  allowedTools.includes("*") || allowedTools.includes(name)

/** The patterns of an `X-Gateway-MCP-Allow` header (comma- or space-separated); undefined when absent or empty. */
export const narrowingOf = (header: string | ReadonlyArray<string> | undefined): ReadonlyArray<string> | undefined => {
  const text = Array.isArray(header) ? header.join(",") : (header as string | undefined)
  if (text === undefined) return undefined
  const list = text
    .split(/[,\s]+/)
    .map((s) => s.trim())
    .filter((s) => s !== "")
  return list.length === 0 ? undefined : list
}

/** Who calls, as far as access goes: the key's ceiling (null: none set) and the session's narrowing (undefined: none). */
export interface McpAccess {
  readonly keyId: string
  readonly keyName: string
  readonly ceiling: ReadonlyArray<string> | null
  readonly narrowing: ReadonlyArray<string> | undefined
  /** The MCP access set on the levels above the key (its user, team(s), the organisation; docs/accounting.md), nearest first. */
  readonly levels?: ReadonlyArray<{ readonly label: string; readonly allow: ReadonlyArray<string> }>
}

/** Whether every level above the key reaches the server. */
export const levelsReachServer = (access: McpAccess, server: string): boolean =>
  access.levels === undefined || access.levels.every((l) => patternsReachServer(l.allow, server))

/** The first level above the key that does not reach the server, as a refusal; undefined when each does. */
export const levelServerRefusal = (access: McpAccess, server: string): string | undefined => {
  const l = access.levels?.find((lv) => !patternsReachServer(lv.allow, server))
  return l === undefined ? undefined : `${l.label} may not use the MCP server ${server} (its MCP allow is ${JSON.stringify(l.allow)})`
}

/**
 * Why a caller may not use a server's tool, naming the rule that refuses it; undefined when it may.
 * The server's own exposure is checked first (an admin has not allowed it), then the key, then the header.
 */
export const refusal = (access: McpAccess, server: string, name: string, allowedTools: ReadonlyArray<string>): string | undefined => {
  if (!serverExposes(allowedTools, name))
    return `${server}${MCP_NAME_SEPARATOR}${name} is not allowed on server ${server} (its allowedTools do not name it; an admin allows it with \`gateway mcp servers allow ${server}\`)`
  if (access.ceiling !== null && !access.ceiling.some((p) => patternCovers(p, server, name)))
    return `key ${access.keyName} may not use ${server}${MCP_NAME_SEPARATOR}${name} (its mcp.allow is ${JSON.stringify(access.ceiling)})`
  for (const l of access.levels ?? [])
    if (!l.allow.some((p) => patternCovers(p, server, name)))
      return `${l.label} may not use ${server}${MCP_NAME_SEPARATOR}${name} (its MCP allow is ${JSON.stringify(l.allow)})`
  if (access.narrowing !== undefined && !access.narrowing.some((p) => patternCovers(p, server, name)))
    return `this session's X-Gateway-MCP-Allow (${access.narrowing.join(", ")}) does not cover ${server}${MCP_NAME_SEPARATOR}${name}`
  return undefined
}
