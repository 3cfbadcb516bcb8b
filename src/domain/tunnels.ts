import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/**
 * Tunnels (spec document 2, "Tunnel API"; docs/tunnels.md): three backends, each with a status
 * object. The management API serves the quick tunnel; the token tunnel and the mesh funnel
 * answer 501 until built. The CLI's `gateway tunnel` speaks the whole contract already.
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

export const TunnelAuthToken = Schema.String.pipe(Schema.minLength(1, { message: () => "authToken must not be empty" }))

/** `POST /api/tunnels/quick` and `/token`. */
export const TunnelAction = Schema.Struct({
  action: Schema.Literal("enable", "disable"),
  authToken: Schema.optional(TunnelAuthToken)
}).annotations(strict)

export const MeshHostname = Schema.String.pipe(Schema.pattern(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i, { message: () => "hostname must be one DNS label (letters, digits, '-')" }))
export const MeshPort = Schema.Int.pipe(Schema.between(1, 65535, { message: () => "port must be an integer from 1 to 65535" }))

/** `POST /api/tunnels/mesh/enable`. */
export const MeshEnable = Schema.Struct({ hostname: Schema.optional(MeshHostname), port: Schema.optional(MeshPort) }).annotations(strict)
