import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

export const PASSWORD_MIN_LENGTH = 8

export const AdminPassword = Schema.String.pipe(
  Schema.minLength(PASSWORD_MIN_LENGTH, {
    message: () => `password must be at least ${PASSWORD_MIN_LENGTH} characters`
  }),
  Schema.maxLength(1024, { message: () => "password must be at most 1024 characters" })
)

export const LoginRequest = Schema.Struct({
  password: Schema.String.pipe(Schema.maxLength(1024, { message: () => "password must be at most 1024 characters" }))
}).annotations(strict)

/**
 * `POST /api/auth/setup`: the first admin password, from the dashboard's first-run page. Only
 * while no password is set, and only from this machine directly or with an admin API key
 * (docs/dashboard.md, "First run").
 */
export const SetupRequest = Schema.Struct({ password: AdminPassword }).annotations(strict)

export const LoginResult = Schema.Struct({
  ok: Schema.Boolean,
  /** Send back as `X-CSRF-Token` on POST, PUT, PATCH and DELETE made with the session cookie. */
  csrfToken: Schema.String,
  expiresAt: Schema.String
})

export const SessionInfo = Schema.Struct({
  authenticated: Schema.Boolean,
  via: Schema.NullOr(Schema.Literal("session", "api-key")),
  csrfToken: Schema.NullOr(Schema.String),
  passwordSet: Schema.Boolean
})

export const HealthPing = Schema.Struct({
  ok: Schema.Boolean,
  version: Schema.String,
  uptimeSeconds: Schema.Number,
  time: Schema.String,
  /** The process that answered. */
  pid: Schema.Number,
  /** With `gateway --workers N`: which worker (1..N) answered. */
  worker: Schema.optional(Schema.Number),
  /** A tunnel is open: the gateway is reachable from the internet (`doctor` and the dashboard say so; which one only to an admin). */
  tunnelOpen: Schema.Boolean
})
