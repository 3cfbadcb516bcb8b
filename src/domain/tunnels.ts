import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/**
 * Tunnels (spec document 2, "Tunnel API"; docs/tunnels.md): three backends, each with a status
 * object; the mesh funnel also has its setup steps (check, install, start-daemon, login).
 */
export const TUNNEL_KINDS = ["quick", "token", "mesh"] as const
export const TunnelKind = Schema.Literal(...TUNNEL_KINDS)
export type TunnelKind = typeof TunnelKind.Type

export const TunnelPhase = Schema.Literal("stopped", "starting", "running", "needs_auth", "error")

/** The status object of every backend (the mesh's aggregated status names its address `tunnelUrl`). */
export const TunnelStatus = Schema.Struct({
  phase: TunnelPhase,
  running: Schema.optional(Schema.Boolean),
  publicUrl: Schema.optional(Schema.NullOr(Schema.String)),
  tunnelUrl: Schema.optional(Schema.NullOr(Schema.String)),
  apiUrl: Schema.optional(Schema.NullOr(Schema.String)),
  targetUrl: Schema.optional(Schema.NullOr(Schema.String)),
  lastError: Schema.optional(Schema.NullOr(Schema.String))
})
export type TunnelStatus = typeof TunnelStatus.Type

/** The mesh funnel's status: the common object, its address also as `tunnelUrl`, and when the network has not allowed the funnel yet, where
 * to allow it. */
export const MeshStatus = Schema.Struct({
  ...TunnelStatus.fields,
  tunnelUrl: Schema.NullOr(Schema.String),
  funnelNotEnabled: Schema.optional(Schema.Boolean),
  enableUrl: Schema.optional(Schema.String),
  /** `disable`: a funnel the daemon still served could not be turned off. */
  error: Schema.optional(Schema.String)
})
export type MeshStatus = typeof MeshStatus.Type

export const TunnelAuthToken = Schema.String.pipe(
  Schema.minLength(1, { message: () => "authToken must not be empty" }),
  Schema.maxLength(4096, { message: () => "authToken is longer than 4096 characters" })
)

/** `POST /api/tunnels/quick` and `/token`. */
export const TunnelAction = Schema.Struct({
  action: Schema.Literal("enable", "disable"),
  authToken: Schema.optional(TunnelAuthToken)
}).annotations(strict)

export const MeshHostname = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i, { message: () => "hostname must be one DNS label (letters, digits, '-')" })
)
export const MeshPort = Schema.Int.pipe(Schema.between(1, 65535, { message: () => "port must be an integer from 1 to 65535" }))

/** Given to sudo on stdin for one call only; never logged, never stored. */
export const SudoPassword = Schema.String.pipe(
  Schema.minLength(1, { message: () => "sudoPassword must not be empty (leave it out when no password is needed)" }),
  Schema.maxLength(1024, { message: () => "sudoPassword is longer than 1024 characters" }),
  Schema.filter((s) => !/[\r\n\0]/.test(s), { message: () => "sudoPassword must be one line" })
)

/** `POST /api/tunnels/mesh/enable`: `port` is the local port the funnel forwards to (default the gateway's). */
export const MeshEnable = Schema.Struct({
  sudoPassword: Schema.optional(SudoPassword),
  hostname: Schema.optional(MeshHostname),
  port: Schema.optional(MeshPort)
}).annotations(strict)
/** `install`, `start-daemon`, `disable`. */
export const MeshPrivileged = Schema.Struct({ sudoPassword: Schema.optional(SudoPassword) }).annotations(strict)
/** `login`. */
export const MeshLogin = Schema.Struct({ hostname: Schema.optional(MeshHostname) }).annotations(strict)
export const MeshLoginResult = Schema.Struct({ authUrl: Schema.NullOr(Schema.String), error: Schema.optional(Schema.String) })
/** `start-daemon` (and the `done` event of `install`): a system command's outcome, its failure as one sanitized sentence. */
export const MeshCommandResult = Schema.Struct({ ok: Schema.Boolean, error: Schema.optional(Schema.String) })

/** `GET /api/tunnels/mesh/check`. */
export const MeshCheckResult = Schema.Struct({
  installed: Schema.Boolean,
  version: Schema.NullOr(Schema.String),
  daemonRunning: Schema.Boolean,
  loggedIn: Schema.Boolean,
  backendState: Schema.NullOr(Schema.String),
  hostname: Schema.NullOr(Schema.String),
  dnsName: Schema.NullOr(Schema.String),
  funnels: Schema.Array(Schema.Struct({ url: Schema.String, proxy: Schema.NullOr(Schema.String) })),
  problem: Schema.NullOr(Schema.String)
})
