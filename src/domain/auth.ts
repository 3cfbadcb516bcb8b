import * as Schema from "effect/Schema"
import { strict } from "./parse.js"
import { Role } from "./teams.js"

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

/** Who a management caller acts as (docs/teams.md, "Who a caller is"). */
export const SessionUser = Schema.Struct({
  /** Null for a team's key: it acts as a member of its team, no user. */
  id: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  name: Schema.NullOr(Schema.String),
  role: Role,
  teamIds: Schema.Array(Schema.String),
  /** The teams the user administers (a team-admin). */
  teamAdminOf: Schema.Array(Schema.String)
})

export const SessionInfo = Schema.Struct({
  authenticated: Schema.Boolean,
  via: Schema.NullOr(Schema.Literal("session", "api-key")),
  csrfToken: Schema.NullOr(Schema.String),
  passwordSet: Schema.Boolean,
  /** The user the caller acts as: its session's or key's, or (requireLogin off) this machine's; null for nobody. */
  user: Schema.NullOr(SessionUser),
  /** The user's role (null: nobody): what the dashboard shows and hides. */
  role: Schema.NullOr(Role),
  /** The ids (`group.endpoint`) of the authenticated management routes the role may call (docs/teams.md, "Roles and access"). */
  routes: Schema.Array(Schema.String)
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
