import * as Schema from "effect/Schema"

/** `GET /api/sessions` query: `apiKeyId` narrows to one key's sessions, `limit` (1 to 1000, default 100). */
export const SessionsQuery = Schema.Struct({
  apiKeyId: Schema.optional(Schema.String.pipe(Schema.minLength(1, { message: () => "apiKeyId must not be empty" }))),
  limit: Schema.optional(
    Schema.NumberFromString.pipe(
      Schema.int({ message: () => "limit must be an integer" }),
      Schema.between(1, 1000, { message: () => "limit must be between 1 and 1000" })
    ).annotations({ message: () => "limit must be an integer between 1 and 1000" })
  )
})

/** One sticky session (X-Session-Id) in one routing scope (a combo or an auto id). */
export const SessionView = Schema.Struct({
  id: Schema.String,
  scope: Schema.String,
  /** The API key id the session's requests came with (an id, not the key); null without a key. */
  key: Schema.NullOr(Schema.String),
  connection: Schema.String,
  model: Schema.String,
  /** `<connection>/<model>` the session is pinned to. */
  target: Schema.String,
  firstSeen: Schema.String,
  lastSeen: Schema.String,
  requests: Schema.Number
})
export type SessionView = typeof SessionView.Type

export const SessionList = Schema.Struct({
  sessions: Schema.Array(SessionView),
  /** Live sessions matching the filter before `limit`. */
  total: Schema.Number
})

export const UnpinResult = Schema.Struct({ unpinned: Schema.String, scopes: Schema.Number })
