import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { VERSION } from "../../version.js"
import { ManagementApi } from "../Api.js"

const startedAt = Date.now()

/** `GET /api/health/ping`: liveness, version and uptime, without authentication. */
export const HealthLive = HttpApiBuilder.group(ManagementApi, "health", (handlers) =>
  handlers.handle("ping", () =>
    Effect.succeed({
      ok: true,
      version: VERSION,
      uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
      time: new Date().toISOString()
    })
  )
)
