import { unknownEvents, type WebhookSaved, type WebhookView } from "../../domain/webhooks.js"

/**
 * A webhook as the `webhooks` table holds it, and as `/api/webhooks` answers it (docs/webhooks.md):
 * the registry (registry.ts) writes the rows, the dispatcher (dispatcher.ts) delivers by them.
 */

export interface Row {
  readonly id: string
  readonly url: string
  readonly events: string
  readonly secret: string
  readonly enabled: number
  readonly description: string | null
  readonly created_at: number
  readonly last_triggered_at: number | null
  readonly last_status: number | null
  readonly failure_count: number
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString())

/** The event names a row subscribes to (`*` for all, and when the column cannot be read). */
export const parseEvents = (text: string): ReadonlyArray<string> => {
  try {
    const v: unknown = JSON.parse(text)
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : ["*"]
  } catch {
    return ["*"]
  }
}

/** A secret as listed: its first characters only. */
export const maskSecret = (secret: string): string => `${secret.slice(0, 10)}…`

/** A row as the API answers it, with `secret` as given (full, or masked). */
export const toView = (row: Row, secret: string): WebhookView => ({
  id: row.id,
  url: row.url,
  events: parseEvents(row.events),
  secret,
  enabled: row.enabled ? 1 : 0,
  description: row.description,
  created_at: iso(row.created_at)!,
  last_triggered_at: iso(row.last_triggered_at),
  last_status: row.last_status,
  failure_count: row.failure_count
})

/** A created or edited webhook's answer: a warning for each event name that is not one. */
export const saved = (view: WebhookView, events: ReadonlyArray<string>): WebhookSaved => {
  const unknown = unknownEvents(events)
  return unknown.length === 0
    ? view
    : { ...view, warnings: unknown.map((e) => `events: '${e}' is not an event name; it is stored but never matches`) }
}
