import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Effect from "effect/Effect"
import { SESSION_COOKIE } from "../../services/auth/AdminAuth.js"
import { VERSION } from "../../kernel/version.js"
import { ManagementApi, ManagementAuth } from "./Api.js"
import { routeAccessTable } from "./routeAccess.js"

/** Where the gateway serves the document (no authentication: it describes, it reveals nothing). */
export const OPENAPI_PATH = "/api/openapi.json"

const SECURITY: OpenApi.OpenAPISpec["components"]["securitySchemes"] = {
  adminKey: { type: "http", scheme: "bearer", description: "A gateway API key with the admin scope." },
  session: {
    type: "apiKey",
    in: "cookie",
    name: SESSION_COOKIE,
    description: "The session of POST /api/auth/login; requests that change something also send its CSRF token as X-CSRF-Token."
  }
}

/** `group.endpoint` ids of the operations behind `ManagementAuth` (the group's or the endpoint's own). */
const authenticatedOperations = (): ReadonlySet<string> => {
  const ids = new Set<string>()
  HttpApi.reflect(ManagementApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group, middleware }) => {
      if ([...middleware].some((m) => m.key === ManagementAuth.key)) ids.add(`${group.identifier}.${endpoint.name}`)
    }
  })
  return ids
}

let cached: OpenApi.OpenAPISpec | undefined

/**
 * The management API's OpenAPI 3.1 document, from the same `HttpApi` the server implements:
 * its title and version, which operations need management authentication (`security`;
 * an empty list means none) and which roles may call each (`x-gateway-roles`, from the routes'
 * `Roles` annotations; every role for one that needs no authentication). The agent-skill
 * generator reads the same document.
 */
export const managementOpenApi = (): OpenApi.OpenAPISpec => {
  if (cached) return cached
  const spec = OpenApi.fromApi(ManagementApi)
  const secured = authenticatedOperations()
  const roles = new Map(routeAccessTable().map((r) => [r.id, r.roles]))
  for (const item of Object.values(spec.paths)) {
    for (const op of Object.values(item)) {
      if (!op) continue
      op.security = secured.has(op.operationId) ? [{ adminKey: [] }, { session: [] }] : []
      const allowed = roles.get(op.operationId)
      if (allowed) (op as { "x-gateway-roles"?: ReadonlyArray<string> })["x-gateway-roles"] = allowed
    }
  }
  cached = {
    ...spec,
    info: {
      title: "gateway management API",
      version: VERSION,
      description: "The management plane of the gateway (docs/ARCHITECTURE.md). Inference routes are not part of it (docs/formats.md)."
    },
    components: { ...spec.components, securitySchemes: SECURITY }
  }
  return cached
}

/** `GET /api/openapi.json` on the management router; the document is built at the first request. */
export const OpenApiRoute = HttpApiBuilder.Router.use((router) =>
  router.get(
    OPENAPI_PATH,
    Effect.sync(() => HttpServerResponse.unsafeJson(managementOpenApi()))
  )
)
