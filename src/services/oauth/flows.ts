import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { OAuthSpec, ProviderSpec } from "../../domain/catalog/modelSpec.js"
import { BadGateway, BadRequest, type Conflict, type NotFound } from "../../domain/errors.js"
import type { CompleteAuthorize, EndpointOverrides, PollDevice, PollResult, StartAuthorize, StartDevice } from "../../domain/oauth.js"
import type { SharedStateShape } from "../../platform/state/SharedState.js"
import { toIso } from "../../platform/store/Db.js"
import type { UpstreamHttpShape } from "../../upstream/client/UpstreamHttp.js"
import type { EgressShape } from "../../upstream/egress/Egress.js"
import { tryJson } from "../../upstream/formats/common.js"
import type { ConnectionsShape } from "../../upstream/providers/Connections.js"
import { authorizeUrl, pastedCode, pkcePair, randomToken, tokenError } from "../../upstream/providers/oauthWire.js"
import { type Grants, type GrantTarget, providerOf } from "./grants.js"
import { describeRefusal, type makeTokenEndpoint } from "./tokenEndpoint.js"

/** How long a started flow (its state, verifier or device code) is kept. */
const FLOW_TTL_MS = 10 * 60_000

/** A flow in progress, as it is stored (JSON, in the shared-state keys). */
interface Pending extends GrantTarget {
  readonly provider: string
  readonly verifier: string | undefined
  readonly redirectUri: string | undefined
  readonly deviceCode: string | undefined
  /** Device flow: ms between polls (grows on slow_down) and the earliest next poll. */
  readonly intervalMs: number
  readonly nextPollAt: number
  readonly expiresAt: number
}

const pickOverrides = (input: EndpointOverrides): EndpointOverrides => ({
  ...(input.authorizeUrl !== undefined ? { authorizeUrl: input.authorizeUrl } : {}),
  ...(input.tokenUrl !== undefined ? { tokenUrl: input.tokenUrl } : {}),
  ...(input.deviceAuthorizationUrl !== undefined ? { deviceAuthorizationUrl: input.deviceAuthorizationUrl } : {}),
  ...(input.clientId !== undefined ? { clientId: input.clientId } : {}),
  ...(input.scopes !== undefined ? { scopes: input.scopes } : {})
})

/**
 * The two sign-in flows (docs/operations.md, "OAuth connections"): the authorization code with
 * PKCE (a URL to open, then the code pasted or the callback) and the device flow (a code to enter,
 * then polls paced as the token endpoint says). Flows in progress live in the shared-state keys
 * (docs/scale-out.md): a callback, a code pasted or a device poll may reach another process than
 * the one that started the flow.
 */
export const makeFlows = (deps: {
  readonly shared: SharedStateShape
  readonly connections: ConnectionsShape
  readonly http: UpstreamHttpShape
  readonly egress: EgressShape
  readonly grants: Grants
  readonly post: ReturnType<typeof makeTokenEndpoint>["post"]
  /** What a device flow's `slow_down` adds to the interval. */
  readonly slowDownMs: number
}) => {
  const { shared, connections, http, egress, grants, post, slowDownMs } = deps
  const flowKey = (state: string) => `oauth-flow:${state}`
  const flows = {
    set: (state: string, p: Pending, now: number) =>
      Effect.asVoid(shared.keys.claim(flowKey(state), JSON.stringify(p), Math.max(1, p.expiresAt - now))),
    /** The flow and its stored text (what `update` and `delete` compare against). */
    get: (state: string, now: number) =>
      Effect.map(shared.keys.get(flowKey(state)), (text) => {
        if (text === undefined) return undefined
        const p = JSON.parse(text) as Pending
        return p.expiresAt > now ? { p, text } : undefined
      }),
    update: (state: string, text: string, p: Pending, now: number) =>
      shared.keys.replace(flowKey(state), text, JSON.stringify(p), Math.max(1, p.expiresAt - now)),
    delete: (state: string) =>
      Effect.flatMap(shared.keys.get(flowKey(state)), (text) =>
        text === undefined ? Effect.void : shared.keys.release(flowKey(state), text)
      )
  }

  const startAuthorize = (id: string, input: StartAuthorize, callbackBase: string) =>
    Effect.gen(function* () {
      const { provider, spec } = yield* providerOf(id)
      if (!spec.flows.includes("pkce"))
        return yield* new BadRequest({
          message: `${provider.id} signs in with the device flow: POST /api/oauth/${provider.id}/device-code`
        })
      const overrides = pickOverrides(input)
      const e = grants.endpointsOf(provider, spec, overrides)
      if (!e.authorizeUrl) return yield* new BadRequest({ message: `authorizeUrl: ${provider.id} has no authorization endpoint` })
      yield* grants.checkUrl("authorizeUrl", e.authorizeUrl)
      yield* grants.checkUrl("tokenUrl", e.tokenUrl)
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

  const complete = (id: string, input: CompleteAuthorize, actor: string) =>
    Effect.gen(function* () {
      const { provider, spec } = yield* providerOf(id)
      const pasted = pastedCode(input)
      if (pasted.error) {
        // The user refused (or the server failed): the flow is over either way.
        if (pasted.state) yield* flows.delete(pasted.state)
        return yield* new BadRequest({ message: pasted.error })
      }
      if (!pasted.state)
        return yield* new BadRequest({ message: "state: missing (paste the whole redirect URL, or send state with the code)" })
      const { p } = yield* takeFlow(provider.id, pasted.state, "pkce")
      const e = grants.endpointsOf(provider, spec, p.overrides)
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
        yield* grants.proxyOf(p.connection)
      )
      if (outcome._tag === "refused")
        return yield* new BadRequest({ message: `the token endpoint refused the code: ${describeRefusal(outcome)}` })
      if (outcome._tag === "transient") return yield* new BadGateway({ message: `the token endpoint failed: ${outcome.message}` })
      return yield* grants.connect(p, provider, outcome.tokens, actor)
    })

  const startDevice = (id: string, input: StartDevice) =>
    Effect.gen(function* () {
      const { provider, spec } = yield* providerOf(id)
      if (!spec.flows.includes("device"))
        return yield* new BadRequest({
          message: `${provider.id} signs in with the authorization-code flow: POST /api/oauth/${provider.id}/authorize`
        })
      const overrides = pickOverrides(input)
      const e = grants.endpointsOf(provider, spec, overrides)
      if (!e.deviceAuthorizationUrl)
        return yield* new BadRequest({ message: `deviceAuthorizationUrl: ${provider.id} has no device authorization endpoint` })
      yield* grants.checkUrl("deviceAuthorizationUrl", e.deviceAuthorizationUrl)
      yield* grants.checkUrl("tokenUrl", e.tokenUrl)
      if (input.connection) yield* connections.get(input.connection)
      const pkce = spec.devicePkce ? pkcePair() : undefined
      const deviceUrl = e.deviceAuthorizationUrl
      const via = yield* Effect.mapError(
        Effect.flatMap(grants.proxyOf(input.connection), (of) => egress.control(of?.proxyId, deviceUrl, of?.tlsProfile)),
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
        .pipe(
          Effect.mapError((err) => new BadGateway({ message: `the device authorization endpoint failed: ${err.kind}: ${err.message}` }))
        )
      const json = tryJson(res.bytes?.toString("utf8") ?? "") as Record<string, unknown> | undefined
      if (res.status < 200 || res.status >= 300) {
        const err = tokenError(json)
        const message = `the device authorization endpoint answered ${describeRefusal({ status: res.status, ...err })}`
        return yield* res.status >= 500 ? new BadGateway({ message }) : new BadRequest({ message })
      }
      const deviceCode = typeof json?.["device_code"] === "string" ? json["device_code"] : null
      const userCode = typeof json?.["user_code"] === "string" ? json["user_code"] : null
      const verificationUri =
        typeof json?.["verification_uri"] === "string"
          ? json["verification_uri"]
          : typeof json?.["verification_url"] === "string"
            ? json["verification_url"]
            : null
      if (!deviceCode || !userCode || !verificationUri)
        return yield* new BadGateway({
          message: "the device authorization endpoint answered without device_code, user_code or verification_uri"
        })
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
  const pollOnce = (
    provider: ProviderSpec,
    spec: OAuthSpec,
    state: string,
    actor: string
  ): Effect.Effect<PollResult, BadRequest | NotFound | BadGateway | Conflict> =>
    Effect.gen(function* () {
      const { p, text } = yield* takeFlow(provider.id, state, "device", true)
      const wait = p.nextPollAt - (yield* Clock.currentTimeMillis)
      if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
      const e = grants.endpointsOf(provider, spec, p.overrides)
      const outcome = yield* post(
        spec,
        e.tokenUrl,
        {
          grant_type: "urn:ietf:params:oauth:grant-type:device_code",
          device_code: p.deviceCode!,
          client_id: e.clientId,
          ...(p.verifier ? { code_verifier: p.verifier } : {})
        },
        yield* grants.proxyOf(p.connection),
        true
      )
      const now = yield* Clock.currentTimeMillis
      // The flow's pacing, stored for whichever process the next poll reaches.
      const paced = (intervalMs: number) => flows.update(state, text, { ...p, intervalMs, nextPollAt: now + intervalMs }, now)
      if (outcome._tag === "ok") {
        yield* flows.delete(state)
        const done = yield* grants.connect(p, provider, outcome.tokens, actor)
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
          const intervalMs = p.intervalMs + slowDownMs
          yield* paced(intervalMs)
          return { status: "slow_down" as const, interval: intervalMs / 1000 }
        }
        case "expired_token":
          yield* flows.delete(state)
          return yield* new BadRequest({
            message: `the device code expired before the user answered: start again with POST /api/oauth/${provider.id}/device-code`
          })
        case "access_denied":
          yield* flows.delete(state)
          return yield* new BadRequest({ message: "the user denied access (access_denied)" })
        default:
          yield* flows.delete(state)
          return yield* new BadRequest({ message: `the token endpoint refused the device code: ${describeRefusal(outcome)}` })
      }
    })

  const poll = (id: string, input: PollDevice, actor: string) =>
    Effect.gen(function* () {
      const { provider, spec } = yield* providerOf(id)
      if (!input.wait) return yield* pollOnce(provider, spec, input.state, actor)
      const timeout = Duration.seconds(input.timeoutSeconds ?? 300)
      return yield* pollOnce(provider, spec, input.state, actor).pipe(
        Effect.repeat({ until: (r) => r.status === "complete" }),
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new BadRequest({ message: `timeoutSeconds: the user did not answer in time; poll again (the flow is still waiting)` })
        })
      )
    })

  return { startAuthorize, complete, startDevice, poll }
}
