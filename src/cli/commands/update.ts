import * as Command from "@effect/cli/Command"
import { lazy } from "../handler.js"
import { json } from "../options.js"

export const updateOptions = { json }

/** `gateway update`: is a newer version on the registry? Says how to update; never replaces itself. */
export const updateCommand = Command.make(
  "update",
  updateOptions,
  lazy(
    () => import("./update.impl.js"),
    (m) => m.update
  )
).pipe(
  Command.withDescription(
    "Check the npm registry (GATEWAY_UPDATE_REGISTRY, npm_config_registry, default registry.npmjs.org) for a newer version and print how to install it; installs nothing. Exit 0 when this is the latest, 1 when a newer one exists or the registry cannot be read."
  )
)
