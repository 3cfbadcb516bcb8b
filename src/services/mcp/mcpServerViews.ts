/**
 * The registry's servers as the management API shows them: every env and header value masked
 * (the names kept) and the masked values of an update resolved against the stored ones, the
 * health of a server no connection reports on yet, and what a server offers with the names
 * `/v1/mcp` gives it.
 */
import { exposedNameOf, type McpOffering, type McpServerHealth, type McpServerRecord, type McpServerView } from "../../domain/mcpServers.js"
import { maskSecret } from "../../kernel/redact.js"
import { toIso } from "../../platform/store/Db.js"
import { maskArgs, maskUrl } from "./mcpServerSecrets.js"
import type { McpOfferings } from "./McpUpstreams.js"

type StringMap = Readonly<Record<string, string>>

/** Every value masked with `maskSecret`; the names stay. */
export const maskValues = (map: StringMap): Record<string, string> =>
  Object.fromEntries(Object.entries(map).map(([k, v]) => [k, maskSecret(v)]))

/**
 * A map given in an update: a value that is the masked form of the stored one (a listing sent
 * back) keeps the stored value; any other value replaces it; a name left out is removed.
 */
export const unmaskValues = (given: StringMap, stored: StringMap): Record<string, string> =>
  Object.fromEntries(
    Object.entries(given).map(([k, v]) => {
      const old = stored[k]
      return [k, old !== undefined && v === maskSecret(old) ? old : v]
    })
  )

/** What a listing adds to a record: the connection's health, what the server offers, its OAuth state. */
export interface McpServerExtras {
  readonly health: McpServerHealth
  readonly tools: number
  readonly resources: number
  readonly prompts: number
  readonly oauth?: McpServerView["oauth"]
}

/** The health of a server no connection reports on yet: `disabled`, else `starting` (since its last change). */
export const initialHealth = (r: McpServerRecord): McpServerHealth => ({
  state: r.enabled ? "starting" : "disabled",
  reason: null,
  since: toIso(r.updatedAt) ?? new Date(0).toISOString(),
  restarts: 0,
  pid: null,
  serverInfo: null,
  listedAt: null
})

/**
 * A server as listings show it: every env and header value masked (`maskSecret`), the names kept;
 * the url's password and credential query values, and credential arguments, masked too.
 */
export const viewOf = (r: McpServerRecord, extras: McpServerExtras): McpServerView => ({
  id: r.id,
  name: r.name,
  transport: r.transport,
  command: r.command,
  args: maskArgs(r.args),
  env: maskValues(r.env),
  cwd: r.cwd,
  url: maskUrl(r.url),
  headers: maskValues(r.headers),
  allowedTools: r.allowedTools,
  timeoutMs: r.timeoutMs,
  rpm: r.rpm,
  enabled: r.enabled,
  oauth: extras.oauth ?? null,
  health: extras.health,
  tools: extras.tools,
  resources: extras.resources,
  prompts: extras.prompts,
  createdAt: toIso(r.createdAt) ?? "",
  updatedAt: toIso(r.updatedAt) ?? ""
})

/** Whether a server's allowedTools expose one of its tools, prompts or resources (by its own name or URI, as /v1/mcp decides). */
export const offeringAllowed = (allowedTools: ReadonlyArray<string>, name: string): boolean =>
  allowedTools.includes("*") || allowedTools.includes(name)

/** What a server offers, as listed, with the names `/v1/mcp` gives it and whether its allowedTools expose each. */
export const offeringsOf = (r: McpServerRecord, o: McpOfferings): ReadonlyArray<McpOffering> => {
  const one = (kind: McpOffering["kind"], name: string, exposedName: string, description: string | undefined): McpOffering => ({
    kind,
    server: r.name,
    name,
    exposedName,
    description: description ?? null,
    allowed: offeringAllowed(r.allowedTools, name)
  })
  return [
    ...o.tools.map((t) => one("tool", t.name, exposedNameOf(r.name, t.name), t.description)),
    ...o.prompts.map((p) => one("prompt", p.name, exposedNameOf(r.name, p.name), p.description)),
    ...o.resources.map((res) => one("resource", res.uri, res.uri, res.description)),
    ...o.resourceTemplates.map((t) => one("resource", t.uriTemplate, t.uriTemplate, t.description))
  ]
}
