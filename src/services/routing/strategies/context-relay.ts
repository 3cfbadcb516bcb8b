import type { Strategy } from "../types.js"
import { rotate } from "./common.js"

/**
 * `context-relay`: a session stays on its current leg (`relayLeg(scope, sessionId)`); the
 * targets after it in the combo follow cyclically, so when the leg is exhausted the next target
 * takes the conversation over. Without a session, or when the leg is not among the candidates,
 * the given order. The dispatcher moves the leg after a success.
 */
export const contextRelay: Strategy = {
  name: "context-relay",
  order: (candidates, ctx) => {
    const session = ctx.request.sessionId
    if (session === undefined || session === "") return candidates.slice()
    const leg = ctx.state.relayLeg(ctx.scope, session)
    const i = leg === undefined ? -1 : candidates.findIndex((c) => c.key === leg)
    return i < 0 ? candidates.slice() : rotate(candidates, i)
  }
}
