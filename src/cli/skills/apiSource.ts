import type * as OpenApi from "@effect/platform/OpenApi"
import { findPlanned, PLANNED_INFERENCE, PLANNED_MANAGEMENT } from "../../platform/http/planned.js"
import { inferenceRouteDefs, type RouteServices } from "../../inference/routes/index.js"
import type { RouteDef } from "../../inference/routes/types.js"
import { managementOpenApi, OPENAPI_PATH } from "../../management/api/openapi.js"
import { code } from "./markdown.js"
import { fieldList, fieldsOf, typeText } from "./schemaText.js"
import { API_SKILL_IDS, type SkillId } from "../../domain/skills.js"

/**
 * The REST skills' Authentication and Endpoints sections, from the management API's OpenAPI
 * document and the inference route table. Every path belongs to one skill by the longest
 * matching prefix of `ROUTE_PREFIXES`; a path no prefix matches is an error of the generator.
 */

/** Path prefix (a whole segment or more) to API skill. A new route area adds a line here. */
export const ROUTE_PREFIXES: Readonly<Record<string, SkillId>> = {
  "/api/auth": "gw-auth",
  "/api/settings/require-login": "gw-auth",
  "/api/init": "gw-auth",
  "/api/providers": "gw-providers",
  "/api/provider-nodes": "gw-providers",
  "/api/oauth": "gw-providers",
  "/api/models": "gw-models",
  "/api/provider-models": "gw-models",
  "/api/pricing": "gw-models",
  "/api/evals": "gw-models",
  "/api/compat": "gw-models",
  "/api/combos": "gw-combos-routing",
  "/api/shadow": "gw-combos-routing",
  "/api/replay": "gw-combos-routing",
  "/api/sessions": "gw-combos-routing",
  "/api/keys": "gw-api-keys",
  "/api/users": "gw-api-keys",
  "/api/teams": "gw-api-keys",
  "/api/organisation": "gw-api-keys",
  "/api/usage": "gw-usage-logs",
  "/api/telemetry": "gw-usage-logs",
  "/api/monitoring": "gw-usage-logs",
  "/metrics": "gw-usage-logs",
  "/api/compliance": "gw-usage-logs",
  "/api/tools": "gw-usage-logs",
  "/api/usage/budget": "gw-budget",
  "/api/usage/token-limits": "gw-budget",
  "/api/settings": "gw-settings",
  "/api/policies": "gw-settings",
  "/api/system": "gw-settings",
  "/api/settings/proxy": "gw-proxies",
  "/api/v1/management/proxies": "gw-proxies",
  "/api/cache": "gw-cache",
  "/api/compression": "gw-compression",
  "/api/settings/compression": "gw-compression",
  "/api/context": "gw-context-rtk",
  "/api/resilience": "gw-resilience",
  "/api/rate-limits": "gw-resilience",
  "/api/rate-limit": "gw-resilience",
  "/api/cli-tools": "gw-cli-tools",
  "/api/acp": "gw-cli-tools",
  "/api/tunnels": "gw-tunnels",
  "/api/tunnels/token": "gw-tunnels",
  "/api/tunnels/mesh": "gw-tunnels",
  "/api/sync": "gw-sync-cloud",
  "/api/cloud": "gw-sync-cloud",
  "/api/db-backups": "gw-db-backups",
  "/api/settings/backups": "gw-db-backups",
  "/api/webhooks": "gw-webhooks",
  "/mcp": "gw-mcp",
  "/api/mcp": "gw-mcp",
  "/a2a": "gw-agents-a2a",
  "/.well-known/agent-card.json": "gw-agents-a2a",
  "/api/agent-skills": "gw-agents-a2a",
  "/api/plugins": "gw-agents-a2a",
  "/api/playground": "gw-models",
  "/api/health": "gw-version-manager",
  "/api/restart": "gw-version-manager",
  "/api/shutdown": "gw-version-manager",
  "/v1": "gw-inference",
  "/v1beta": "gw-inference",
  "/responses": "gw-inference",
  "/api/v1/responses": "gw-inference",
  "/realtime": "gw-inference",
  "/api/v1/realtime": "gw-inference",
  "/api/v1/provider-plugin-manifest": "gw-inference",
  "/api/chat": "gw-inference",
  "/api/generate": "gw-inference",
  "/api/tags": "gw-inference",
  "/api/embed": "gw-inference",
  "/api/embeddings": "gw-inference",
  "/api/show": "gw-inference",
  "/api/version": "gw-inference",
  "/api/ps": "gw-inference",
  "/api/hello": "gw-inference"
}

const covers = (prefix: string, path: string): boolean => path === prefix || path.startsWith(`${prefix}/`)

/** The skill of a path: its longest matching prefix. */
export const skillOfPath = (path: string): SkillId | undefined => {
  let best: string | undefined
  for (const prefix of Object.keys(ROUTE_PREFIXES))
    if (covers(prefix, path) && (best === undefined || prefix.length > best.length)) best = prefix
  return best === undefined ? undefined : ROUTE_PREFIXES[best]
}

/**
 * A route pattern as paths: `/^\/v1\/files\/(?<id>[^/]+)$/` → `/v1/files/{id}`; an optional
 * group gives the path with and without it (`/v1(?:beta)?/...` → `/v1/...`, `/v1beta/...`).
 */
export const displayPaths = (path: string | RegExp): ReadonlyArray<string> => {
  if (typeof path === "string") return [path]
  const expand = (src: string): Array<string> => {
    let outs = [""]
    const append = (alternatives: ReadonlyArray<string>) => (outs = outs.flatMap((o) => alternatives.map((a) => o + a)))
    for (let i = 0; i < src.length; i++) {
      const c = src[i]!
      if (c === "\\") {
        append([src[++i] ?? ""])
      } else if (c === "(") {
        let depth = 1
        let j = i + 1
        while (j < src.length && depth > 0) {
          if (src[j] === "\\") j++
          else if (src[j] === "(") depth++
          else if (src[j] === ")") depth--
          j++
        }
        const group = src.slice(i, j)
        const named = /^\(\?<([A-Za-z0-9_]+)>/.exec(group)
        const inner = named ? [`{${named[1]}}`] : expand(group.replace(/^\((\?:)?/, "").slice(0, -1))
        const optional = src[j] === "?"
        append(optional ? ["", ...inner] : inner)
        i = optional ? j : j - 1
      } else {
        append([c])
      }
    }
    return outs
  }
  return expand(path.source.replace(/^\^/, "").replace(/\$$/, ""))
}

type Access = "management" | "gateway-key" | "none"

interface RouteDoc {
  readonly method: string
  readonly path: string
  readonly access: Access
  readonly lines: ReadonlyArray<string>
}

const METHOD_ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

const byPath = (a: RouteDoc, b: RouteDoc) =>
  a.path < b.path ? -1 : a.path > b.path ? 1 : METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method)

const operationLines = (op: OpenApi.OpenAPISpecOperation, components: Record<string, unknown>): Array<string> => {
  const lines: Array<string> = op.summary ? [op.summary, ""] : []
  const params = (where: string) => op.parameters.filter((p) => p.in === where)
  const path = params("path")
  if (path.length > 0)
    lines.push(`- Path: ${fieldList(path.map((p) => ({ name: p.name, type: typeText(p.schema, components), required: true })))}`)
  const query = params("query")
  if (query.length > 0)
    lines.push(`- Query: ${fieldList(query.map((p) => ({ name: p.name, type: typeText(p.schema, components), required: p.required })))}`)
  for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
    const fields = type === "application/json" ? fieldsOf(media?.schema, components) : undefined
    lines.push(fields ? `- Body (JSON): ${fields.length > 0 ? fieldList(fields) : "an empty object"}` : `- Body: ${type}`)
  }
  const statuses = Object.keys(op.responses)
    .map(Number)
    .sort((a, b) => a - b)
  for (const status of statuses.filter((s) => s < 400)) {
    const content = op.responses[status]?.content ?? {}
    const [type, media] = Object.entries(content)[0] ?? []
    const fields = type === "application/json" ? fieldsOf(media?.schema, components) : undefined
    const what =
      type === undefined
        ? "no body"
        : fields
          ? fields.length > 0
            ? fieldList(fields)
            : "an empty object"
          : type === "application/json"
            ? typeText(media?.schema, components)
            : type
    lines.push(`- Answers ${status}: ${what}`)
  }
  const errors = statuses.filter((s) => s >= 400)
  if (errors.length > 0) lines.push(`- Errors: ${errors.join(", ")}`)
  return lines
}

const managementRoutes = (): Array<RouteDoc> => {
  const spec = managementOpenApi()
  const components = spec.components.schemas as Record<string, unknown>
  const out: Array<RouteDoc> = []
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(item) as Array<[string, OpenApi.OpenAPISpecOperation | undefined]>) {
      if (!op) continue
      out.push({
        method: method.toUpperCase(),
        path,
        access: op.security.length > 0 ? "management" : "none",
        lines: operationLines(op, components)
      })
    }
  }
  return out
}

/**
 * Stands in for every service the route builders take: they only keep their services for the
 * handlers, which never run here. Any property read or call answers the stand-in again.
 */
const standIn: unknown = new Proxy(function standIn() {}, {
  get: (_target, key) => (key === "then" || typeof key === "symbol" ? undefined : standIn),
  apply: () => standIn
})

const inferenceRoutes = (): Array<RouteDoc> =>
  inferenceRouteDefs(standIn as RouteServices).flatMap((r: RouteDef) =>
    displayPaths(r.path).map((path) => ({
      method: r.method,
      path,
      access: r.public ? ("none" as const) : ("gateway-key" as const),
      lines: [r.summary ?? `Requests and errors in the ${r.format.id} wire format.`]
    }))
  )

const AUTH_TEXT: Record<Access, string> = {
  management:
    "Management routes: an admin API key as `Authorization: Bearer <key>` (for instance the `GATEWAY_API_KEY` given to `gateway setup`), or the cookie session of `POST /api/auth/login`, whose requests that change something also send its CSRF token as `X-CSRF-Token`. With login not required (`PUT /api/settings/require-login`), a caller on this machine needs no credentials. A missing or refused credential is 401 or 403 with a JSON body.",
  "gateway-key":
    "Inference routes: a gateway API key as `Authorization: Bearer <key>`, `x-api-key`, `x-goog-api-key` or the `key` query parameter. It is required when `REQUIRE_API_KEY` is on or the gateway listens on a non-loopback address; otherwise it is optional and, when given, attributes usage to the key. Browser requests from origins not in `GATEWAY_ALLOWED_ORIGINS` always need one.",
  none: 'Routes marked "no authentication" answer anyone who reaches the port.'
}

const ACCESS_LABEL: Record<Access, string> = {
  management: "Management authentication",
  "gateway-key": "Gateway API key",
  none: "No authentication"
}

export interface ApiSections {
  readonly authentication: string
  readonly endpoints: string
}

export interface ApiSource {
  readonly sections: ReadonlyMap<SkillId, ApiSections>
  readonly errors: ReadonlyArray<{ readonly code: string; readonly message: string }>
}

const plannedNote = (skill: SkillId): Array<string> => {
  const areas = new Set<string>()
  for (const [prefix, id] of Object.entries(ROUTE_PREFIXES)) {
    if (id !== skill) continue
    const area =
      findPlanned(PLANNED_MANAGEMENT, `${prefix}/`) ??
      findPlanned(PLANNED_INFERENCE, prefix) ??
      findPlanned(PLANNED_INFERENCE, `${prefix}/`)
    if (area)
      areas.add(
        `The routes under ${code(`${prefix}/`)} are part of the gateway's specification (area: ${area.area}) but not built in this version: they answer 501 \`NotImplemented\`.`
      )
  }
  return [...areas]
}

/** Sections for the 22 API skills, and the routes no prefix maps. */
export const apiSource = (): ApiSource => {
  const routes = [...managementRoutes(), ...inferenceRoutes()]
  const bySkill = new Map<SkillId, Array<RouteDoc>>(API_SKILL_IDS.map((id) => [id, []]))
  const errors: Array<{ code: string; message: string }> = []
  for (const route of routes) {
    const skill = skillOfPath(route.path)
    if (skill === undefined)
      errors.push({
        code: "unmapped-route",
        message: `${route.method} ${route.path} belongs to no skill: add its prefix to ROUTE_PREFIXES (src/cli/skills/apiSource.ts)`
      })
    else bySkill.get(skill)?.push(route)
  }
  const sections = new Map<SkillId, ApiSections>()
  for (const id of API_SKILL_IDS) {
    const docs = (bySkill.get(id) ?? []).sort(byPath)
    const kinds = [...new Set(docs.map((d) => d.access))].sort()
    const planned = plannedNote(id)
    const body = docs.flatMap((d) => [`### ${code(`${d.method} ${d.path}`)}`, "", `${ACCESS_LABEL[d.access]}.`, "", ...d.lines, ""])
    const none = docs.length === 0 && planned.length === 0 ? ["No HTTP route of this version belongs to this skill."] : []
    sections.set(id, {
      authentication: [
        ...(kinds.length === 0 ? ["See the routes' own areas below."] : kinds.flatMap((k) => [AUTH_TEXT[k], ""])),
        `Base URL: the gateway's address, \`http://127.0.0.1:20128\` by default. The management API's OpenAPI document is ${code(`GET ${OPENAPI_PATH}`)} (no authentication).`
      ].join("\n"),
      endpoints: [...planned.flatMap((p) => [p, ""]), ...none, ...body].join("\n")
    })
  }
  return { sections, errors }
}
