import type * as SqlClient from "@effect/sql/SqlClient"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { EndpointOverrides } from "../../domain/oauth.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import type { Connection, ConnectionsShape } from "../../upstream/providers/Connections.js"
import { type OAuthEndpoints, oauthOf } from "../../upstream/providers/oauthWire.js"
import type { CooldownsShape } from "../resilience/Cooldowns.js"
import { originOf } from "../resilience/types.js"
import type { Grants, TokenRow } from "./grants.js"
import { describeRefusal, type makeTokenEndpoint } from "./tokenEndpoint.js"

/** A refresh that did not give a usable token. `permanent`: the grant is gone (the connection is now `expired`). */
export class OAuthRefreshFailed extends Data.TaggedError("OAuthRefreshFailed")<{ readonly message: string; readonly permanent: boolean }> {}

/** A token this close to its expiry is refreshed before a request uses it. */
const SKEW_MS = 30_000

/**
 * Refreshing a grant: single-flight per connection (concurrent callers share one refresh, which
 * no caller's interruption cancels), a transient failure retried with backoff, a refused grant
 * the connection's terminal `expired` state.
 */
export const makeRefresh = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly connections: ConnectionsShape
  readonly cooldowns: CooldownsShape
  readonly grants: Grants
  readonly postRetried: ReturnType<typeof makeTokenEndpoint>["postRetried"]
}) => {
  const { sql, secrets, connections, cooldowns, grants, postRetried } = deps
  const inflight = new Map<string, Deferred.Deferred<Connection, OAuthRefreshFailed>>()

  /** Puts the connection in the terminal `expired` state (not routed until a new authorization). */
  const expire = (c: Connection, message: string) =>
    cooldowns
      .onFailure(
        { id: c.id, name: c.name, provider: { id: c.provider.id, authClass: c.provider.authClass, origin: originOf(c.effectiveBaseUrl) } },
        {
          scope: "connection",
          retryable: true,
          tripsBreaker: false,
          cooldown: false,
          terminal: "expired",
          quotaExhausted: false,
          reason: "oauth_expired"
        },
        { status: 401, kind: "http", code: "oauth_refresh_refused", message }
      )
      .pipe(Effect.zipRight(cooldowns.flush))

  const doRefresh = (id: string): Effect.Effect<Connection, OAuthRefreshFailed> =>
    Effect.gen(function* () {
      const c = yield* Effect.orElseFail(
        connections.get(id),
        () => new OAuthRefreshFailed({ message: `no connection ${id}`, permanent: true })
      )
      const spec = oauthOf(c.provider)
      if (!spec) return yield* new OAuthRefreshFailed({ message: `${c.name} is not an OAuth connection`, permanent: true })
      const row = (yield* sql<TokenRow>`SELECT * FROM oauth_tokens WHERE connection_id = ${c.id}`.pipe(Effect.orDie))[0]
      const refreshToken = row?.refresh_token_enc ? yield* Effect.option(secrets.decrypt(row.refresh_token_enc)) : Option.none()
      const recordError = (message: string) =>
        sql`UPDATE oauth_tokens SET refresh_error = ${message}, updated_at = ${Date.now()} WHERE connection_id = ${c.id}`.pipe(Effect.orDie)
      if (Option.isNone(refreshToken)) {
        const message = `${c.name}: no usable refresh token; authorize again`
        yield* recordError(message)
        yield* expire(c, message)
        return yield* new OAuthRefreshFailed({ message, permanent: true })
      }
      const overrides = row?.endpoints ? (JSON.parse(row.endpoints) as EndpointOverrides) : {}
      const e: OAuthEndpoints = grants.endpointsOf(c.provider, spec, overrides)
      const outcome = yield* postRetried(
        spec,
        e.tokenUrl,
        { grant_type: "refresh_token", refresh_token: Redacted.value(refreshToken.value), client_id: e.clientId },
        c
      )
      if (outcome._tag === "ok") {
        yield* grants.store(c.id, c.provider, row?.flow ?? "pkce", outcome.tokens, null, true)
        yield* Effect.logInfo(`oauth: ${c.name} token refreshed`)
        return yield* Effect.orDie(connections.get(c.id))
      }
      if (outcome._tag === "refused") {
        // invalid_grant (or any 4xx): the grant is gone for good.
        const message = `${c.name}: the token endpoint refused the refresh token (${describeRefusal(outcome)}); authorize again`
        yield* recordError(message)
        yield* expire(c, message)
        yield* Effect.logWarning(`oauth: ${message}`)
        return yield* new OAuthRefreshFailed({ message, permanent: true })
      }
      const message = `${c.name}: token refresh failed (${outcome.message}); will retry`
      yield* recordError(message)
      yield* Effect.logWarning(`oauth: ${message}`)
      return yield* new OAuthRefreshFailed({ message, permanent: false })
    })

  /** Single-flight: concurrent callers of one connection share one refresh, which no caller's interruption cancels. */
  const refresh = (id: string): Effect.Effect<Connection, OAuthRefreshFailed> =>
    Effect.suspend(() => {
      const running = inflight.get(id)
      if (running) return Deferred.await(running)
      const done = Deferred.unsafeMake<Connection, OAuthRefreshFailed>(FiberId.none)
      inflight.set(id, done)
      return Effect.zipRight(
        Effect.forkDaemon(
          Effect.ensuring(
            Deferred.complete(done, doRefresh(id)),
            Effect.sync(() => inflight.delete(id))
          )
        ),
        Deferred.await(done)
      )
    })

  const fresh = (c: Connection): Effect.Effect<Connection, OAuthRefreshFailed> => {
    const expiresAt = c.oauth?.expiresAt
    if (expiresAt === undefined || expiresAt === null || !c.oauth!.hasRefreshToken) return Effect.succeed(c)
    const now = Date.now()
    if (expiresAt - now > SKEW_MS) return Effect.succeed(c)
    // A transient failure while the token is still good: use it.
    return Effect.catchAll(refresh(c.id), (e) => (!e.permanent && expiresAt > Date.now() ? Effect.succeed(c) : Effect.fail(e)))
  }

  const renew = (c: Connection): Effect.Effect<Connection, OAuthRefreshFailed> =>
    Effect.flatMap(
      Effect.orElseSucceed(connections.get(c.id), () => c),
      (now) => {
        const sent = c.apiKey === null ? null : Redacted.value(c.apiKey)
        return now.apiKey !== null && Redacted.value(now.apiKey) !== sent ? Effect.succeed(now) : refresh(c.id)
      }
    )

  return { refresh, fresh, renew }
}
