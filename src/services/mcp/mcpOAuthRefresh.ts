/**
 * Tokens refreshed ahead of their expiry (docs/mcp.md, "Signing in to a remote server (OAuth)"):
 * a sweep over the registry's http and sse servers refreshes each token due (10% of its lifetime
 * before it expires, at least a minute, at most half of it) and says how long until the next one.
 * A refusal for good (invalid_grant) loses the sign-in (needs-auth with the reason); a transient
 * failure is tried again every 5 s, and loses it only once the token has expired.
 */
import * as Effect from "effect/Effect"
import type { McpServerRecord } from "../../domain/mcpServers.js"
import type { SharedStateShape } from "../../platform/state/SharedState.js"
import { randomToken } from "../../upstream/providers/oauthWire.js"
import { type Grant, type GrantStore, redirectUriOf, refreshDueAt, secretsOf } from "./mcpOAuthGrants.js"
import { type McpOAuthEvent, signInHint } from "./McpOAuthRefused.js"
import type { McpServersShape } from "./McpServers.js"
import { loadOAuthClient } from "./oauthProvider.js"

/** The sweep says at most this long until the next (a grant another process made is seen by then). */
export const MAX_SLEEP_MS = 30_000
/** How long a failed refresh waits before the next try (while the token is still good). */
const RETRY_MS = 5_000

export const makeRefresh = (deps: {
  readonly servers: McpServersShape
  readonly shared: SharedStateShape
  readonly store: GrantStore
  readonly emit: (event: McpOAuthEvent) => void
}) => {
  const { servers, shared, store, emit } = deps
  /** Servers whose token expired while it could not be refreshed (needs-auth until a refresh works). */
  const lost = new Set<string>()
  const failedAt = new Map<string, number>()

  /** One refresh of `r`'s token (`g` as the sweep read it). */
  const refreshOne = (r: McpServerRecord, g: Grant) =>
    Effect.gen(function* () {
      // Another process (when the shared keys reach it) may be refreshing it: one at a time.
      const owner = randomToken(8)
      const claimed = yield* shared.keys.claim(`mcp-oauth-refresh:${r.id}`, owner, 30_000)
      if (claimed === false) return
      const client = yield* Effect.promise(loadOAuthClient)
      const url = r.url as string
      const result = yield* Effect.either(
        Effect.tryPromise({
          try: () => client.refreshGrant({ serverUrl: url, redirectUri: redirectUriOf(g), configured: r.oauth, grant: store.accessOf(r) }),
          catch: (e) => ({ why: client.describe(e, secretsOf(r, g)), forGood: client.refusedForGood(e) })
        })
      )
      yield* shared.keys.release(`mcp-oauth-refresh:${r.id}`, owner)
      if (result._tag === "Right") {
        yield* Effect.logDebug(`MCP server ${r.name}: token refreshed`)
        // A sign-in lost while the authorization server could not be reached is back: connect again.
        if (lost.delete(r.id)) emit({ kind: "signed-in", server: r.name })
        return
      }
      const { why, forGood } = result.left
      // Refused because a connection's own refresh (its 401) rotated the refresh token meanwhile: nothing lost.
      if (store.grantOf(r)?.tokens?.refresh_token !== g.tokens?.refresh_token) return
      const expired = g.expiresAt !== null && g.expiresAt <= Date.now()
      yield* store.save(r, () => ({ refreshError: why }))
      if (!forGood && (!expired || lost.has(r.id)))
        return yield* Effect.logWarning(`MCP server ${r.name}: token refresh failed (${why}); will retry`)
      // Refused for good: the tokens are forgotten. Expired meanwhile: kept, and tried again (a refresh that works connects again).
      if (forGood) yield* store.save(r, () => ({ tokens: null, expiresAt: null, obtainedAt: null }))
      else lost.add(r.id)
      emit({
        kind: "needs-auth",
        server: r.name,
        reason: `the sign-in expired: its token could not be refreshed (${why}); ${signInHint(r.name)}`
      })
    })

  /** Every token due refreshed; the milliseconds until the next one is due (at least 50, at most MAX_SLEEP_MS). */
  const sweep: Effect.Effect<number> = Effect.gen(function* () {
    yield* Effect.ignore(store.refresh)
    let next = MAX_SLEEP_MS
    for (const r of servers.all()) {
      if (!r.enabled || r.transport === "stdio" || r.url === null) continue
      const g = store.grantOf(r)
      const due = g === undefined ? undefined : refreshDueAt(g)
      if (g === undefined || due === undefined) continue
      const at = Math.max(due, (failedAt.get(r.id) ?? 0) + RETRY_MS)
      const now = Date.now()
      if (at > now) {
        next = Math.min(next, at - now)
        continue
      }
      yield* refreshOne(r, g)
      if (store.grantOf(r)?.refreshError != null) failedAt.set(r.id, Date.now())
      else failedAt.delete(r.id)
      next = Math.min(next, RETRY_MS)
    }
    return Math.max(50, next)
  }).pipe(Effect.withSpan("McpOAuth.sweep"))

  return { sweep }
}
