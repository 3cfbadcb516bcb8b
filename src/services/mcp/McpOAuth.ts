/**
 * Signing in to remote MCP servers (docs/mcp.md, "Signing in to a remote server (OAuth)"; the MCP
 * authorization spec): sign-ins (mcpOAuthSignIn.ts), the grants kept sealed in `mcp_oauth`
 * (mcpOAuthGrants.ts), the connections' `OAuthClientProvider`s over them (oauthProvider.ts), and
 * the tokens refreshed ahead of their expiry (mcpOAuthRefresh.ts).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Runtime from "effect/Runtime"
import type {
  McpOAuthCallbackQuery,
  McpOAuthSignedIn,
  McpOAuthStarted,
  McpServerHealth,
  McpServerOAuthView,
  McpServerRecord
} from "../../domain/mcpServers.js"
import { maskSecret } from "../../kernel/redact.js"
import { backgroundJob } from "../../platform/flags/background.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { toIso } from "../../platform/store/Db.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import { type GrantStore, makeGrantStore, redirectUriOf } from "./mcpOAuthGrants.js"
import { MAX_SLEEP_MS, makeRefresh } from "./mcpOAuthRefresh.js"
import type { McpOAuthEvent, McpOAuthRefused } from "./McpOAuthRefused.js"
import { makeSignIn } from "./mcpOAuthSignIn.js"
import { McpServers } from "./McpServers.js"
import { makeProvider } from "./oauthProvider.js"

export { type McpOAuthEvent, McpOAuthRefused } from "./McpOAuthRefused.js"

export interface McpOAuthShape {
  /** The view's `oauth`: null for a server that did not ask for a sign-in and has no client configured. */
  readonly view: (r: McpServerRecord, health: McpServerHealth) => McpServerOAuthView | null
  /** Begins a sign-in: the address to open; the browser comes back to `<callbackBase>/api/mcp/oauth/callback`. */
  readonly start: (name: string, callbackBase: string) => Effect.Effect<McpOAuthStarted, McpOAuthRefused>
  /** The authorization server's redirect: the code exchanged, the tokens kept, the connection made again. */
  readonly complete: (query: McpOAuthCallbackQuery) => Effect.Effect<McpOAuthSignedIn, McpOAuthRefused>
  /** Forgets the server's tokens (its registered client stays); the connection is made again, and asks for a sign-in. */
  readonly logout: (name: string) => Effect.Effect<void, McpOAuthRefused>
  /** The provider a connection to `r` uses: undefined while the gateway holds no token for it. */
  readonly providerFor: (r: McpServerRecord) => OAuthClientProvider | undefined
  /** Refreshes every token due (ahead of its expiry); the milliseconds until the next one is due. */
  readonly sweep: Effect.Effect<number>
  readonly onEvent: (listener: (event: McpOAuthEvent) => void) => () => void
}

/** A server's OAuth state as listings show it: never a token, the client secret masked. */
const viewOf = (store: GrantStore, r: McpServerRecord, health: McpServerHealth): McpServerOAuthView | null => {
  if (r.transport === "stdio") return null
  const g = store.grantOf(r)
  const signedIn = g?.tokens?.access_token !== undefined
  if (g === undefined && r.oauth == null && health.state !== "needs-auth") return null
  return {
    signedIn,
    expiresAt: signedIn ? toIso(g?.expiresAt ?? null) : null,
    signedInAt: toIso(g?.signedInAt ?? null),
    lastError: g?.refreshError ?? null,
    clientId: r.oauth?.clientId ?? null,
    clientSecret: r.oauth?.clientSecret ? maskSecret(r.oauth.clientSecret) : null,
    scopes: r.oauth?.scopes ?? []
  }
}

export class McpOAuth extends Context.Tag("gateway/McpOAuth")<McpOAuth, McpOAuthShape>() {
  /**
   * The grants read into memory at build and again when the store says they changed; the refresh
   * schedule (unless GATEWAY_DISABLE_BACKGROUND_SERVICES) sleeps until the next token is due, at
   * most 30 s, and a new token wakes it.
   */
  static readonly layer = Layer.scoped(
    McpOAuth,
    Effect.gen(function* () {
      const servers = yield* McpServers
      const shared = yield* SharedState.orLocal
      const wake = yield* Queue.sliding<void>(1)
      const store = yield* makeGrantStore({
        sql: yield* SqlClient.SqlClient,
        secrets: yield* Secrets,
        version: yield* Effect.serviceOption(StoreVersion),
        run: Runtime.runPromise(yield* Effect.runtime<never>()),
        tokensChanged: Queue.offer(wake, undefined)
      })
      const listeners = new Set<(event: McpOAuthEvent) => void>()
      // The sign-in each server's connection last heard of (by server id): one completed in another process is heard of at the next sweep.
      const heard = new Map<string, number | null>()
      const signedInAt = (r: McpServerRecord) => store.grantOf(r)?.signedInAt ?? null
      const emit = (event: McpOAuthEvent) => {
        const r = event.kind === "signed-in" ? servers.byName(event.server) : undefined
        if (r !== undefined) heard.set(r.id, signedInAt(r))
        for (const f of [...listeners]) {
          try {
            f(event)
          } catch {
            // a listener's failure is its own
          }
        }
      }
      const signIn = makeSignIn({ servers, shared, store, emit })
      const refresh = makeRefresh({ servers, shared, store, emit })
      const sweep = Effect.tap(refresh.sweep, () =>
        Effect.sync(() => {
          for (const r of servers.all()) {
            const at = signedInAt(r)
            if (!heard.has(r.id)) heard.set(r.id, at)
            else if (at !== null && at !== heard.get(r.id)) emit({ kind: "signed-in", server: r.name })
          }
        })
      )

      if (yield* backgroundJob("MCP OAuth refresh schedule")) {
        yield* Effect.forkScoped(
          Effect.forever(
            sweep.pipe(
              Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("MCP OAuth refresh sweep failed", cause), MAX_SLEEP_MS)),
              Effect.flatMap((ms) => Effect.raceFirst(Effect.sleep(Duration.millis(ms)), Queue.take(wake)))
            )
          )
        )
      }

      return {
        view: (r, health) => viewOf(store, r, health),
        start: signIn.start,
        complete: signIn.complete,
        logout: signIn.logout,
        providerFor: (r) => {
          const g = r.transport === "stdio" ? undefined : store.grantOf(r)
          if (g?.tokens == null) return undefined
          return makeProvider({
            redirectUri: redirectUriOf(g),
            configured: r.oauth,
            grant: store.accessOf(r),
            mode: { kind: "connection" }
          })
        },
        sweep,
        onEvent: (listener) => {
          listeners.add(listener)
          return () => void listeners.delete(listener)
        }
      } satisfies McpOAuthShape
    })
  )
}
