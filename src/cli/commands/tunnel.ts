import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { MeshHostname, MeshPort, TUNNEL_KINDS, TunnelAuthToken, TunnelKind } from "../../domain/tunnels.js"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { intFromText, schemaArg, schemaOption } from "../schema.js"

const impl = () => import("./tunnel.impl.js")
const kind = schemaArg("kind", TunnelKind)

export const listOptions = { ...remoteOptions, json }
export const createOptions = {
  ...remoteOptions,
  kind: kind.pipe(Args.withDefault("quick" as const)),
  authToken: schemaOption("auth-token", TunnelAuthToken).pipe(
    Options.withDescription("token tunnel: its authtoken (else TOKEN_TUNNEL_AUTHTOKEN on the server)."),
    Options.optional
  ),
  hostname: schemaOption("hostname", MeshHostname).pipe(Options.withDescription("mesh: the machine name on the mesh network."), Options.optional),
  port: schemaOption("port", intFromText(MeshPort)).pipe(Options.withDescription("mesh: the local port to expose (default the gateway's)."), Options.optional),
  json
}
export const stopOptions = { ...remoteOptions, kind, json }

const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription(`Status of each tunnel backend (${TUNNEL_KINDS.join(", ")}).`))
const create = Command.make(
  "create",
  createOptions,
  lazy(impl, (m) => m.create)
).pipe(Command.withDescription("Start a tunnel that exposes the running gateway publicly: quick (ephemeral address), token (needs an authtoken) or mesh (mesh VPN funnel)."))
const stop = Command.make(
  "stop",
  stopOptions,
  lazy(impl, (m) => m.stop)
).pipe(Command.withDescription("Stop a tunnel."))

/** `gateway tunnel list|create|stop`: thin over the management tunnel API (`/api/tunnels/*`). */
export const tunnelCommand = Command.make("tunnel").pipe(
  Command.withDescription("Tunnels of the running server (management tunnel API); exit 1 while this build does not serve it."),
  Command.withSubcommands([list, create, stop])
)
