import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { BadGateway, BadRequest, type Conflict, NotFound } from "../../domain/errors.js"
import type { CompleteAuthorize, EndpointOverrides, OAuthConnected, OAuthStatus, PollDevice, PollResult, StartAuthorize, StartDevice } from "../../domain/oauth.js"
import { tryJson } from "../../upstream/formats/common.js"
import { Cooldowns } from "../resilience/Cooldowns.js"
import { originOf } from "../resilience/types.js"
import { toIso } from "../../platform/store/Db.js"
import { upsert } from "../../platform/store/dialect.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { Egress } from "../../upstream/egress/Egress.js"
import { UpstreamHttp } from "../../upstream/client/UpstreamHttp.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { PROVIDERS, findProvider } from "../../domain/catalog/catalog.js"
import { type Connection, Connections, connectionView } from "../../upstream/providers/Connections.js"
import type { OAuthSpec, ProviderSpec } from "../../domain/catalog/modelSpec.js"
import {
  authorizeUrl,
  baseUrlOfResource,
  ENV_SUFFIXES,
  envPrefix,
  type OAuthEndpoints,
  oauthOf,
  pastedCode,
  pkcePair,
  randomToken,
  resolveEndpoints,
  tokenError,
  type TokenSet
} from "../../upstream/providers/oauthWire.js"
import { checkProviderUrl } from "../../upstream/providers/urlPolicy.js"
import { backgroundJob } from "../../platform/flags/background.js"
import { describeRefusal, makeTokenEndpoint } from "./tokenEndpoint.js"

/** A refresh that did not give a usable token. `permanent`: the grant is gone (the connection is now `expired`). */
export class OAuthRefreshFailed extends Data.TaggedError("OAuthRefreshFailed")<{ readonly message: string; readonly permanent: boolean }> {}

export interface OAuthShape {
  readonly startAuthorize: (
    provider: string,
    input: StartAuthorize,
    callbackBase: string
  ) => Effect.Effect<{ provider: string; flow: "pkce"; authorizeUrl: string; state: string; redirectUri: string; expiresAt: string }, BadRequest | NotFound>
  /** The code of an authorization, exchanged at the token endpoint: a connection created or re-authorized. */
  readonly complete: (provider: string, input: CompleteAuthorize, actor: string) => Effect.Effect<OAuthConnected, BadRequest | NotFound | BadGateway | Conflict>
  readonly startDevice: (
    provider: string,
    input: StartDevice
  ) => Effect.Effect<
    { provider: string; flow: "device"; state: string; userCode: string; verificationUri: string; verificationUriComplete: string | null; interval: number; expiresAt: string },
    BadRequest | NotFound | BadGateway
  >
  readonly poll: (provider: string, input: PollDevice, actor: string) => Effect.Effect<PollResult, BadRequest | NotFound | BadGateway | Conflict>
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

/** A token this close to its expiry is refreshed before a request uses it. */
const SKEW_MS = 30_000
/** How long a started flow (its state, verifier or device code) is kept. */
const FLOW_TTL_MS = 10 * 60_000

/** A flow in progress, as it is stored (JSON, in the shared-state keys). */
interface Pending {
  readonly provider: string
  readonly flow: "pkce" | "device"
  readonly overrides: EndpointOverrides
  readonly name: string | undefined
  readonly connection: string | undefined
  readonly baseUrl: string | undefined
  readonly verifier: string | undefined
  readonly redirectUri: string | undefined
  readonly deviceCode: string | undefined
  /** Device flow: ms between polls (grows on slow_down) and the earliest next poll. */
  readonly intervalMs: number
  readonly nextPollAt: number
  readonly expiresAt: number
}

interface TokenRow {
  readonly connection_id: string
  readonly provider: string
  readonly flow: string
  readonly refresh_token_enc: string | null
  readonly endpoints: string | null
  readonly refresh_error: string | null
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
      // Flows in progress live in the shared-state keys (docs/scale-out.md): a callback, a code
      // pasted or a device poll may reach another process than the one that started the flow.
      const shared = yield* SharedState.orLocal
      const flowKey = (state: string) => `oauth-flow:${state}`
      const flows = {
        set: (state: string, p: Pending, now: number) => Effect.asVoid(shared.keys.claim(flowKey(state), JSON.stringify(p), Math.max(1, p.expiresAt - now))),
        /** The flow and its stored text (what `update` and `delete` compare against). */
        get: (state: string, now: number) =>
          Effect.map(shared.keys.get(flowKey(state)), (text) => {
            if (text === undefined) return undefined
            const p = JSON.parse(text) as Pending
            return p.expiresAt > now ? { p, text } : undefined
          }),
        update: (state: string, text: string, p: Pending, now: number) => shared.keys.replace(flowKey(state), text, JSON.stringify(p), Math.max(1, p.expiresAt - now)),
        delete: (state: string) => Effect.flatMap(shared.keys.get(flowKey(state)), (text) => (text === undefined ? Effect.void : shared.keys.release(flowKey(state), text)))
      }
      const inflight = new Map<string, Deferred.Deferred<Connection, OAuthRefreshFailed>>()
      const retrySchedule = Schedule.exponential(Duration.millis(config.retryBaseMs)).pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(3)))

      const providerOf = (id: string): Effect.Effect<{ provider: ProviderSpec; spec: OAuthSpec }, NotFound> => {
        const provider = findProvider(id)
        const spec = oauthOf(provider)
        if (!provider || !spec) {
          const known = PROVIDERS.filter((p) => oauthOf(p)).map((p) => p.id)
          return Effect.fail(new NotFound({ message: `provider '${id}' does not sign in with OAuth; OAuth providers: ${known.join(", ")}` }))
        }
        return Effect.succeed({ provider, spec })
      }

      const endpointsOf = (provider: ProviderSpec, spec: OAuthSpec, overrides: EndpointOverrides) => resolveEndpoints(spec, env.get(provider.id) ?? {}, overrides)

      const checkUrl = (field: string, url: string) =>
        Effect.flatMap(connections.urlPolicy, (policy) => {
          const verdict = checkProviderUrl(url, policy)
          return verdict.ok ? Effect.void : Effect.fail(new BadRequest({ message: `${field} rejected: ${verdict.reason}` }))
        })

      /**
       * The proxy of the connection a flow re-authorizes (or refreshes): token endpoints are
       * control-plane calls through the connection's proxy, else the global default (docs/egress.md).
       */
      const proxyOf = (connection: string | undefined) =>
        connection === undefined
          ? Effect.succeed(undefined)
          : Effect.map(Effect.option(connections.get(connection)), (c) => (c._tag === "Some" ? { proxyId: c.value.proxyId, tlsProfile: c.value.tlsProfile } : undefined))

      const { post, postRetried } = makeTokenEndpoint(http, egress, retrySchedule)

      const storeGrant = (connectionId: string, provider: ProviderSpec, flow: string, tokens: TokenSet, overrides: EndpointOverrides | null, refreshed: boolean) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const existing = yield* sql<TokenRow>`SELECT * FROM oauth_tokens WHERE connection_id = ${connectionId}`.pipe(Effect.orDie)
          const prev = existing[0]
          yield* sql`UPDATE connections SET api_key_enc = ${secrets.encrypt(tokens.accessToken)}, updated_at = ${now} WHERE id = ${connectionId}`.pipe(Effect.orDie)
          yield* upsert(
            sql,
            "oauth_tokens",
            {
              connection_id: connectionId,
              provider: provider.id,
              flow,
              // A refresh answer without a new refresh token keeps the old one (RFC 6749 §6).
              refresh_token_enc: tokens.refreshToken ? secrets.encrypt(tokens.refreshToken) : refreshed ? (prev?.refresh_token_enc ?? null) : null,
              id_token_enc: tokens.idToken ? secrets.encrypt(tokens.idToken) : null,
              expires_at: tokens.expiresAt,
              email: tokens.email,
              account_id: tokens.accountId,
              scopes: null,
              endpoints: overrides ? JSON.stringify(overrides) : (prev?.endpoints ?? null),
              obtained_at: now,
              refreshed_at: refreshed ? now : null,
              refresh_error: null,
              updated_at: now
            },
            ["connection_id"]
          ).pipe(Effect.orDie)
          yield* connections.reload
        })

      const viewOf = (c: Connection) => {
        const view = connectionView(c)
        const h = cooldowns.healthAt(c.id, Date.now())
        return h.testStatus === null ? view : { ...view, testStatus: h.testStatus, lastError: h.lastError, lastErrorType: h.lastErrorType, errorCode: h.errorCode }
      }

      /** Creates the connection a flow names, or re-authorizes the existing one, with fresh tokens. */
      const connect = (p: Pending, provider: ProviderSpec, tokens: TokenSet, actor: string): Effect.Effect<OAuthConnected, BadRequest | NotFound | Conflict> =>
        Effect.gen(function* () {
          const all = yield* connections.list
          const existing = p.connection
            ? yield* connections.get(p.connection)
            : all.find((c) => c.name.toLowerCase() === (p.name ?? provider.id).toLowerCase() && c.provider.id === provider.id)
          if (existing && existing.provider.id !== provider.id)
            return yield* new BadRequest({ message: `connection '${existing.name}' is a ${existing.provider.id} connection, not ${provider.id}` })
          const baseUrl = p.baseUrl ?? (tokens.resourceUrl && !existing?.baseUrl ? (baseUrlOfResource(tokens.resourceUrl) ?? undefined) : undefined)
          const connection = existing
            ? yield* connections.update(existing.id, { apiKey: tokens.accessToken, ...(baseUrl !== undefined ? { baseUrl } : {}) }, actor)
            : yield* connections.create({ provider: provider.id, name: p.name ?? provider.id, apiKey: tokens.accessToken, ...(baseUrl !== undefined ? { baseUrl } : {}) }, actor)
          // A new authorization clears the terminal state (and any cooldown) of the old grant.
          yield* cooldowns.forget(connection.id)
          yield* storeGrant(connection.id, provider, p.flow, tokens, p.overrides, false)
          yield* Effect.logInfo(`oauth: ${provider.id} connection ${connection.name} ${existing ? "re-authorized" : "created"}${tokens.email ? ` for ${tokens.email}` : ""}`)
          const fresh = yield* connections.get(connection.id)
          return { connection: viewOf(fresh), created: !existing }
        })

      const startAuthorize: OAuthShape["startAuthorize"] = (id, input, callbackBase) =>
        Effect.gen(function* () {
          const { provider, spec } = yield* providerOf(id)
          if (!spec.flows.includes("pkce")) return yield* new BadRequest({ message: `${provider.id} signs in with the device flow: POST /api/oauth/${provider.id}/device-code` })
          const overrides = pickOverrides(input)
          const e = endpointsOf(provider, spec, overrides)
          if (!e.authorizeUrl) return yield* new BadRequest({ message: `authorizeUrl: ${provider.id} has no authorization endpoint` })
          yield* checkUrl("authorizeUrl", e.authorizeUrl)
          yield* checkUrl("tokenUrl", e.tokenUrl)
          if (input.connection) yield* connections.get(input.connection)
          const now = yield* Clock.currentTimeMillis
          const state = randomToken(24)
          const { verifier, challenge } = pkcePair()
          const redirectUri = input.redirectUri ?? spec.redirectUri ?? `${callbackBase}/api/oauth/${provider.id}/callback`
          yield* flows.set(
            state,
            {
              provider: provider.id,
              flow: "pkce",
              overrides,
              name: input.name,
              connection: input.connection,
              baseUrl: input.baseUrl,
              verifier,
              redirectUri,
              deviceCode: undefined,
              intervalMs: 0,
              nextPollAt: 0,
              expiresAt: now + FLOW_TTL_MS
            },
            now
          )
          return {
            provider: provider.id,
            flow: "pkce" as const,
            authorizeUrl: authorizeUrl(spec, e, { redirectUri, state, challenge }),
            state,
            redirectUri,
            expiresAt: toIso(now + FLOW_TTL_MS)!
          }
        })

      /** The pending flow a state names (and its stored text), taken (one use) unless `keep`; 400 when there is none. */
      const takeFlow = (provider: string, state: string | null, flow: "pkce" | "device", keep = false) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const found = state ? yield* flows.get(state, now) : undefined
          if (!found || found.p.provider !== provider || found.p.flow !== flow) {
            return yield* new BadRequest({
              message: `state: no ${flow === "pkce" ? "authorization" : "device flow"} of ${provider} is waiting under this state (unknown, used or expired; start again with POST /api/oauth/${provider}/${flow === "pkce" ? "authorize" : "device-code"})`
            })
          }
          if (!keep) yield* shared.keys.release(flowKey(state!), found.text)
          return found
        })

      const complete: OAuthShape["complete"] = (id, input, actor) =>
        Effect.gen(function* () {
          const { provider, spec } = yield* providerOf(id)
          const pasted = pastedCode(input)
          if (pasted.error) {
            // The user refused (or the server failed): the flow is over either way.
            if (pasted.state) yield* flows.delete(pasted.state)
            return yield* new BadRequest({ message: pasted.error })
          }
          if (!pasted.state) return yield* new BadRequest({ message: "state: missing (paste the whole redirect URL, or send state with the code)" })
          const { p } = yield* takeFlow(provider.id, pasted.state, "pkce")
          const e = endpointsOf(provider, spec, p.overrides)
          const outcome = yield* post(
            spec,
            e.tokenUrl,
            {
              grant_type: "authorization_code",
              code: pasted.code!,
              redirect_uri: p.redirectUri!,
              client_id: e.clientId,
              code_verifier: p.verifier!,
              ...(spec.tokenRequest === "json" ? { state: pasted.state } : {})
            },
            yield* proxyOf(p.connection)
          )
          if (outcome._tag === "refused") return yield* new BadRequest({ message: `the token endpoint refused the code: ${describeRefusal(outcome)}` })
          if (outcome._tag === "transient") return yield* new BadGateway({ message: `the token endpoint failed: ${outcome.message}` })
          return yield* connect(p, provider, outcome.tokens, actor)
        })

      const startDevice: OAuthShape["startDevice"] = (id, input) =>
        Effect.gen(function* () {
          const { provider, spec } = yield* providerOf(id)
          if (!spec.flows.includes("device"))
            return yield* new BadRequest({ message: `${provider.id} signs in with the authorization-code flow: POST /api/oauth/${provider.id}/authorize` })
          const overrides = pickOverrides(input)
          const e = endpointsOf(provider, spec, overrides)
          if (!e.deviceAuthorizationUrl) return yield* new BadRequest({ message: `deviceAuthorizationUrl: ${provider.id} has no device authorization endpoint` })
          yield* checkUrl("deviceAuthorizationUrl", e.deviceAuthorizationUrl)
          yield* checkUrl("tokenUrl", e.tokenUrl)
          if (input.connection) yield* connections.get(input.connection)
          const pkce = spec.devicePkce ? pkcePair() : undefined
          const deviceUrl = e.deviceAuthorizationUrl
          const via = yield* Effect.mapError(
            Effect.flatMap(proxyOf(input.connection), (of) => egress.control(of?.proxyId, deviceUrl, of?.tlsProfile)),
            (err) => new BadGateway({ message: `the device authorization endpoint failed: ${err.code}: ${err.message}` })
          )
          const res = yield* http
            .request({
              url: e.deviceAuthorizationUrl,
              method: "POST",
              headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json", "user-agent": http.userAgent },
              body: new URLSearchParams({
                client_id: e.clientId,
                scope: e.scopes.join(" "),
                ...(pkce ? { code_challenge: pkce.challenge, code_challenge_method: "S256" } : {})
              }).toString(),
              headersTimeout: "15 seconds",
              readWhole: true,
              maxBodyBytes: 64 * 1024,
              ...(via ? { dispatcher: via } : {})
            })
            .pipe(Effect.mapError((err) => new BadGateway({ message: `the device authorization endpoint failed: ${err.kind}: ${err.message}` })))
          const json = tryJson(res.bytes?.toString("utf8") ?? "") as Record<string, unknown> | undefined
          if (res.status < 200 || res.status >= 300) {
            const err = tokenError(json)
            const message = `the device authorization endpoint answered ${describeRefusal({ status: res.status, ...err })}`
            return yield* res.status >= 500 ? new BadGateway({ message }) : new BadRequest({ message })
          }
          const deviceCode = typeof json?.["device_code"] === "string" ? json["device_code"] : null
          const userCode = typeof json?.["user_code"] === "string" ? json["user_code"] : null
          const verificationUri =
            typeof json?.["verification_uri"] === "string" ? json["verification_uri"] : typeof json?.["verification_url"] === "string" ? json["verification_url"] : null
          if (!deviceCode || !userCode || !verificationUri)
            return yield* new BadGateway({ message: "the device authorization endpoint answered without device_code, user_code or verification_uri" })
          const now = yield* Clock.currentTimeMillis
          const expiresIn = typeof json?.["expires_in"] === "number" && json["expires_in"] > 0 ? json["expires_in"] * 1000 : FLOW_TTL_MS
          const intervalMs = typeof json?.["interval"] === "number" && json["interval"] >= 0 ? json["interval"] * 1000 : 5000
          const state = randomToken(24)
          const expiresAt = now + Math.min(expiresIn, FLOW_TTL_MS)
          yield* flows.set(
            state,
            {
              provider: provider.id,
              flow: "device",
              overrides,
              name: input.name,
              connection: input.connection,
              baseUrl: input.baseUrl,
              verifier: pkce?.verifier,
              redirectUri: undefined,
              deviceCode,
              intervalMs,
              nextPollAt: now + intervalMs,
              expiresAt
            },
            now
          )
          return {
            provider: provider.id,
            flow: "device" as const,
            state,
            userCode,
            verificationUri,
            verificationUriComplete: typeof json?.["verification_uri_complete"] === "string" ? json["verification_uri_complete"] : null,
            interval: intervalMs / 1000,
            expiresAt: toIso(expiresAt)!
          }
        })

      /** One poll of a device flow, at the earliest when its interval allows. */
      const pollOnce = (provider: ProviderSpec, spec: OAuthSpec, state: string, actor: string): Effect.Effect<PollResult, BadRequest | NotFound | BadGateway | Conflict> =>
        Effect.gen(function* () {
          const { p, text } = yield* takeFlow(provider.id, state, "device", true)
          const wait = p.nextPollAt - (yield* Clock.currentTimeMillis)
          if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
          const e = endpointsOf(provider, spec, p.overrides)
          const outcome = yield* post(
            spec,
            e.tokenUrl,
            {
              grant_type: "urn:ietf:params:oauth:grant-type:device_code",
              device_code: p.deviceCode!,
              client_id: e.clientId,
              ...(p.verifier ? { code_verifier: p.verifier } : {})
            },
            yield* proxyOf(p.connection),
            true
          )
          const now = yield* Clock.currentTimeMillis
          // The flow's pacing, stored for whichever process the next poll reaches.
          const paced = (intervalMs: number) => flows.update(state, text, { ...p, intervalMs, nextPollAt: now + intervalMs }, now)
          if (outcome._tag === "ok") {
            yield* flows.delete(state)
            const done = yield* connect(p, provider, outcome.tokens, actor)
            return { status: "complete" as const, interval: p.intervalMs / 1000, connection: done.connection, created: done.created }
          }
          if (outcome._tag === "transient") {
            yield* paced(p.intervalMs)
            return yield* new BadGateway({ message: `the token endpoint failed: ${outcome.message} (poll again)` })
          }
          switch (outcome.error) {
            case "authorization_pending":
              yield* paced(p.intervalMs)
              return { status: "pending" as const, interval: p.intervalMs / 1000 }
            case "slow_down": {
              const intervalMs = p.intervalMs + config.slowDownMs
              yield* paced(intervalMs)
              return { status: "slow_down" as const, interval: intervalMs / 1000 }
            }
            case "expired_token":
              yield* flows.delete(state)
              return yield* new BadRequest({ message: `the device code expired before the user answered: start again with POST /api/oauth/${provider.id}/device-code` })
            case "access_denied":
              yield* flows.delete(state)
              return yield* new BadRequest({ message: "the user denied access (access_denied)" })
            default:
              yield* flows.delete(state)
              return yield* new BadRequest({ message: `the token endpoint refused the device code: ${describeRefusal(outcome)}` })
          }
        })

      const poll: OAuthShape["poll"] = (id, input, actor) =>
        Effect.gen(function* () {
          const { provider, spec } = yield* providerOf(id)
          if (!input.wait) return yield* pollOnce(provider, spec, input.state, actor)
          const timeout = Duration.seconds(input.timeoutSeconds ?? 300)
          return yield* pollOnce(provider, spec, input.state, actor).pipe(
            Effect.repeat({ until: (r) => r.status === "complete" }),
            Effect.timeoutFail({
              duration: timeout,
              onTimeout: () => new BadRequest({ message: `timeoutSeconds: the user did not answer in time; poll again (the flow is still waiting)` })
            })
          )
        })

      /** Puts the connection in the terminal `expired` state (not routed until a new authorization). */
      const expire = (c: Connection, message: string) =>
        cooldowns
          .onFailure(
            { id: c.id, name: c.name, provider: { id: c.provider.id, authClass: c.provider.authClass, origin: originOf(c.effectiveBaseUrl) } },
            { scope: "connection", retryable: true, tripsBreaker: false, cooldown: false, terminal: "expired", quotaExhausted: false, reason: "oauth_expired" },
            { status: 401, kind: "http", code: "oauth_refresh_refused", message }
          )
          .pipe(Effect.zipRight(cooldowns.flush))

      const doRefresh = (id: string): Effect.Effect<Connection, OAuthRefreshFailed> =>
        Effect.gen(function* () {
          const c = yield* Effect.orElseFail(connections.get(id), () => new OAuthRefreshFailed({ message: `no connection ${id}`, permanent: true }))
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
          const e: OAuthEndpoints = endpointsOf(c.provider, spec, overrides)
          const outcome = yield* postRetried(spec, e.tokenUrl, { grant_type: "refresh_token", refresh_token: Redacted.value(refreshToken.value), client_id: e.clientId }, c)
          if (outcome._tag === "ok") {
            yield* storeGrant(c.id, c.provider, row?.flow ?? "pkce", outcome.tokens, null, true)
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
      const refresh: OAuthShape["refresh"] = (id) =>
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

      const fresh: OAuthShape["fresh"] = (c) => {
        const expiresAt = c.oauth?.expiresAt
        if (expiresAt === undefined || expiresAt === null || !c.oauth!.hasRefreshToken) return Effect.succeed(c)
        const now = Date.now()
        if (expiresAt - now > SKEW_MS) return Effect.succeed(c)
        // A transient failure while the token is still good: use it.
        return Effect.catchAll(refresh(c.id), (e) => (!e.permanent && expiresAt > Date.now() ? Effect.succeed(c) : Effect.fail(e)))
      }

      const renew: OAuthShape["renew"] = (c) =>
        Effect.flatMap(
          Effect.orElseSucceed(connections.get(c.id), () => c),
          (now) => {
            const sent = c.apiKey === null ? null : Redacted.value(c.apiKey)
            return now.apiKey !== null && Redacted.value(now.apiKey) !== sent ? Effect.succeed(now) : refresh(c.id)
          }
        )

      const oauthConnections = (providerId: string) => Effect.map(connections.list, (all) => all.filter((c) => c.provider.id === providerId))

      const pick: OAuthShape["pick"] = (id, name) =>
        Effect.gen(function* () {
          const { provider } = yield* providerOf(id)
          if (name) {
            const c = yield* connections.get(name)
            if (c.provider.id !== provider.id) return yield* new BadRequest({ message: `connection: '${c.name}' is a ${c.provider.id} connection, not ${provider.id}` })
            return c
          }
          const list = yield* oauthConnections(provider.id)
          if (list.length === 1) return list[0]!
          if (list.length === 0) return yield* new NotFound({ message: `no ${provider.id} connection yet: authorize one first` })
          return yield* new BadRequest({ message: `connection is required: ${provider.id} has ${list.length} connections (${list.map((c) => c.name).join(", ")})` })
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

const pickOverrides = (input: EndpointOverrides): EndpointOverrides => ({
  ...(input.authorizeUrl !== undefined ? { authorizeUrl: input.authorizeUrl } : {}),
  ...(input.tokenUrl !== undefined ? { tokenUrl: input.tokenUrl } : {}),
  ...(input.deviceAuthorizationUrl !== undefined ? { deviceAuthorizationUrl: input.deviceAuthorizationUrl } : {}),
  ...(input.clientId !== undefined ? { clientId: input.clientId } : {}),
  ...(input.scopes !== undefined ? { scopes: input.scopes } : {})
})
