/**
 * A sign-in to a remote MCP server (docs/mcp.md, "Signing in to a remote server (OAuth)"): begun by
 * an admin (discovery, registration, PKCE through the SDK's `auth()`; the verifier kept under the
 * sign-in's one-time state in the shared keys, so the callback may reach another process), finished
 * by the authorization server's redirect (the code exchanged), or undone (the tokens forgotten).
 */
import * as Effect from "effect/Effect"
import type { McpOAuthCallbackQuery, McpOAuthSignedIn, McpOAuthStarted, McpServerRecord } from "../../domain/mcpServers.js"
import type { SharedStateShape } from "../../platform/state/SharedState.js"
import { toIso } from "../../platform/store/Db.js"
import { randomToken } from "../../upstream/providers/oauthWire.js"
import { type GrantStore, secretsOf } from "./mcpOAuthGrants.js"
import { type McpOAuthEvent, McpOAuthRefused } from "./McpOAuthRefused.js"
import type { McpServersShape } from "./McpServers.js"
import { loadOAuthClient } from "./oauthProvider.js"

/** How long a begun sign-in waits for its callback. */
const FLOW_TTL_MS = 10 * 60_000

/** A sign-in in progress, as kept in the shared keys. */
interface Pending {
  readonly serverId: string
  readonly server: string
  readonly verifier: string
  readonly redirectUri: string
  readonly expiresAt: number
}

const flowKey = (state: string) => `mcp-oauth-flow:${state}`
const refused = (message: string) => new McpOAuthRefused({ status: 400, message })

export const makeSignIn = (deps: {
  readonly servers: McpServersShape
  readonly shared: SharedStateShape
  readonly store: GrantStore
  readonly emit: (event: McpOAuthEvent) => void
}) => {
  const { servers, shared, store, emit } = deps

  /** The server by name, the registry read first if the store changed. */
  const find = (name: string) =>
    Effect.flatMap(servers.refresh, () => {
      const r = servers.byName(name)
      return r === undefined
        ? Effect.fail(new McpOAuthRefused({ status: 404, message: `no MCP server named '${name}'` }))
        : Effect.succeed(r)
    })

  const start = (name: string, callbackBase: string): Effect.Effect<McpOAuthStarted, McpOAuthRefused> =>
    Effect.gen(function* () {
      const r = yield* find(name)
      if (r.transport === "stdio" || r.url === null)
        return yield* refused(`${name}: a stdio server takes no sign-in (the MCP authorization spec: it gets its credentials from its env)`)
      yield* Effect.ignore(store.refresh)
      const redirectUri = `${callbackBase.replace(/\/+$/, "")}/api/mcp/oauth/callback`
      // A client registered for another redirect URI (the gateway's address changed) registers again.
      const registered = store.grantOf(r)?.client
      if (registered && "redirect_uris" in registered && !registered.redirect_uris.map(String).includes(redirectUri))
        yield* store.save(r, () => ({ client: null }))
      const state = randomToken(24)
      const client = yield* Effect.promise(loadOAuthClient)
      const url = r.url
      const begun = yield* Effect.tryPromise({
        try: () =>
          client.beginSignIn({
            serverUrl: url,
            transport: r.transport,
            headers: r.headers,
            redirectUri,
            state,
            configured: r.oauth,
            grant: store.accessOf(r)
          }),
        catch: (e) => {
          const why = client.describe(e, secretsOf(r, store.grantOf(r)))
          return /dynamic client registration/i.test(why)
            ? refused(
                `${name}: ${why}; configure the client registered with it (oauth.clientId, and oauth.clientSecret for a confidential client)`
              )
            : new McpOAuthRefused({ status: 502, message: `${name}: the sign-in could not begin: ${why}` })
        }
      })
      const expiresAt = Date.now() + FLOW_TTL_MS
      const pending: Pending = { serverId: r.id, server: r.name, verifier: begun.verifier, redirectUri, expiresAt }
      yield* shared.keys.claim(flowKey(state), JSON.stringify(pending), FLOW_TTL_MS)
      yield* Effect.logInfo(`MCP server ${name}: sign-in begun`)
      return { server: r.name, authorizationUrl: begun.authorizationUrl, redirectUri, expiresAt: toIso(expiresAt)! }
    }).pipe(Effect.withSpan("McpOAuth.start", { attributes: { server: name } }))

  /** The pending sign-in a state names, taken (one use: the same redirect again is refused). */
  const take = (state: string | undefined) =>
    Effect.gen(function* () {
      if (!state) return yield* refused("state: missing (the authorization server's redirect carries the sign-in's state)")
      const text = yield* shared.keys.get(flowKey(state))
      const pending = text === undefined ? undefined : (JSON.parse(text) as Pending)
      if (text === undefined || pending === undefined || pending.expiresAt < Date.now())
        return yield* refused(
          "state: no MCP sign-in is waiting under this state (unknown, used or expired): start again with `gateway mcp servers login <name>` or the dashboard"
        )
      yield* shared.keys.release(flowKey(state), text)
      return pending
    })

  /** Where the sign-in was begun: the server it is for, still registered, and the redirect checked (RFC 9207's `iss`). */
  const serverOf = (pending: Pending, query: McpOAuthCallbackQuery) =>
    Effect.gen(function* () {
      yield* servers.refresh
      const r = servers.all().find((s) => s.id === pending.serverId)
      if (r === undefined || r.url === null)
        return yield* new McpOAuthRefused({ status: 404, message: `MCP server '${pending.server}' was removed during its sign-in` })
      const issuer = store.grantOf(r)?.discovery?.authorizationServerMetadata?.issuer
      if (query.iss !== undefined && issuer !== undefined && query.iss.replace(/\/$/, "") !== issuer.replace(/\/$/, ""))
        return yield* refused(`iss: the redirect names ${query.iss}, not ${issuer}`)
      return { r, url: r.url }
    })

  const complete = (query: McpOAuthCallbackQuery): Effect.Effect<McpOAuthSignedIn, McpOAuthRefused> =>
    Effect.gen(function* () {
      const pending = yield* take(query.state)
      if (query.error)
        return yield* refused(
          `${pending.server}: the authorization server refused the sign-in: ${query.error}${query.error_description ? ` (${query.error_description})` : ""}`
        )
      const code = query.code
      if (!code) return yield* refused("code: missing from the authorization server's redirect")
      const { r, url } = yield* serverOf(pending, query)
      const client = yield* Effect.promise(loadOAuthClient)
      yield* store.save(r, () => ({ redirectUri: pending.redirectUri }))
      yield* Effect.tryPromise({
        try: () =>
          client.finishSignIn({
            serverUrl: url,
            redirectUri: pending.redirectUri,
            verifier: pending.verifier,
            code,
            configured: r.oauth,
            grant: store.accessOf(r)
          }),
        catch: (e) =>
          new McpOAuthRefused({
            status: client.refusedForGood(e) ? 400 : 502,
            message: `${r.name}: the authorization server did not exchange the code: ${client.describe(e, [...secretsOf(r, store.grantOf(r)), code, pending.verifier])}`
          })
      })
      yield* Effect.logInfo(`MCP server ${r.name}: signed in`)
      emit({ kind: "signed-in", server: r.name })
      return { server: r.name, signedIn: true as const, expiresAt: toIso(store.grantOf(r)?.expiresAt ?? null) }
    }).pipe(Effect.withSpan("McpOAuth.complete"))

  const logout = (name: string): Effect.Effect<void, McpOAuthRefused> =>
    Effect.gen(function* () {
      const r: McpServerRecord = yield* find(name)
      yield* Effect.ignore(store.refresh)
      if (store.grantOf(r) !== undefined)
        yield* store.save(r, () => ({ tokens: null, expiresAt: null, obtainedAt: null, refreshError: null }))
      yield* Effect.logInfo(`MCP server ${name}: signed out`)
      emit({ kind: "signed-out", server: name })
    })

  return { start, complete, logout }
}
