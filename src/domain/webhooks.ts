import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/**
 * Webhooks (spec document 2, "Webhook", "Webhook API", "Events"; docs/webhooks.md): HMAC-signed
 * deliveries of platform events to receivers the admin registers.
 */

/** The event names a webhook can receive; `*` in a webhook's `events` means all of these. */
export const WEBHOOK_EVENTS = [
  "request.completed",
  "request.failed",
  "provider.error",
  "provider.recovered",
  "quota.exceeded",
  "combo.switched",
  "mcp.call.completed",
  "mcp.call.failed",
  "realtime.session.started",
  "realtime.session.ended",
  "test.ping"
] as const
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number]

/** Names in a webhook's `events` that no event carries: stored, never matched (answered as `warnings`). */
export const unknownEvents = (events: ReadonlyArray<string>): ReadonlyArray<string> =>
  events.filter((e) => e !== "*" && !(WEBHOOK_EVENTS as ReadonlyArray<string>).includes(e))

const WebhookUrl = Schema.String.pipe(
  Schema.maxLength(2048, { message: () => "url must be at most 2048 characters" }),
  Schema.filter(
    (s) => {
      try {
        const u = new URL(s)
        return u.protocol === "http:" || u.protocol === "https:" ? true : `url must be http or https (got ${JSON.stringify(u.protocol)})`
      } catch {
        return `url must be an absolute http(s) URL (got ${JSON.stringify(s.slice(0, 100))})`
      }
    },
    { identifier: "WebhookUrl" }
  )
)

/**
 * A caller-chosen secret: 16 to 256 printable ASCII characters (the bytes are the characters, so
 * every receiver library reads the same key). `whsec_` + base64 is the Standard Webhooks form.
 */
const WebhookSecret = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{16,256}$/, { message: () => "secret must be 16 to 256 printable ASCII characters without spaces" })
)

const EventList = Schema.Array(
  Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9*._-]{1,100}$/, { message: () => "each event must be 1-100 letters, digits, '.', '_', '-' or '*'" })
  )
).pipe(
  Schema.minItems(1, { message: () => 'events must not be empty (omit it for ["*"], every event)' }),
  Schema.maxItems(50, { message: () => "events may list at most 50 names" })
)

const Description = Schema.String.pipe(Schema.maxLength(1000, { message: () => "description must be at most 1000 characters" }))

export const CreateWebhook = Schema.Struct({
  url: WebhookUrl,
  /** Default: generated, `whsec_` + 48 hex characters. */
  secret: Schema.optional(WebhookSecret),
  /** Default `["*"]`. */
  events: Schema.optional(EventList),
  description: Schema.optional(Description)
}).annotations(strict)
export type CreateWebhook = typeof CreateWebhook.Type

/** `enabled` as the spec stores it (0 or 1) or as a boolean. */
const EnabledInput = Schema.Union(Schema.Boolean, Schema.Literal(0, 1)).annotations({
  message: () => "enabled must be true, false, 0 or 1"
})

export const UpdateWebhook = Schema.Struct({
  url: Schema.optional(WebhookUrl),
  secret: Schema.optional(WebhookSecret),
  events: Schema.optional(EventList),
  /** null clears it. */
  description: Schema.optional(Schema.NullOr(Description)),
  /** true re-enables a disabled webhook and resets its failure_count. */
  enabled: Schema.optional(EnabledInput)
}).annotations(strict)
export type UpdateWebhook = typeof UpdateWebhook.Type

/** A webhook as the API answers it: the spec's resource fields, snake_case as the spec names them. */
export const WebhookView = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  /** Full in the detail and in the create answer; first 10 characters + "…" in the list. */
  secret: Schema.String,
  /** 1 or 0, as the spec's resource table has it. */
  enabled: Schema.Literal(0, 1),
  description: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  /** Every delivery attempt (and test) sets it. */
  last_triggered_at: Schema.NullOr(Schema.String),
  /** HTTP status of the last attempt; 0 for a network failure (refused, timed out, blocked). */
  last_status: Schema.NullOr(Schema.Int),
  /** Failed deliveries in a row (after their retries); 10 disables the webhook. */
  failure_count: Schema.Int
})
export type WebhookView = typeof WebhookView.Type

/** The create and update answers: the webhook, and names in `events` that match no event (stored, never matched). */
export const WebhookSaved = Schema.extend(WebhookView, Schema.Struct({ warnings: Schema.optional(Schema.Array(Schema.String)) }))
export type WebhookSaved = typeof WebhookSaved.Type

export const WebhookList = Schema.Struct({ webhooks: Schema.Array(WebhookView) })

export const WebhookTestResult = Schema.Struct({
  delivered: Schema.Boolean,
  /** HTTP status of the receiver's answer; 0 when none came (network failure, timeout, refused address). */
  status: Schema.Int,
  error: Schema.NullOr(Schema.String)
})
export type WebhookTestResult = typeof WebhookTestResult.Type
