import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/**
 * `GET /api/init`. Without management authentication only the first-run booleans and the
 * version; with it, the counts, the data directory and whether a restart is needed too.
 */
export const InitState = Schema.Struct({
  version: Schema.String,
  authenticated: Schema.Boolean,
  passwordSet: Schema.Boolean,
  /** At least one provider connection exists. */
  providersConfigured: Schema.Boolean,
  /** At least one gateway API key exists. */
  keysConfigured: Schema.Boolean,
  /** Nothing to set up any more: a password or an admin key, and a provider. */
  setupComplete: Schema.Boolean,
  providers: Schema.optional(Schema.Struct({ count: Schema.Number, enabled: Schema.Number })),
  keys: Schema.optional(Schema.Struct({ count: Schema.Number })),
  dataDir: Schema.optional(Schema.String),
  envFile: Schema.optional(Schema.String),
  /** The env file changed since the process started (it is read at start only). */
  restartRequired: Schema.optional(Schema.Boolean),
  startedAt: Schema.optional(Schema.String),
  pid: Schema.optional(Schema.Number)
})
export type InitState = typeof InitState.Type

/** `POST /api/restart` and `POST /api/shutdown`: accepted; the process stops once in-flight requests finished. */
export const StopAccepted = Schema.Struct({
  accepted: Schema.Boolean,
  action: Schema.Literal("restart", "shutdown"),
  /** restart: `supervisor` (the process runs the gateway again as its child) or `exit` (exit 75 for a service manager). */
  mode: Schema.optional(Schema.Literal("supervisor", "exit")),
  message: Schema.String
})

export const EnvRepairRequest = Schema.Struct({
  provider: Schema.String.pipe(Schema.minLength(1, { message: () => "provider must not be empty" }))
}).annotations(strict)

export const EnvRepairResult = Schema.Struct({
  success: Schema.Boolean,
  provider: Schema.String,
  /** Variables restored into the env file. */
  repaired: Schema.Array(Schema.String),
  /** The snapshot they came from; null when nothing was restored. */
  backupPath: Schema.NullOr(Schema.String),
  /** The provider's variables still missing after the repair (no snapshot had them). */
  missing: Schema.Array(Schema.String),
  restartRequired: Schema.Boolean
})
