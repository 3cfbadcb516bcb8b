import * as Schema from "effect/Schema"
import { BaseUrl } from "./connections.js"
import { CAPABILITIES, ModelPrice } from "./models.js"
import { oneOf, strict } from "./parse.js"

/**
 * Provider nodes (spec document 2, "Providers": `/api/provider-nodes*`): custom provider
 * definitions that then work as providers. docs/operations.md, "Provider nodes".
 */

/** The wire families a node can speak: the chat formats the executors know (src/upstream/client/executors.ts). */
export const NODE_FAMILIES = ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"] as const
export type NodeFamily = (typeof NODE_FAMILIES)[number]

/** How the connection's API key is sent: the chat families' styles, or none. */
export const NODE_AUTH_STYLES = ["bearer", "x-api-key", "x-goog-api-key", "none"] as const
export type NodeAuthStyle = (typeof NODE_AUTH_STYLES)[number]

/** The auth style of a family's own SDK: a node's default. */
export const FAMILY_AUTH: Record<NodeFamily, NodeAuthStyle> = {
  "openai-chat": "bearer",
  "openai-responses": "bearer",
  anthropic: "x-api-key",
  gemini: "x-goog-api-key",
  ollama: "bearer"
}

const RESERVED = ["auto", "qtsd", "claude-3-gateway-no-thinking", "api", "v1", "v1beta"]

/** A node id or prefix: one model-id segment (`<prefix>/<model>`), lower case. */
const Segment = (field: string) =>
  Schema.Trim.pipe(
    Schema.transform(Schema.String, { strict: true, decode: (s) => s.replace(/\/+$/, ""), encode: (s) => s }),
    Schema.minLength(1, { message: () => `${field} must not be empty` }),
    Schema.maxLength(64, { message: () => `${field} must be at most 64 characters` }),
    Schema.pattern(/^[a-z0-9][a-z0-9._-]*$/, {
      message: () => `${field} may hold lower-case letters, digits, '.', '_' and '-' only (it is a model-id prefix, <${field}>/<model>)`
    }),
    Schema.filter((s) => (RESERVED.includes(s) ? `${field} '${s}' is reserved` : true))
  )

export const NodeId = Segment("id")
export const NodePrefix = Segment("prefix")

const RESERVED_HEADERS = [
  "host",
  "content-length",
  "content-type",
  "transfer-encoding",
  "connection",
  "accept-encoding",
  "upgrade",
  "te",
  "trailer",
  "keep-alive"
]
const headerNameProblem = (name: string): string | undefined =>
  !/^[A-Za-z0-9-]{1,100}$/.test(name)
    ? `headers: '${name}' is not a header name (letters, digits and '-' only)`
    : RESERVED_HEADERS.includes(name.toLowerCase())
      ? `headers: '${name}' is set by the gateway and cannot be a default header`
      : undefined
const HeaderValue = Schema.String.pipe(
  Schema.maxLength(4096, { message: () => "headers: a header value must be at most 4096 characters" }),
  Schema.pattern(/^[^\r\n\0]*$/, { message: () => "headers: a header value must not contain line breaks" })
)
export const NodeHeaders = Schema.Record({ key: Schema.String, value: HeaderValue }).pipe(
  Schema.filter(
    (headers) =>
      Object.keys(headers)
        .map(headerNameProblem)
        .find((p) => p !== undefined) ?? true
  )
)

const Size = (field: string) =>
  Schema.Int.pipe(Schema.between(0, 100_000_000, { message: () => `${field} must be an integer between 0 and 100000000` }))

export const NodeModel = Schema.Struct({
  id: Schema.Trim.pipe(
    Schema.minLength(1, { message: () => "models[].id must not be empty" }),
    Schema.maxLength(200, { message: () => "models[].id must be at most 200 characters" }),
    Schema.pattern(/^[^\s]+$/, { message: () => "models[].id must not contain whitespace" })
  ),
  name: Schema.optional(Schema.Trim.pipe(Schema.minLength(1, { message: () => "models[].name must not be empty" }), Schema.maxLength(200))),
  contextLength: Schema.optional(Size("models[].contextLength")),
  maxOutput: Schema.optional(Size("models[].maxOutput")),
  capabilities: Schema.optional(Schema.Array(oneOf(CAPABILITIES, "models[].capabilities[]"))),
  price: Schema.optional(ModelPrice)
}).annotations(strict)
export type NodeModel = typeof NodeModel.Type

const NodeName = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(100, { message: () => "name must be at most 100 characters" })
)

const NodeFields = {
  name: Schema.optional(NodeName),
  prefix: Schema.optional(NodePrefix),
  baseUrl: BaseUrl,
  family: oneOf(NODE_FAMILIES, "family"),
  authStyle: Schema.optional(oneOf(NODE_AUTH_STYLES, "authStyle")),
  headers: Schema.optional(NodeHeaders),
  models: Schema.optional(Schema.Array(NodeModel).pipe(Schema.maxItems(1000, { message: () => "models: at most 1000 models per node" })))
}

/** `POST /api/provider-nodes`. */
export const CreateProviderNode = Schema.Struct({ id: NodeId, ...NodeFields }).annotations(strict)
export type CreateProviderNode = typeof CreateProviderNode.Type

/** `PUT /api/provider-nodes/{id}`: the whole definition (the id is the path's). */
export const ReplaceProviderNode = Schema.Struct(NodeFields).annotations(strict)
export type ReplaceProviderNode = typeof ReplaceProviderNode.Type

/** `PATCH /api/provider-nodes/{id}`: the fields given replace those of the node (`headers` and `models` whole). */
export const PatchProviderNode = Schema.Struct({
  name: Schema.optional(NodeName),
  prefix: Schema.optional(NodePrefix),
  baseUrl: Schema.optional(BaseUrl),
  family: Schema.optional(oneOf(NODE_FAMILIES, "family")),
  authStyle: Schema.optional(oneOf(NODE_AUTH_STYLES, "authStyle")),
  headers: Schema.optional(NodeHeaders),
  models: NodeFields.models
}).annotations(strict)
export type PatchProviderNode = typeof PatchProviderNode.Type

/** `POST /api/provider-nodes/{id}/test`. */
export const TestProviderNode = Schema.Struct({
  /** The key to test with; default: the node's first connection's key (none when it has none). */
  apiKey: Schema.optional(Schema.String.pipe(Schema.maxLength(4096, { message: () => "apiKey must be at most 4096 characters" }))),
  /** Add the models the upstream lists (and the node lacks) to the node. */
  importModels: Schema.optional(Schema.Boolean)
}).annotations(strict)
export type TestProviderNode = typeof TestProviderNode.Type

export const ProviderNodeModelView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  contextLength: Schema.Number,
  maxOutput: Schema.Number,
  capabilities: Schema.Array(Schema.String),
  price: Schema.Struct({ input: Schema.Number, output: Schema.Number, cachedInput: Schema.NullOr(Schema.Number) })
})

export const ProviderNodeView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  baseUrl: Schema.String,
  family: Schema.String,
  authStyle: Schema.String,
  /** Header values masked (they are stored encrypted, like API keys). */
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  models: Schema.Array(ProviderNodeModelView),
  /** The names of the connections made for this node. */
  connections: Schema.Array(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type ProviderNodeView = typeof ProviderNodeView.Type

export const ProviderNodeTestResult = Schema.Struct({
  id: Schema.String,
  ok: Schema.Boolean,
  status: Schema.NullOr(Schema.Number),
  latencyMs: Schema.Number,
  error: Schema.NullOr(Schema.String),
  /** The model ids the upstream's model list answered. */
  models: Schema.Array(Schema.String),
  /** The ones added to the node (`importModels: true`). */
  imported: Schema.Array(Schema.String)
})
export type ProviderNodeTestResult = typeof ProviderNodeTestResult.Type
