import * as Command from "@effect/cli/Command"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"

const impl = () => import("./status.impl.js")

export const statusOptions = { ...remoteOptions, json }
export const healthOptions = statusOptions

export const statusCommand = Command.make(
  "status",
  statusOptions,
  lazy(impl, (m) => m.status)
).pipe(
  Command.withDescription(
    "Is the server running? Version, uptime, and with an admin key its providers and keys. Exit 1 when no server answers."
  )
)

export const healthCommand = Command.make(
  "health",
  healthOptions,
  lazy(impl, (m) => m.health)
).pipe(Command.withDescription("The running server's health (ping and provider summary); exits 1 when it is down."))
