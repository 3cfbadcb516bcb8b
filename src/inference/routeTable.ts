/**
 * Which route a request gets: the inference routes by method and path, a path's route with its
 * parameters percent-decoded, a route's label in metrics and spans, and the routes a request gets
 * when none of the table's fits (the editor's base URL, a planned path, a 404 or 405).
 */
import * as Effect from "effect/Effect"
import type * as http from "node:http"
import { openAiChat } from "../upstream/formats/openai-chat.js"
import { findPlanned, PLANNED_INFERENCE, plannedMessage } from "../platform/http/planned.js"
import { decodePathSegment, quotedPath } from "../kernel/untrusted.js"
import { badRequest, InferenceError } from "../kernel/errors.js"
import { sendJson } from "./io.js"
import type { makeTryCommon } from "./commonRequest.js"
import type { InferenceRequest, makeRequestPrograms } from "./requestProgram.js"
import type { RouteDef } from "./routes/types.js"

const normalise = (path: string): string => (path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path)

/** The routes by `METHOD path`, and those whose path is a pattern. */
export interface RouteTable {
  readonly exact: Map<string, RouteDef>
  readonly patterns: ReadonlyArray<RouteDef & { readonly path: RegExp }>
}

/** The table of `routes`, built once with the layer. */
export const buildTable = (routes: ReadonlyArray<RouteDef>): RouteTable => ({
  exact: new Map(routes.filter((r) => typeof r.path === "string").map((r) => [`${r.method} ${r.path}`, r])),
  patterns: routes.filter((r): r is RouteDef & { path: RegExp } => r.path instanceof RegExp)
})

/** The methods a path is served with (for a 405's `Allow`), empty when no route has the path. */
const methodsOf = (table: RouteTable, path: string): Array<string> => {
  const methods: Array<string> = []
  for (const m of ["GET", "HEAD", "POST", "DELETE"]) if (table.exact.has(`${m} ${path}`)) methods.push(m)
  for (const r of table.patterns) if (!methods.includes(r.method) && r.path.test(path)) methods.push(r.method)
  return methods
}

/** Paths under /api/ that no inference route has belong to the management plane (its own 404 shape). */
const isManagementPath = (path: string): boolean => path === "/api" || path.startsWith("/api/") || path === "/metrics"

/** Requests no route has: one label for all of them in metrics and spans (their paths are the client's). */
const UNMATCHED = "unmatched"

const labels = new WeakMap<RegExp, string>()

/**
 * A route's label in metrics and spans: its path, or for a pattern its template
 * (`/v1/providers/{provider}/embeddings`); never the concrete path, whose parameters are the
 * client's (and, for the editor routes, a key).
 */
export const routeLabel = (route: RouteDef): string => {
  const p = route.path
  if (typeof p === "string") return p
  let label = labels.get(p)
  if (label === undefined) {
    label = p.source
      .replace(/^\^/, "")
      .replace(/\$$/, "")
      .replace(/\(\?<(\w+)>(?:[^()]|\([^()]*\))*\)/g, "{$1}")
      .replace(/\\(.)/g, "$1")
    labels.set(p, label)
  }
  return label
}

/** A 404 (no route has the path) or 405 (another method has it) in the OpenAI error shape, before authentication. */
const noRoute = (method: string, path: string, allowed: ReadonlyArray<string>): RouteDef => ({
  method: "GET",
  path: UNMATCHED,
  format: openAiChat,
  public: true,
  handle: () =>
    Effect.fail(
      allowed.length === 0
        ? new InferenceError({
            status: 404,
            kind: "invalid_request",
            code: "not_found",
            message: `no route for ${method} ${quotedPath(path)}`
          })
        : new InferenceError({
            status: 405,
            kind: "invalid_request",
            code: "method_not_allowed",
            message: `${method} is not allowed on ${quotedPath(path)}; use ${allowed.join(" or ")}`,
            headers: { allow: allowed.join(", ") }
          })
    )
})

/**
 * The route for a request and its path parameters, percent-decoded here once (handlers get
 * text); `malformed` names the first parameter whose escapes cannot be decoded (`%ZZ`).
 */
const match = (
  table: RouteTable,
  method: string,
  path: string
): { route: RouteDef; params: Record<string, string>; malformed?: string } | undefined => {
  const exact = table.exact.get(`${method} ${path}`)
  if (exact) return { route: exact, params: {} }
  for (const r of table.patterns) {
    if (r.method !== method) continue
    const m = r.path.exec(path)
    if (!m) continue
    const params: Record<string, string> = {}
    for (const name in m.groups) {
      const value = decodePathSegment(m.groups[name] ?? "")
      if (value === undefined) return { route: r, params, malformed: name }
      params[name] = value
    }
    return { route: r, params }
  }
  return undefined
}

/** The route, answering only a 400 in its format (before authentication): a path parameter is not valid percent-encoding. */
const malformedParam = (route: RouteDef, name: string, path: string): RouteDef => ({
  ...route,
  public: true,
  handle: () =>
    Effect.fail(badRequest(`path parameter '${name}' is not valid percent-encoding: ${quotedPath(path)}`, name, "invalid_path_encoding"))
})

/** `/api/v1/editor/{token}/...` → the route behind it, authenticated by the token. */
const EDITOR = /^\/api\/v1\/editor\/(?<token>[^/]+)(?<rest>\/.*)?$/
const EDITOR_PATHS: Record<string, string> = {
  "/models": "/v1/models",
  "/chat/completions": "/v1/chat/completions",
  "/responses": "/v1/responses",
  "/api/chat": "/api/chat",
  "/api/tags": "/api/tags"
}

export interface RouteLookupDeps {
  readonly table: RouteTable
  /** A request's program on its route (`token`: the editor path's key). */
  readonly program: ReturnType<typeof makeRequestPrograms>["program"]
  /** The request on the common path when its route has one; false when not even begun. */
  readonly tryCommon: ReturnType<typeof makeTryCommon>
}

export const makeRouteLookup = ({ table, program, tryCommon }: RouteLookupDeps) => {
  const editorInfo: RouteDef = {
    method: "GET",
    path: "/",
    format: openAiChat,
    handle: (ctx) =>
      Effect.sync(() =>
        sendJson(ctx, 200, {
          ok: true,
          note: "OpenAI-compatible base URL for clients that cannot send headers",
          endpoints: Object.keys(EDITOR_PATHS)
        })
      )
  }

  return (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    rawPath: string,
    query: string,
    fork?: (request: InferenceRequest) => void
  ): InferenceRequest | "common" | undefined => {
    const path = normalise(rawPath)
    const method = req.method ?? "GET"
    const editor = EDITOR.exec(path)
    if (editor) {
      const rest = editor.groups!["rest"] ?? "/"
      const inner =
        rest === "/" && method === "GET"
          ? { route: editorInfo, params: {} }
          : EDITOR_PATHS[rest]
            ? match(table, method, EDITOR_PATHS[rest]!)
            : undefined
      if (!inner && EDITOR_PATHS[rest])
        return program(req, res, path, query, noRoute(method, path, methodsOf(table, EDITOR_PATHS[rest]!)), {})
      if (inner) {
        const token = decodePathSegment(editor.groups!["token"]!)
        return token === undefined
          ? program(req, res, path, query, malformedParam(inner.route, "token", path), {})
          : program(req, res, path, query, inner.route, inner.params, token)
      }
    }
    const found = match(table, method, path)
    if (found) {
      if (found.malformed !== undefined) return program(req, res, path, query, malformedParam(found.route, found.malformed, path), {})
      if (fork !== undefined && found.route.common !== undefined && tryCommon(req, res, path, query, found.route, found.params, fork))
        return "common"
      return program(req, res, path, query, found.route, found.params)
    }
    const planned = findPlanned(PLANNED_INFERENCE, path)
    if (planned) {
      const notBuilt: RouteDef = {
        method: "POST",
        path,
        format: openAiChat,
        handle: () =>
          Effect.fail(
            new InferenceError({ status: 501, kind: "invalid_request", code: "not_implemented", message: plannedMessage(planned) })
          )
      }
      return program(req, res, path, query, notBuilt, {})
    }
    // Not served with this method: a 405 when another method has the path, else (outside /api/) a 404.
    const allowed = methodsOf(table, path)
    if (allowed.length === 0 && isManagementPath(path)) return undefined
    return program(req, res, path, query, noRoute(method, path, allowed), {})
  }
}
