import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { VERSION } from "../../../kernel/version.js"
import { Tunnels } from "../../../services/tunnels/Tunnels.js"
import { ManagementApi } from "../Api.js"

// Which process answered: with `gateway --workers N`, the worker's number (1..N) too.
const worker = process.env.GATEWAY_WORKER_ID === undefined ? undefined : Number(process.env.GATEWAY_WORKER_ID)

/** `GET /api/health/ping`: liveness, version, uptime, the answering process (pid, worker) and whether a tunnel is open, without
 * authentication. */
export const layer = HttpApiBuilder.group(ManagementApi, "health", (handlers) =>
  Effect.map(Tunnels, (tunnels) =>
    handlers.handle("ping", () =>
      Effect.map(tunnels.open, (open) => ({
        ok: true,
        version: VERSION,
        // The process's: this module loads with the management plane, on its first request, not at start.
        uptimeSeconds: Math.round(process.uptime()),
        time: new Date().toISOString(),
        pid: process.pid,
        ...(worker === undefined ? {} : { worker }),
        tunnelOpen: open.length > 0
      }))
    )
  )
)
