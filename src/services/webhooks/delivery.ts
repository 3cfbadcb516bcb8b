import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as crypto from "node:crypto"
import type { UpstreamHttpShape } from "../../upstream/client/UpstreamHttp.js"

/**
 * One webhook delivery: the spec's headers and envelope, the Standard Webhooks headers, one
 * attempt with its 10 s limit, and the retry Schedule (docs/webhooks.md, "Delivery").
 */

/** Where a delivery goes, as the worker reads it at each attempt (a PUT may change it between two). */
export interface DeliveryTarget {
  readonly url: string
  readonly secret: string
}

/** A message: its id (the same on every attempt: `webhook-id`, for the receiver's de-duplication), event and raw body. */
export interface DeliveryMessage {
  readonly id: string
  readonly event: string
  readonly body: string
}

export interface AttemptOutcome {
  /** 2xx. */
  readonly ok: boolean
  /** HTTP status, 0 when no answer came (refused, unreachable, timed out, blocked by the outbound policy). */
  readonly status: number
  /** Worth another attempt: a 5xx or a network failure (not a refused address: the policy answers the same next time). */
  readonly retryable: boolean
  readonly error: string | null
}

export const ATTEMPT_TIMEOUT = Duration.seconds(10)
export const RETRIES = 3
export const USER_AGENT = "Gateway-Webhook/1.0"
/** Read of a receiver's answer: only its status matters, the body is read (to keep the connection) up to this much. */
const ANSWER_MAX_BYTES = 64 * 1024

/** The envelope of the spec: `event`, `timestamp` (ISO 8601, when the event happened), `data`. */
export const envelope = (event: string, timestamp: string, data: Readonly<Record<string, unknown>>): string =>
  JSON.stringify({ event, timestamp, data })

/** `X-Webhook-Signature`: `sha256=` + hex HMAC-SHA256 of the raw body, keyed by the secret's characters. */
export const specSignature = (secret: string, body: string): string =>
  `sha256=${crypto.createHmac("sha256", secret).update(body).digest("hex")}`

/**
 * The Standard Webhooks key. A secret `whsec_<base64>` (the generated `whsec_` + 48 hex is one:
 * hex digits are base64 characters, so its 48 characters decode to 36 key bytes) is keyed by the
 * decoded bytes, exactly as `new Webhook(secret)` of the `standardwebhooks` library reads it.
 * Any other secret is keyed by its own characters: the receiver passes
 * `new Webhook(secret, { format: "raw" })`.
 */
export const standardKey = (secret: string): Buffer => {
  const rest = secret.startsWith("whsec_") ? secret.slice(6) : undefined
  if (rest !== undefined && rest.length > 0 && rest.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(rest)) {
    const key = Buffer.from(rest, "base64")
    if (key.length > 0) return key
  }
  return Buffer.from(secret, "latin1")
}

/** `webhook-signature`: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body` (timestamp in whole seconds). */
export const standardSignature = (secret: string, id: string, seconds: number, body: string): string =>
  `v1,${crypto.createHmac("sha256", standardKey(secret)).update(`${id}.${seconds}.${body}`).digest("base64")}`

/** The request headers of one attempt at `nowMs` (both timestamps are the attempt's, for the receiver's replay window). */
export const deliveryHeaders = (target: DeliveryTarget, message: DeliveryMessage, nowMs: number): Record<string, string> => {
  const seconds = Math.floor(nowMs / 1000)
  return {
    "content-type": "application/json",
    "user-agent": USER_AGENT,
    "x-webhook-event": message.event,
    "x-webhook-timestamp": new Date(nowMs).toISOString(),
    "x-webhook-signature": specSignature(target.secret, message.body),
    "webhook-id": message.id,
    "webhook-timestamp": String(seconds),
    "webhook-signature": standardSignature(target.secret, message.id, seconds, message.body)
  }
}

/**
 * One attempt, never failing: 2xx is delivered; 3xx and 4xx are final (redirects are not
 * followed); 5xx, a network failure or no answer within 10 s are worth a retry. The time is the
 * Effect Clock's (so a test clock drives the timestamps too).
 */
export const attempt = (http: UpstreamHttpShape, target: DeliveryTarget, message: DeliveryMessage): Effect.Effect<AttemptOutcome> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    http
      .request({
        url: target.url,
        method: "POST",
        headers: deliveryHeaders(target, message, now),
        body: message.body,
        headersTimeout: ATTEMPT_TIMEOUT,
        bodyIdleTimeout: ATTEMPT_TIMEOUT,
        readWhole: true,
        maxBodyBytes: ANSWER_MAX_BYTES
      })
      .pipe(
        Effect.timeoutFail({
          duration: ATTEMPT_TIMEOUT,
          onTimeout: () => ({ kind: "timeout" as const, message: "no answer within 10 s" })
        }),
        Effect.match({
          onFailure: (e): AttemptOutcome => ({
            ok: false,
            status: 0,
            retryable: e.kind !== "blocked",
            error: e.kind === "timeout" ? "no answer within 10 s" : e.message
          }),
          onSuccess: (res): AttemptOutcome => {
            const ok = res.status >= 200 && res.status < 300
            return { ok, status: res.status, retryable: res.status >= 500, error: ok ? null : `receiver answered HTTP ${res.status}` }
          }
        })
      )
  )

/** Waits before the retries: `2^n * base` (1, 2, 4 s with the spec's base of 1 s), at most RETRIES of them. */
export const retrySchedule = (base: Duration.DurationInput) =>
  Schedule.exponential(base, 2).pipe(Schedule.intersect(Schedule.recurs(RETRIES)))

/**
 * A delivery: the first attempt and up to 3 retries while the outcome is retryable, each reported
 * to `onAttempt` (which updates `last_triggered_at` and `last_status`). Answers the last outcome.
 */
export const deliver = (
  http: UpstreamHttpShape,
  target: () => DeliveryTarget,
  message: DeliveryMessage,
  options: { readonly retryBase: Duration.DurationInput; readonly onAttempt: (o: AttemptOutcome) => Effect.Effect<void> }
): Effect.Effect<AttemptOutcome> =>
  Effect.suspend(() => attempt(http, target(), message)).pipe(
    Effect.tap(options.onAttempt),
    Effect.flatMap((o) => (o.retryable ? Effect.fail(o) : Effect.succeed(o))),
    Effect.retry(retrySchedule(options.retryBase)),
    Effect.merge
  )
