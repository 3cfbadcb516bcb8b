import * as Schema from "effect/Schema"

/**
 * Waiting out a quota (docs/resilience.md, "Waiting out a quota"): a request whose every target is
 * out of quota, with a known reset, is parked until the reset instead of refused, when its combo or
 * its key allows a wait.
 */

/** A request's longest wait for a quota to reset, in whole seconds (0: off), at most a day. */
export const MaxQueueWaitSeconds = Schema.Int.pipe(
  Schema.between(0, 86_400, { message: () => "maxQueueWaitSeconds must be an integer number of seconds between 0 (off) and 86400" })
)

/** The requests parked for one combo (or model id) and one key. */
export const QueueGroupView = Schema.Struct({
  /** The combo name, or the model id of a request without a combo. */
  scope: Schema.String,
  combo: Schema.NullOr(Schema.String),
  apiKeyId: Schema.NullOr(Schema.String),
  parked: Schema.Number,
  /** How long the oldest of them has waited. */
  oldestWaitMs: Schema.Number,
  /** The earliest reset they wait for. */
  nextResetAt: Schema.NullOr(Schema.String)
})

/** `GET /api/resilience`'s `queue`: what is parked now and what the queue did since the start. */
export const QueueView = Schema.Struct({
  parked: Schema.Number,
  /** The bound (`quotaQueue.maxParked`): beyond it a request is refused at once. */
  maxParked: Schema.Number,
  oldestWaitMs: Schema.NullOr(Schema.Number),
  nextResetAt: Schema.NullOr(Schema.String),
  /** Parked requests sent after the reset and answered. */
  served: Schema.Number,
  /** Parked requests whose client went away. */
  dropped: Schema.Number,
  /** Requests refused because the queue was full. */
  refused: Schema.Number,
  groups: Schema.Array(QueueGroupView)
})
export type QueueView = typeof QueueView.Type
