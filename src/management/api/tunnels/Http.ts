import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { BadRequest } from "../../../domain/errors.js"
import { Tunnels } from "../../../services/tunnels/Tunnels.js"
import { ManagementApi } from "../Api.js"

/** Tunnels (docs/tunnels.md). */
export const TunnelsLive = HttpApiBuilder.group(ManagementApi, "tunnels", (handlers) =>
  Effect.map(Tunnels, (tunnels) =>
    handlers
      .handle("quickStatus", () => tunnels.quickStatus)
      .handle("quick", ({ payload }) =>
        payload.authToken !== undefined
          ? Effect.fail(new BadRequest({ message: "authToken is for the token tunnel (POST /api/tunnels/token); the quick tunnel needs none" }))
          : tunnels.quick(payload.action)
      )
  )
)
