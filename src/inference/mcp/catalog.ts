/**
 * What one caller of `/v1/mcp` sees (docs/mcp.md, "One endpoint for every server"): the tools,
 * resources and prompts of the servers in scope that every list allows (src/inference/mcp/access.ts),
 * named `<server>__<name>` on the endpoint of every server and as the server names them on
 * `/v1/mcp/{server}`; and the way back from such a name to its server.
 */
import type { Prompt, Resource, ResourceTemplate, Tool } from "@modelcontextprotocol/sdk/types.js"
import { exposedNameOf, type McpServerRecord } from "../../domain/mcpServers.js"
import type { McpServersShape } from "../../services/mcp/McpServers.js"
import type { McpUpstreamsShape } from "../../services/mcp/McpUpstreams.js"
import { levelsReachServer, type McpAccess, patternsReachServer, refusal } from "./access.js"

/** The `_meta` keys a listing puts on each entry: where it comes from, under its own name. */
export const META_SERVER = "gateway/server"
export const META_NAME = "gateway/name"

/** Which servers an endpoint serves: every one (`undefined`) or the one in its path. */
export type Scope = string | undefined

export interface Resolved {
  readonly record: McpServerRecord
  /** The server's own name of the tool or prompt. */
  readonly name: string
}

export const makeCatalog = (servers: McpServersShape, upstreams: McpUpstreamsShape) => {
  /** The enabled servers a caller can reach in a scope (a key whose list names none of a server's tools does not see the server). */
  const inScope = (scope: Scope, access: McpAccess): ReadonlyArray<McpServerRecord> => {
    const list = scope === undefined ? servers.all() : [servers.byName(scope)].filter((r) => r !== undefined)
    return list.filter(
      (r) =>
        r.enabled &&
        r.allowedTools.length > 0 &&
        (access.ceiling === null || patternsReachServer(access.ceiling, r.name)) &&
        levelsReachServer(access, r.name) &&
        (access.narrowing === undefined || patternsReachServer(access.narrowing, r.name))
    )
  }

  const named = (scope: Scope, server: string, name: string) => (scope === undefined ? exposedNameOf(server, name) : name)
  const meta = (server: string, name: string, own: Record<string, unknown> | undefined) => ({
    ...own,
    [META_SERVER]: server,
    [META_NAME]: name
  })

  const tools = (scope: Scope, access: McpAccess): Array<Tool> => {
    const out: Array<Tool> = []
    for (const r of inScope(scope, access))
      for (const t of upstreams.offerings(r.name).tools)
        if (refusal(access, r.name, t.name, r.allowedTools) === undefined)
          out.push({ ...t, name: named(scope, r.name, t.name), _meta: meta(r.name, t.name, t._meta) })
    return out
  }

  const prompts = (scope: Scope, access: McpAccess): Array<Prompt> => {
    const out: Array<Prompt> = []
    for (const r of inScope(scope, access))
      for (const p of upstreams.offerings(r.name).prompts)
        if (refusal(access, r.name, p.name, r.allowedTools) === undefined)
          out.push({ ...p, name: named(scope, r.name, p.name), _meta: meta(r.name, p.name, p._meta) })
    return out
  }

  /**
   * Resources keep their URIs (a client reads them by URI): a URI two servers list is listed once,
   * from the first server the caller may read it from, which is where `resolveResource` reads it.
   */
  const resources = (scope: Scope, access: McpAccess): Array<Resource> => {
    const out: Array<Resource> = []
    const listed = new Set<string>()
    for (const r of inScope(scope, access))
      for (const x of upstreams.offerings(r.name).resources)
        if (!listed.has(x.uri) && refusal(access, r.name, x.uri, r.allowedTools) === undefined) {
          listed.add(x.uri)
          out.push({ ...x, name: named(scope, r.name, x.name), _meta: meta(r.name, x.uri, x._meta) })
        }
    return out
  }

  /** Templates, as resources: one template two servers list is listed once, from the first the caller may use. */
  const resourceTemplates = (scope: Scope, access: McpAccess): Array<ResourceTemplate> => {
    const out: Array<ResourceTemplate> = []
    const listed = new Set<string>()
    for (const r of inScope(scope, access))
      for (const x of upstreams.offerings(r.name).resourceTemplates)
        if (!listed.has(x.uriTemplate) && refusal(access, r.name, x.uriTemplate, r.allowedTools) === undefined) {
          listed.add(x.uriTemplate)
          out.push({ ...x, name: named(scope, r.name, x.name), _meta: meta(r.name, x.uriTemplate, x._meta) })
        }
    return out
  }

  /**
   * The server and own name behind a tool's (or prompt's) name on an endpoint, whether or not
   * the caller may use it (the caller's refusal is decided next, so it can name the rule).
   */
  const resolve = (scope: Scope, kind: "tool" | "prompt", exposed: string): Resolved | undefined => {
    if (scope !== undefined) {
      const record = servers.byName(scope)
      return record ? { record, name: exposed } : undefined
    }
    for (const record of servers.all()) {
      const offered = upstreams.offerings(record.name)
      const list: ReadonlyArray<{ readonly name: string }> = kind === "tool" ? offered.tools : offered.prompts
      for (const x of list) if (exposedNameOf(record.name, x.name) === exposed) return { record, name: x.name }
    }
    // Not listed (yet): `<server>__<name>` still names it when the server exists.
    const at = exposed.indexOf("__")
    if (at > 0) {
      const record = servers.byName(exposed.slice(0, at))
      if (record) return { record, name: exposed.slice(at + 2) }
    }
    return undefined
  }

  /**
   * The server a resource URI is read from: the one that lists it, else the one with a template it
   * matches (`{var}` stands for any run without `/`, `{+var}` for any run), or the scope's server.
   * The name is what the server's allowedTools must expose: the URI, or the template it matched.
   * Where several servers offer it, the first the caller may read it from (as the listing shows
   * it); when none lets the caller, the first of them, so that the refusal names the rule.
   */
  const resolveResource = (scope: Scope, uri: string, access: McpAccess): Resolved | undefined => {
    const candidates = scope === undefined ? servers.all() : [servers.byName(scope)].filter((r) => r !== undefined)
    const offering: Array<Resolved> = []
    for (const record of candidates)
      if (upstreams.offerings(record.name).resources.some((x) => x.uri === uri)) offering.push({ record, name: uri })
    if (offering.length === 0)
      for (const record of candidates)
        for (const t of upstreams.offerings(record.name).resourceTemplates)
          if (templateMatches(t.uriTemplate, uri)) {
            offering.push({ record, name: t.uriTemplate })
            break
          }
    const reachable = inScope(scope, access)
    const usable = offering.find(
      (o) => reachable.includes(o.record) && refusal(access, o.record.name, o.name, o.record.allowedTools) === undefined
    )
    if (usable !== undefined || offering.length > 0) return usable ?? offering[0]
    const only = candidates.length === 1 ? candidates[0] : undefined
    return only ? { record: only, name: uri } : undefined
  }

  return { inScope, tools, prompts, resources, resourceTemplates, resolve, resolveResource }
}

export type Catalog = ReturnType<typeof makeCatalog>

/** Whether a URI fits an RFC 6570 template, as far as resource templates use it (simple and reserved expansions). */
export const templateMatches = (template: string, uri: string): boolean => {
  let pattern = ""
  let last = 0
  for (const m of template.matchAll(/\{([+#]?)[^}]*\}/g)) {
    pattern += template.slice(last, m.index).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    pattern += m[1] === "" ? "[^/?#]+" : ".+"
    last = m.index + m[0].length
  }
  pattern += template.slice(last).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  return new RegExp(`^${pattern}$`).test(uri)
}
