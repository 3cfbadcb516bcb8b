import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { NotFound } from "../../../domain/errors.js"
import type { SessionView } from "../../../domain/sessions.js"
import { RoutingMemory, type StickySession } from "../../../services/routing/RoutingMemory.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

const view = (s: StickySession): SessionView => {
  const cut = s.key.indexOf("/")
  return {
    id: s.session,
    scope: s.scope,
    key: s.apiKeyId,
    connection: cut < 0 ? s.key : s.key.slice(0, cut),
    model: cut < 0 ? "" : s.key.slice(cut + 1),
    target: s.key,
    firstSeen: new Date(s.firstSeen).toISOString(),
    lastSeen: new Date(s.lastSeen).toISOString(),
    requests: s.requests
  }
}

/** `GET /api/sessions`, `DELETE /api/sessions/{id}` (docs/operations.md, "Sessions and system"). */
export const layer = HttpApiBuilder.group(ManagementApi, "sessions", (handlers) =>
  Effect.gen(function* () {
    const memory = yield* RoutingMemory
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const all = memory.stickySessions(now).filter((s) => urlParams.apiKeyId === undefined || s.apiKeyId === urlParams.apiKeyId)
          return { sessions: all.slice(0, urlParams.limit ?? 100).map(view), total: all.length }
        })
      )
      .handle("unpin", ({ path }) =>
        Effect.gen(function* () {
          const scopes = memory.unpin(path.id)
          if (scopes === 0) return yield* new NotFound({ message: `no sticky session '${path.id}'` })
          yield* Effect.logInfo(`session ${path.id} unpinned by ${yield* actor}`)
          return { unpinned: path.id, scopes }
        })
      )
  })
)
