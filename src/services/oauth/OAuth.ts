import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { PROVIDERS } from "../../domain/catalog/catalog.js"
import { type BadGateway, BadRequest, type Conflict, NotFound } from "../../domain/errors.js"
import type {
  CompleteAuthorize,
  OAuthConnected,
  OAuthStatus,
  PollDevice,
  PollResult,
  StartAuthorize,
  StartDevice
} from "../../domain/oauth.js"
import { backgroundJob } from "../../platform/flags/background.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { toIso } from "../../platform/store/Db.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { Egress } from "../../upstream/egress/Egress.js"
import { type Connection, Connections } from "../../upstream/providers/Connections.js"
import { ENV_SUFFIXES, envPrefix } from "../../upstream/providers/oauthWire.js"
import { Cooldowns } from "../resilience/Cooldowns.js"
import { makeFlows } from "./flows.js"
import { makeGrants, providerOf } from "./grants.js"
import { makeRefresh, type OAuthRefreshFailed } from "./refresh.js"
import { makeTokenEndpoint } from "./tokenEndpoint.js"

export { OAuthRefreshFailed } from "./refresh.js"

export interface OAuthShape {
  readonly startAuthorize: (
    provider: string,
    input: StartAuthorize,
    callbackBase: string
  ) => Effect.Effect<
    { provider: string; flow: "pkce"; authorizeUrl: string; state: string; redirectUri: string; expiresAt: string },
    BadRequest | NotFound
  >
  /** The code of an authorization, exchanged at the token endpoint: a connection created or re-authorized. */
  readonly complete: (
    provider: string,
    input: CompleteAuthorize,
    actor: string
  ) => Effect.Effect<OAuthConnected, BadRequest | NotFound | BadGateway | Conflict>
  readonly startDevice: (
    provider: string,
    input: StartDevice
  ) => Effect.Effect<
    {
      provider: string
      flow: "device"
      state: string
      userCode: string
      verificationUri: string
      verificationUriComplete: string | null
      interval: number
      expiresAt: string
    },
    BadRequest | NotFound | BadGateway
  >
  readonly poll: (
    provider: string,
    input: PollDevice,
    actor: string
  ) => Effect.Effect<PollResult, BadRequest | NotFound | BadGateway | Conflict>
  /** Refreshes now (single-flight per connection). */
  readonly refresh: (connectionId: string) => Effect.Effect<Connection, OAuthRefreshFailed>
  /** The request path: the connection with a token good for at least `SKEW_MS`, refreshed first when needed. */
  readonly fresh: (connection: Connection) => Effect.Effect<Connection, OAuthRefreshFailed>
  /**
   * The request path, after the upstream refused `connection`'s token (401): the connection with
   * another token. The current one when a concurrent request refreshed it since `connection` was
   * read, else a refresh now (single-flight: the requests refused together share it).
   */
  readonly renew: (connection: Connection) => Effect.Effect<Connection, OAuthRefreshFailed>
  readonly status: (provider: string) => Effect.Effect<OAuthStatus, NotFound>
  /** Forgets the grant and removes the connection. */
  readonly revoke: (provider: string, connection: string | undefined, actor: string) => Effect.Effect<Connection, BadRequest | NotFound>
  /** Which of the provider's OAuth connections `connection` names (the only one when absent). */
  readonly pick: (provider: string, connection: string | undefined) => Effect.Effect<Connection, BadRequest | NotFound>
  /** Refreshes every OAuth connection whose token expires within the lead time (the scheduled job). */
  readonly sweep: Effect.Effect<void>
}

const OAuthConfig = Config.all({
  /** Refresh when the token expires within this (default 5 minutes). */
  leadSeconds: Config.number("GATEWAY_OAUTH_REFRESH_LEAD_SECONDS").pipe(Config.withDefault(300)),
  /** How often the scheduled job looks (default every minute, jittered). 0 turns it off. */
  checkSeconds: Config.number("GATEWAY_OAUTH_REFRESH_CHECK_SECONDS").pipe(Config.withDefault(60)),
  /** What a device flow's `slow_down` adds to the interval (RFC 8628: 5 s). */
  slowDownMs: Config.number("GATEWAY_OAUTH_SLOW_DOWN_MS").pipe(Config.withDefault(5000)),
  /** First retry delay of a transient token-endpoint failure (then doubled, jittered, 3 retries). */
  retryBaseMs: Config.number("GATEWAY_OAUTH_RETRY_BASE_MS").pipe(Config.withDefault(500))
})

/**
 * OAuth connections (docs/operations.md, "OAuth connections"): the authorization-code flow with
 * PKCE and the device flow against the provider's token endpoint, the grant kept encrypted
 * (`oauth_tokens`; the access token is the connection's credential), single-flight refreshes
 * (ahead of expiry on a Schedule, and on the request path when a token is about to expire), and
 * the terminal `expired` state when the grant is refused for good.
 */
export class OAuth extends Context.Tag("gateway/OAuth")<OAuth, OAuthShape>() {
  static readonly layer = Layer.scoped(
    OAuth,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const connections = yield* Connections
      const http = yield* UpstreamHttp
      const egress = yield* Egress
      const cooldowns = yield* Cooldowns
      const config = yield* Effect.orDie(OAuthConfig)
      const env = new Map<string, Record<string, string>>()
      for (const p of PROVIDERS) {
        if (!p.oauth) continue
        const values: Record<string, string> = {}
        for (const suffix of ENV_SUFFIXES) {
          const v = yield* Config.option(Config.string(envPrefix(p.id) + suffix)).pipe(Effect.orDie)
          if (Option.isSome(v) && v.value.trim() !== "") values[suffix] = v.value.trim()
        }
        env.set(p.id, values)
      }
      const shared = yield* SharedState.orLocal
      const retrySchedule = Schedule.exponential(Duration.millis(config.retryBaseMs)).pipe(
        Schedule.jittered,
        Schedule.intersect(Schedule.recurs(3))
      )
      const { post, postRetried } = makeTokenEndpoint(http, egress, retrySchedule)
      const grants = makeGrants({ sql, secrets, connections, cooldowns, env })
      const { startAuthorize, complete, startDevice, poll } = makeFlows({
        shared,
        connections,
        http,
        egress,
        grants,
        post,
        slowDownMs: config.slowDownMs
      })
      const { refresh, fresh, renew } = makeRefresh({ sql, secrets, connections, cooldowns, grants, postRetried })

      const oauthConnections = (providerId: string) =>
        Effect.map(connections.list, (all) => all.filter((c) => c.provider.id === providerId))

      const pick: OAuthShape["pick"] = (id, name) =>
        Effect.gen(function* () {
          const { provider } = yield* providerOf(id)
          if (name) {
            const c = yield* connections.get(name)
            if (c.provider.id !== provider.id)
              return yield* new BadRequest({ message: `connection: '${c.name}' is a ${c.provider.id} connection, not ${provider.id}` })
            return c
          }
          const list = yield* oauthConnections(provider.id)
          if (list.length === 1) return list[0]!
          if (list.length === 0) return yield* new NotFound({ message: `no ${provider.id} connection yet: authorize one first` })
          return yield* new BadRequest({
            message: `connection is required: ${provider.id} has ${list.length} connections (${list.map((c) => c.name).join(", ")})`
          })
        })

      const status: OAuthShape["status"] = (id) =>
        Effect.gen(function* () {
          const { provider, spec } = yield* providerOf(id)
          const list = yield* oauthConnections(provider.id)
          const rows = yield* sql<{
            connection_id: string
            refresh_error: string | null
          }>`SELECT connection_id, refresh_error FROM oauth_tokens WHERE provider = ${provider.id}`.pipe(Effect.orDie)
          const errors = new Map(rows.map((r) => [r.connection_id, r.refresh_error]))
          const now = Date.now()
          return {
            provider: provider.id,
            flows: spec.flows,
            connections: list.map((c) => {
              const o = c.oauth
              const expired = cooldowns.availability(c.id, now).state === "expired"
              const state = expired
                ? ("expired" as const)
                : !o || c.apiKey === null
                  ? ("unauthorized" as const)
                  : o.expiresAt !== null && o.expiresAt - now < config.leadSeconds * 1000
                    ? ("expiring" as const)
                    : ("active" as const)
              return {
                id: c.id,
                name: c.name,
                state,
                email: o?.email ?? null,
                accountId: o?.accountId ?? null,
                expiresAt: toIso(o?.expiresAt ?? null),
                refreshedAt: toIso(o?.refreshedAt ?? null),
                hasRefreshToken: o?.hasRefreshToken ?? false,
                lastRefreshError: errors.get(c.id) ?? null
              }
            })
          }
        })

      const revoke: OAuthShape["revoke"] = (id, name, actor) =>
        Effect.gen(function* () {
          const c = yield* pick(id, name)
          yield* sql`DELETE FROM oauth_tokens WHERE connection_id = ${c.id}`.pipe(Effect.orDie)
          const removed = yield* connections.remove(c.id, actor)
          yield* cooldowns.forget(c.id)
          yield* Effect.logInfo(`oauth: ${c.provider.id} connection ${c.name} disconnected`)
          return removed
        })

      const sweep: Effect.Effect<void> = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const due = (yield* connections.list).filter(
          (c) =>
            c.enabled &&
            c.oauth?.hasRefreshToken &&
            c.oauth.expiresAt !== null &&
            c.oauth.expiresAt - now < config.leadSeconds * 1000 &&
            cooldowns.availability(c.id, now).state !== "expired"
        )
        yield* Effect.forEach(due, (c) => Effect.ignore(refresh(c.id)), { concurrency: 2, discard: true })
      })

      if (config.checkSeconds > 0 && (yield* backgroundJob("oauth refresh schedule"))) {
        yield* Effect.forkScoped(
          sweep.pipe(
            Effect.catchAllCause((cause) => Effect.logWarning("oauth refresh sweep failed", cause)),
            Effect.repeat(Schedule.spaced(Duration.millis(config.checkSeconds * 1000)).pipe(Schedule.jittered))
          )
        )
      }

      return { startAuthorize, complete, startDevice, poll, refresh, fresh, renew, status, revoke, pick, sweep }
    })
  )
}
