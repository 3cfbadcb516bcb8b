import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/** `inference` keys call the model routes; `admin` keys also manage the gateway. */
export const ApiKeyScope = Schema.Literal("inference", "admin")
export type ApiKeyScope = typeof ApiKeyScope.Type

export const ApiKeyName = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(64, { message: () => "name must be at most 64 characters" })
)

export const CreateApiKey = Schema.Struct({
  name: Schema.optional(ApiKeyName),
  scopes: Schema.optional(
    Schema.Array(ApiKeyScope).pipe(Schema.minItems(1, { message: () => "scopes must not be empty" }))
  ),
  expiresAt: Schema.optional(
    Schema.NullOr(Schema.DateFromString.pipe(Schema.validDate({ message: () => "expiresAt must be an ISO 8601 date" })))
  )
}).annotations(strict)
export type CreateApiKey = typeof CreateApiKey.Type

export const ApiKeyView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  /** The key with all but its first and last characters hidden. */
  key: Schema.String,
  scopes: Schema.Array(ApiKeyScope),
  enabled: Schema.Boolean,
  createdAt: Schema.String,
  expiresAt: Schema.NullOr(Schema.String),
  lastUsedAt: Schema.NullOr(Schema.String)
})
export type ApiKeyView = typeof ApiKeyView.Type

/** Returned once, at creation: the only time the full key is shown. */
export const CreatedApiKey = Schema.Struct({
  ...ApiKeyView.fields,
  secret: Schema.String
})
export type CreatedApiKey = typeof CreatedApiKey.Type

export const API_KEY_MIN_LENGTH = 16
