import type { ConnectionView } from "../../domain/connections.js"
import type { CooldownsShape } from "../../services/resilience/Cooldowns.js"
import { toIso } from "../../platform/store/Db.js"
import { type Connection, connectionView } from "./Connections.js"

/**
 * A stored connection as listings show it: its view (keys masked) with the live cooldown state
 * the request path keeps in memory. `GET /api/providers` and the MCP providers tools answer this.
 */
export const liveConnectionView = (cooldowns: CooldownsShape, c: Connection, now = Date.now()): ConnectionView => {
  const view = connectionView(c)
  const h = cooldowns.healthAt(c.id, now)
  if (h.testStatus === null && h.lastError === null && h.backoffLevel === 0) return view
  return {
    ...view,
    testStatus: h.testStatus ?? view.testStatus,
    rateLimitedUntil: toIso(h.rateLimitedUntil),
    lastError: h.lastError,
    lastErrorType: h.lastErrorType,
    errorCode: h.errorCode,
    backoffLevel: h.backoffLevel
  }
}
