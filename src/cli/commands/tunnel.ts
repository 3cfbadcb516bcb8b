import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { MeshHostname, MeshPort, TUNNEL_KINDS, TunnelAuthToken, TunnelKind } from "../../domain/tunnels.js"
import * as Schema from "effect/Schema"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { intFromText, schemaArg, schemaOption } from "../schema.js"

const impl = () => import("./tunnel.impl.js")
const WaitSeconds = Schema.Int.pipe(Schema.between(0, 600, { message: () => "wait must be 0 to 600 seconds" }))
const kind = schemaArg("kind", TunnelKind)

export const listOptions = { ...remoteOptions, json }
export const createOptions = {
  ...remoteOptions,
  kind: kind.pipe(Args.withDefault("quick" as const)),
  authToken: schemaOption("auth-token", TunnelAuthToken).pipe(
    Options.withDescription("token tunnel: its authtoken (else TOKEN_TUNNEL_AUTHTOKEN on the server)."),
    Options.optional
  ),
  hostname: schemaOption("hostname", MeshHostname).pipe(
    Options.withDescription("mesh: the machine name on the mesh network."),
    Options.optional
  ),
  port: schemaOption("port", intFromText(MeshPort)).pipe(
    Options.withDescription("mesh: the local port to expose (default the gateway's)."),
    Options.optional
  ),
  sudoPasswordStdin: Options.boolean("sudo-password-stdin").pipe(
    Options.withDescription("mesh: read the sudo password from stdin (one line); the server passes it to sudo for this call only.")
  ),
  wait: schemaOption("wait", intFromText(WaitSeconds)).pipe(
    Options.withDescription("Seconds to wait for the tunnel to be registered (its address is shown only then); 0 answers at once."),
    Options.withDefault(30)
  ),
  json
}
export const stopOptions = {
  ...remoteOptions,
  kind,
  sudoPasswordStdin: Options.boolean("sudo-password-stdin").pipe(
    Options.withDescription("mesh: read the sudo password from stdin (one line).")
  ),
  json
}

const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription(`Status of each tunnel backend (${TUNNEL_KINDS.join(", ")}).`))
const create = Command.make(
  "create",
  createOptions,
  lazy(impl, (m) => m.create)
).pipe(
  Command.withDescription(
    "Start a tunnel that exposes the running gateway publicly: quick (ephemeral address), token (needs an authtoken) or mesh (mesh VPN funnel)."
  )
)
const stop = Command.make(
  "stop",
  stopOptions,
  lazy(impl, (m) => m.stop)
).pipe(Command.withDescription("Stop a tunnel."))

/** `gateway tunnel list|create|stop`: thin over the management tunnel API (`/api/tunnels/*`). */
export const tunnelCommand = Command.make("tunnel").pipe(
  Command.withDescription("Tunnels of the running server (management tunnel API): quick, token and mesh."),
  Command.withSubcommands([list, create, stop])
)
