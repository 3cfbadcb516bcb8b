/**
 * The provider's token (and device authorization) endpoint, as OAuth connections call it: one POST
 * read whole through the connection's egress, its answer sorted into tokens, a refusal or a
 * transient failure (secrets scrubbed from what it says), and the same retried with backoff.
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Schedule from "effect/Schedule"
import type { Dispatcher } from "undici"
import type { OAuthSpec } from "../../domain/catalog/modelSpec.js"
import type { TlsProfile } from "../../domain/connections.js"
import { scrubSecrets } from "../../kernel/redact.js"
import type { UpstreamHttpShape } from "../../upstream/client/UpstreamHttp.js"
import type { EgressShape } from "../../upstream/egress/Egress.js"
import { tryJson } from "../../upstream/formats/common.js"
import { parseTokenAnswer, tokenBody, tokenError, type TokenSet } from "../../upstream/providers/oauthWire.js"

/** What a token endpoint said: tokens, a refusal (4xx with an OAuth error), or a transient failure. */
export type TokenOutcome =
  | { readonly _tag: "ok"; readonly tokens: TokenSet }
  | { readonly _tag: "refused"; readonly status: number; readonly error: string | null; readonly description: string | null }
  | { readonly _tag: "transient"; readonly message: string }

/** Whose egress a token call takes: a connection's proxy and TLS profile (docs/egress.md); unset: the global default. */
export interface EgressOf {
  readonly proxyId?: string | null | undefined
  readonly tlsProfile?: TlsProfile | null | undefined
}

class Transient extends Data.TaggedError("Transient")<{ readonly message: string }> {}

export const describeRefusal = (o: {
  readonly status: number
  readonly error: string | null
  readonly description: string | null
}): string => `${o.error ?? `HTTP ${o.status}`}${o.description ? `: ${o.description}` : ""}`

export const makeTokenEndpoint = (http: UpstreamHttpShape, egress: EgressShape, retrySchedule: Schedule.Schedule<unknown, unknown>) => {
  /** One POST to a token (or device authorization) endpoint, read whole, through the egress of `via` (a connection's proxy and TLS
   * profile). */
  // Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a token exchange with the
  // provider's authorization server, not a model call: there is no other candidate, and a refused
  // refresh is reported on the connection (its cooldown), not as a model failure.
  const post = (
    spec: OAuthSpec,
    url: string,
    params: Record<string, string>,
    via: EgressOf | undefined,
    form = false
  ): Effect.Effect<TokenOutcome> => {
    const body = form ? tokenBody({ ...spec, tokenRequest: "form" }, params) : tokenBody(spec, params)
    const hide = Object.entries(params)
      .filter(([k]) => k !== "grant_type" && k !== "client_id" && k !== "scope" && k !== "redirect_uri" && k !== "code_challenge_method")
      .map(([, v]) => v)
    const send = (started: number, dispatcher: Dispatcher | undefined) =>
      http
        .request({
          url,
          method: "POST",
          headers: { "content-type": body.contentType, accept: "application/json", "user-agent": http.userAgent },
          body: body.body,
          headersTimeout: "15 seconds",
          bodyIdleTimeout: "15 seconds",
          readWhole: true,
          maxBodyBytes: 256 * 1024,
          ...(dispatcher ? { dispatcher } : {})
        })
        .pipe(
          Effect.map((res): TokenOutcome => {
            const raw = res.bytes?.toString("utf8") ?? ""
            if (res.status >= 200 && res.status < 300) {
              const json = tryJson(raw)
              const tokens = parseTokenAnswer(json, started)
              return typeof tokens === "string" ? { _tag: "transient", message: tokens } : { _tag: "ok", tokens }
            }
            // An error answer may echo what was sent (a code, a refresh token): scrubbed before it is read.
            const e = tokenError(tryJson(scrubSecrets(raw, hide)))
            if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429)
              return {
                _tag: "refused",
                status: res.status,
                error: e.error,
                description: e.description ? scrubSecrets(e.description, hide).slice(0, 300) : null
              }
            return { _tag: "transient", message: `HTTP ${res.status}${e.error ? ` ${e.error}` : ""}` }
          }),
          Effect.catchAll((e) =>
            Effect.succeed<TokenOutcome>({ _tag: "transient", message: `${e.kind}: ${scrubSecrets(e.message, hide)}` })
          )
        )
    // A proxy that refuses (family rules, unreachable without the fallback) is a transient failure: the grant is not at fault.
    return Effect.flatMap(
      Effect.zip(Clock.currentTimeMillis, Effect.either(egress.control(via?.proxyId, url, via?.tlsProfile))),
      ([started, via]) =>
        via._tag === "Left"
          ? Effect.succeed<TokenOutcome>({ _tag: "transient", message: `${via.left.code}: ${via.left.message}` })
          : send(started, via.right)
    )
  }

  /** A token request retried on transient failures (5xx, 429, network) with backoff. */
  const postRetried = (spec: OAuthSpec, url: string, params: Record<string, string>, via: EgressOf | undefined) =>
    post(spec, url, params, via).pipe(
      Effect.flatMap((o) => (o._tag === "transient" ? Effect.fail(new Transient({ message: o.message })) : Effect.succeed(o))),
      Effect.retry(retrySchedule),
      Effect.catchTag("Transient", (e) => Effect.succeed<TokenOutcome>({ _tag: "transient", message: e.message }))
    )

  return { post, postRetried }
}
