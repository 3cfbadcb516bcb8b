/**
 * What goes to an upstream and how its refusals are read: one prepared request sent to a
 * connection (the key and the outbound URL policy checked first), the body for a connection's
 * own format, and an upstream error answer rendered for the client and described for the
 * resilience layer.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { Dispatcher } from "undici"
import type { EgressShape } from "../upstream/egress/Egress.js"
import { PROXY_FAMILY_UNAVAILABLE } from "../upstream/egress/family.js"
import type { CanonicalRequest, FormatId } from "../domain/canonical.js"
import { tryJson } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { FORMATS } from "../upstream/formats/registry.js"
import type { Connection, ConnectionsShape, ResolvedTarget } from "../upstream/providers/Connections.js"
import { checkProviderUrl, type UrlPolicyFlags } from "../upstream/providers/urlPolicy.js"
import { scrubSecrets } from "../kernel/redact.js"
import type { FailureInfo } from "../services/resilience/types.js"
import { customRequest, upstreamRequest } from "../upstream/client/executors.js"
import {
  collect,
  discardBody,
  ERROR_BODY_MAX_BYTES,
  readUpstreamBody,
  UpstreamBodyError,
  type UpstreamHttpShape,
  type UpstreamRequest,
  type UpstreamResponse,
  type UpstreamTransportError
} from "../upstream/client/UpstreamHttp.js"
import { hintHeaders } from "./answers.js"
import { headerValue } from "../kernel/attempts.js"
import type { SendOptions } from "./call.js"
import { jsonTooDeep, MAX_JSON_DEPTH } from "../kernel/untrusted.js"
import { clientError, InferenceError } from "../kernel/errors.js"
import type { StreamTimeoutsShape } from "./StreamTimeouts.js"
import { bindMessages } from "../upstream/formats/signatures.js"

/** The request body for a connection's own format (the translated path), with its provider's quirks. */
/** On an error answer from an upstream: the status that upstream answered (the client's may differ: a 500 is passed on as 502). */
export const UPSTREAM_STATUS_HEADER = "x-gateway-upstream-status"

export const encodeFor = (
  connection: Connection,
  req: CanonicalRequest
): { readonly format: FormatId; readonly body: Record<string, unknown> } => {
  const upstream = FORMATS[connection.format]
  // Reasoning state another connection issued is dropped, this one's unsealed (docs/reasoning-state.md).
  const messages = bindMessages(req.messages, connection.id)
  return {
    format: upstream.id,
    body: upstream.encodeRequest(messages === req.messages ? req : { ...req, messages }, connection.provider.quirks)
  }
}

const hostOf = (url: string): string => {
  try {
    return new URL(url).hostname
  } catch {
    return ""
  }
}

const transportError = (clientFormat: WireFormat, connection: Connection) => (e: UpstreamTransportError) =>
  e.kind === "proxy_family"
    ? clientError(clientFormat, {
        status: 503,
        kind: "overloaded",
        message: `${PROXY_FAMILY_UNAVAILABLE}: ${connection.name}: ${e.message}`,
        code: PROXY_FAMILY_UNAVAILABLE
      })
    : e.kind === "blocked"
      ? // The SSRF guard refused what the connection's host resolved to: the same answer as a refused base URL.
        clientError(clientFormat, {
          status: 403,
          kind: "permission",
          message: `${connection.name}: ${e.message}`,
          code: "provider_url_blocked"
        })
      : e.kind === "tls"
        ? // Nothing was sent (the request and the key never left); the message names the check
          // that failed (expired, another name, untrusted). Never retried over plain HTTP.
          clientError(clientFormat, {
            status: 502,
            kind: "upstream",
            message: `${connection.name}: the TLS handshake with the upstream failed (${e.message})`,
            code: "upstream_tls_error"
          })
        : clientError(clientFormat, {
            status: e.kind === "timeout" ? 504 : 502,
            kind: e.kind === "timeout" ? "timeout" : "upstream",
            message: `${connection.name}: ${e.kind === "timeout" ? "upstream timed out" : "upstream unreachable"} (${e.message})`,
            code: e.kind === "timeout" ? "upstream_timeout" : "upstream_unreachable"
          })

/** The credentials a connection sends upstream: what its error answers must never repeat. */
export const secretsOf = (connection: Connection): ReadonlyArray<string> => (connection.apiKey ? [Redacted.value(connection.apiKey)] : [])

/** An error body without secrets, as text and parsed (scrubbing keeps JSON text valid JSON). */
const scrubbedBody = (raw: string, secrets: ReadonlyArray<string>): { readonly text: string; readonly parsed: unknown } => {
  const text = scrubSecrets(raw, secrets)
  // Too deep to walk or to encode again: the error is read as text.
  return { text, parsed: jsonTooDeep(raw) ? undefined : tryJson(text) }
}

/**
 * An answer whose body could not be read whole (too large, stalled, broken off): a failure of
 * that target, which the request may fall back from. One mapping for every whole answer (chat,
 * embeddings, fusion panels).
 */
export const unreadableAnswer = (
  client: WireFormat,
  connection: Connection,
  e: Error
): { readonly error: InferenceError; readonly info: FailureInfo } => {
  const reason = e instanceof UpstreamBodyError ? e.reason : "broken"
  const stalled = reason === "stalled"
  const status = stalled ? 504 : 502
  const code = reason === "too_large" ? "upstream_response_too_large" : stalled ? "upstream_timeout" : "upstream_error"
  const message = `${connection.name}: ${reason === "broken" ? `upstream response body could not be read: ${e.message}` : e.message}`
  return {
    error: clientError(client, { status, kind: stalled ? "timeout" : "upstream", message, code }),
    info: { status, kind: stalled ? "timeout" : "cut", message, code }
  }
}

/** An upstream that answered a redirect: a bad gateway, naming where it pointed (without secrets). */
const redirected = (
  res: UpstreamResponse,
  client: WireFormat,
  connection: Connection,
  secrets: ReadonlyArray<string>
): { readonly error: InferenceError; readonly info: FailureInfo } => {
  const location = res.headers["location"]
  const where = typeof location === "string" && location !== "" ? ` to ${scrubSecrets(location, secrets).slice(0, 500)}` : ""
  const message = `${connection.name}: the upstream redirected (HTTP ${res.status})${where}; redirects are not followed, check the connection's base URL`
  return {
    error: clientError(client, { status: 502, kind: "upstream", message, code: "upstream_redirect" }),
    // Its own status for the resilience layer: a misbehaving upstream, tried elsewhere, no breaker.
    info: { status: res.status, kind: "http", message, code: "upstream_redirect" }
  }
}

/**
 * A 2xx answer whose body is an error or not the format it promised, as the gateway's 502. An error inside still tells the resilience
 * layer its own status: a rate limit inside a 200 is still a rate limit (docs/resilience.md, "Classification").
 */
export const errorInAnswer = (
  upstream: FormatId,
  json: unknown,
  raw: string,
  client: WireFormat,
  connection: Connection,
  expect?: "answer"
): { readonly error: InferenceError; readonly info: FailureInfo } | undefined => {
  const format = FORMATS[upstream]
  const reported = format.errorIn200(json)
  const secrets = secretsOf(connection)
  // Scrubbed before it is cut: a key cut in half would no longer be recognised.
  const body = () => scrubSecrets(raw.slice(0, 8192), secrets).slice(0, 4096)
  if (reported) {
    const message = scrubSecrets(reported.message, secrets)
    return {
      error: clientError(client, { status: 502, kind: "upstream", message, code: reported.code ?? "upstream_error" }),
      info: { status: reported.status, kind: "http", message, code: reported.code ?? null, body: body() }
    }
  }
  // Walking or re-encoding an answer this deep would overflow the stack: a failure of this target.
  if (json !== undefined && jsonTooDeep(raw)) {
    const message = `upstream answered JSON nested deeper than ${MAX_JSON_DEPTH} levels`
    return {
      error: clientError(client, { status: 502, kind: "upstream", message, code: "upstream_error" }),
      info: { status: 502, kind: "http", message, code: null, body: body() }
    }
  }
  const problem =
    json === undefined
      ? `upstream answered 200 with a body that is not JSON: ${body().slice(0, 200)}`
      : expect === "answer"
        ? format.answerProblem(json)
        : undefined
  if (problem === undefined) return undefined
  const message = `${connection.name}: ${json === undefined ? problem : scrubSecrets(problem, secrets)}`
  return {
    error: clientError(client, { status: 502, kind: "upstream", message, code: "upstream_malformed" }),
    info: { status: 502, kind: "malformed", message, code: "upstream_malformed", body: body() }
  }
}

/** OAuth connections: the connection with a token good for the request (refreshed first when about to expire). */
export type FreshCredentials = (
  connection: Connection
) => Effect.Effect<Connection, { readonly message: string; readonly permanent: boolean }>

/** OAuth connections: after the upstream refused the connection's token, the connection with another (refreshed) token. */
export type RenewCredentials = FreshCredentials

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/** How a send without an effect ended (`sendNow`): the response, the client's error, or `gone` (the caller went away). */
export type SentNow =
  | { readonly _tag: "answered"; readonly response: UpstreamResponse }
  | { readonly _tag: "failed"; readonly error: InferenceError }
  | { readonly _tag: "gone" }

/** What `upstreamRequest` is told of a send: one object, its absent options left out without an empty object spread for each. */
const upstreamAsk = (model: string, options: SendOptions, userAgent: string): Parameters<typeof upstreamRequest>[3] => {
  const ask: Mutable<Parameters<typeof upstreamRequest>[3]> = { model, stream: options.stream, userAgent }
  if (options.op) ask.op = options.op
  if (options.forward) ask.forward = options.forward
  return ask
}

export const makeSending = (deps: {
  readonly connections: ConnectionsShape
  readonly http: UpstreamHttpShape
  readonly timeouts: StreamTimeoutsShape
  readonly credentials?: FreshCredentials | undefined
  readonly renew?: RenewCredentials | undefined
  /** Upstream proxies (src/upstream/egress/); without it every call goes direct. */
  readonly egress?: EgressShape | undefined
}) => {
  const { connections, http, timeouts, credentials, renew, egress } = deps

  /** Sends one prepared request, with its failures mapped by `fail` in the same step (the caller's own error type). */
  const sendAs = <E>(
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat,
    fail: (e: InferenceError) => E
  ): Effect.Effect<UpstreamResponse, E> => {
    // An OAuth token about to expire is refreshed (single-flight) before the request goes out;
    // one that cannot be refreshed skips this connection (code `oauth_refresh_failed`).
    if (credentials !== undefined && target.connection.oauth !== undefined) {
      const refreshFailed = (e: { readonly message: string }) =>
        fail(clientError(clientFormat, { status: 503, kind: "overloaded", message: e.message, code: "oauth_refresh_failed" }))
      return Effect.flatMap(Effect.mapError(credentials(target.connection), refreshFailed), (connection) => {
        const sent = sendWith({ ...target, connection }, format, body, options, clientFormat, fail)
        if (renew === undefined) return sent
        // A 401 (the token revoked or rotated elsewhere, or expired early): one refresh and one
        // more send, inside this attempt. A second 401 is read as any 401 (the connection goes
        // terminal); a refresh refused for good has made it terminal already, a transient one
        // skips the connection without that.
        return Effect.flatMap(sent, (res) => {
          if (res.status !== 401) return Effect.succeed(res)
          if (res.bytes === undefined) discardBody(res.body)
          return Effect.flatMap(Effect.mapError(renew(connection), refreshFailed), (renewed) =>
            sendWith({ ...target, connection: renewed }, format, body, options, clientFormat, fail)
          )
        })
      })
    }
    return sendWith(target, format, body, options, clientFormat, fail)
  }

  /**
   * The request for the upstream, ready to go (the URL policy judged, the body encoded, the
   * timeouts set), or the client's error when it may not go out. Synchronous: shared by the
   * pipeline's send and the common path's (docs/ARCHITECTURE.md, "The common path").
   */
  const prepare = (
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat,
    policy: UrlPolicyFlags,
    dispatcher?: Dispatcher
  ): UpstreamRequest | InferenceError => {
    const { connection } = target
    if (connection.keyError)
      return clientError(clientFormat, {
        status: 503,
        kind: "overloaded",
        message: `${connection.name}: ${connection.keyError}`,
        code: "provider_misconfigured"
      })
    const verdict = checkProviderUrl(options.custom?.url ?? connection.effectiveBaseUrl ?? "", policy)
    if (!verdict.ok)
      return clientError(clientFormat, {
        status: 403,
        kind: "permission",
        message: `${connection.name}: ${verdict.reason}`,
        code: "provider_url_blocked"
      })
    const prepared = options.custom
      ? customRequest(connection, options.custom, http.userAgent)
      : upstreamRequest(connection, format, body, upstreamAsk(target.model, options, http.userAgent))
    if (options.onPrepared !== undefined)
      options.onPrepared({
        url: prepared.url,
        body: typeof prepared.body === "string" ? prepared.body : Buffer.isBuffer(prepared.body) ? prepared.body.toString("utf8") : ""
      })
    // The connection's own limits first; a stream's body is watched by the stream watchdog instead.
    const own = connection.timeouts
    const headersTimeout = options.headersTimeoutMs ?? own?.headersMs ?? (options.stream ? timeouts.streamHeadersMs : timeouts.headersMs)
    const bodyIdleTimeout = options.stream ? undefined : (own?.idleMs ?? timeouts.bodyIdleMs)
    // `prepared` was made for this call alone (customRequest and upstreamRequest build a new one
    // each time): the send's settings go on it, not on a copy of it (one object per send, not six).
    const ready = prepared as Mutable<UpstreamRequest>
    ready.headersTimeout = headersTimeout
    if (bodyIdleTimeout !== undefined) ready.bodyIdleTimeout = bodyIdleTimeout
    if (options.readWhole) ready.readWhole = true
    if (options.abortWhen) ready.abortWhen = options.abortWhen
    if (dispatcher) ready.dispatcher = dispatcher
    return ready
  }

  const sendWith = <E>(
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat,
    fail: (e: InferenceError) => E
  ): Effect.Effect<UpstreamResponse, E> => {
    const { connection } = target
    const request = (policy: UrlPolicyFlags, dispatcher?: Dispatcher) => {
      const ready = prepare(target, format, body, options, clientFormat, policy, dispatcher)
      if (ready instanceof InferenceError) return Effect.fail(fail(ready))
      const toClient = transportError(clientFormat, connection)
      return Effect.mapError(http.request(ready), (e) => fail(toClient(e)))
    }
    if (connection.keyError)
      return Effect.fail(
        fail(
          clientError(clientFormat, {
            status: 503,
            kind: "overloaded",
            message: `${connection.name}: ${connection.keyError}`,
            code: "provider_misconfigured"
          })
        )
      )
    // The flags are almost always fresh: no effect to read them.
    const known = connections.peekUrlPolicy()
    // A connection without a proxy (and no global default, no auto-select) is decided here, synchronously.
    if (egress === undefined || egress.isDirect(connection.proxyId))
      return known ? request(known) : Effect.flatMap(connections.urlPolicy, (p) => request(p))
    // Through a proxy: inference never falls back to a direct call (the egress address would change).
    const targetHost = hostOf(options.custom?.url ?? connection.effectiveBaseUrl ?? "")
    return Effect.flatMap(
      Effect.mapError(egress.dispatcherFor(connection.proxyId, "inference", targetHost, connection.tlsProfile), (e) =>
        fail(
          clientError(clientFormat, {
            status: e.status,
            kind: e.status === 403 ? "permission" : "overloaded",
            message: `${e.code}: ${connection.name}: ${e.message}`,
            code: e.code
          })
        )
      ),
      (dispatcher) => (known ? request(known, dispatcher) : Effect.flatMap(connections.urlPolicy, (p) => request(p, dispatcher)))
    )
  }

  /**
   * Whether `sendNow` can send to this connection without an effect: no OAuth token to keep
   * fresh, no proxy, the outbound policy's flags known fresh.
   */
  const canSendNow = (connection: Connection): boolean =>
    !(credentials !== undefined && connection.oauth !== undefined) &&
    (egress === undefined || egress.isDirect(connection.proxyId)) &&
    connections.peekUrlPolicy() !== undefined

  /**
   * The pipeline's send without an effect (the common path): `done` once, with the response, the
   * client's error, or `gone` (the caller went away through `abortWhen`). Only where `canSendNow`.
   * No closure of its own when the flags are fresh (the rare wait for them is `sendAfterPolicy`'s).
   */
  const sendNow = (
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat,
    done: (outcome: SentNow) => void
  ): void => {
    const policy = connections.peekUrlPolicy()
    if (policy !== undefined) sendPreparedNow(target, format, body, options, clientFormat, policy, done)
    else sendAfterPolicy(target, format, body, options, clientFormat, done)
  }

  /** `sendNow` under the outbound policy's flags: the request prepared and sent; a transport failure is mapped only when there is one. */
  const sendPreparedNow = (
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat,
    policy: UrlPolicyFlags,
    done: (outcome: SentNow) => void
  ): void => {
    const ready = prepare(target, format, body, options, clientFormat, policy)
    if (ready instanceof InferenceError) return done({ _tag: "failed", error: ready })
    http.requestNow(ready, (outcome) =>
      done(outcome._tag === "failed" ? { _tag: "failed", error: transportError(clientFormat, target.connection)(outcome.error) } : outcome)
    )
  }

  /** The flags changed a moment ago (`canSendNow` saw them fresh): read them, then send. */
  const sendAfterPolicy = (
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat,
    done: (outcome: SentNow) => void
  ): void => {
    Effect.runPromise(connections.urlPolicy).then(
      (policy) => sendPreparedNow(target, format, body, options, clientFormat, policy, done),
      (e: unknown) =>
        done({
          _tag: "failed",
          error: clientError(clientFormat, {
            status: 503,
            kind: "overloaded",
            message: `the outbound policy could not be read: ${String(e)}`,
            code: "provider_misconfigured"
          })
        })
    )
  }

  const send = (target: ResolvedTarget, format: FormatId, body: Record<string, unknown>, options: SendOptions, clientFormat: WireFormat) =>
    Effect.suspend(() => sendAs(target, format, body, options, clientFormat, (e) => e))

  /**
   * An upstream error answer, read: the client's rendering and the resilience layer's
   * description. The body is scrubbed of the connection's secrets first (an upstream may echo
   * the key it refused), so what the client, the usage row, lastError and the log see is clean.
   * A redirect is the gateway's own 502: it is not followed, and its status never reaches the client.
   */
  const readFailure = (
    res: UpstreamResponse,
    upstream: WireFormat,
    client: WireFormat,
    connection: Connection
  ): Effect.Effect<{ readonly error: InferenceError; readonly info: FailureInfo }> =>
    (res.bytes !== undefined || res.bodyError !== undefined
      ? Effect.succeed(res.bytes?.toString("utf8") ?? "")
      : readUpstreamBody(res.body, ERROR_BODY_MAX_BYTES).pipe(
          Effect.map((b) => b.toString("utf8")),
          Effect.orElseSucceed(() => "")
        )
    ).pipe(Effect.map((raw) => failureOf(res, raw, upstream, client, connection)))

  /** `readFailure` without an effect (the common path): `done` once the error body is read. */
  const readFailureNow = (
    res: UpstreamResponse,
    upstream: WireFormat,
    client: WireFormat,
    connection: Connection,
    done: (failure: { readonly error: InferenceError; readonly info: FailureInfo }) => void
  ): void => {
    if (res.bytes !== undefined || res.bodyError !== undefined)
      return done(failureOf(res, res.bytes?.toString("utf8") ?? "", upstream, client, connection))
    collect(res.body, ERROR_BODY_MAX_BYTES, "cut", (error, bytes) =>
      done(failureOf(res, error ? "" : bytes!.toString("utf8"), upstream, client, connection))
    )
  }

  /** An error answer's body, read: the client's rendering and the resilience layer's description. */
  const failureOf = (
    res: UpstreamResponse,
    raw: string,
    upstream: WireFormat,
    client: WireFormat,
    connection: Connection
  ): { readonly error: InferenceError; readonly info: FailureInfo } => {
    const secrets = secretsOf(connection)
    if (res.status >= 300 && res.status < 400) return redirected(res, client, connection, secrets)
    const { text, parsed } = scrubbedBody(raw, secrets)
    const decoded = upstream.decodeError(res.status, parsed, text)
    const info: FailureInfo = {
      status: res.status,
      kind: "http",
      message: decoded.message,
      code: decoded.code ?? null,
      headers: headerValue(res.headers),
      body: text.slice(0, 4096)
    }
    // The client gets the upstream's status, but never a 500: from the gateway that means a
    // defect of its own, so the upstream's is a 502 (Bad Gateway); the header keeps the original.
    const status = res.status === 500 ? 502 : res.status
    const headers = { ...hintHeaders(res.headers), [UPSTREAM_STATUS_HEADER]: String(res.status) }
    // Same format: the upstream's own error object is already what the client expects.
    const error =
      upstream.id === client.id && upstream.isErrorBody(parsed)
        ? new InferenceError({ status, kind: decoded.kind, code: decoded.code ?? null, message: decoded.message, headers, body: parsed })
        : clientError(client, { ...decoded, status, code: decoded.code ?? "upstream_error" }, headers)
    return { error, info }
  }

  /**
   * A successful answer's body as text: read in the same wait as its headers (`readWhole`), or
   * now, under the same size limit (a stream asked for, answered whole). A body that could not
   * be read whole is the target's failure.
   */
  const wholeText = (
    res: UpstreamResponse,
    client: WireFormat,
    connection: Connection
  ): Effect.Effect<string, { readonly error: InferenceError; readonly info: FailureInfo }> =>
    res.bodyError
      ? Effect.fail(unreadableAnswer(client, connection, res.bodyError))
      : res.bytes
        ? Effect.succeed(res.bytes.toString("utf8"))
        : // Asked as a stream, answered whole: its body's silence is bounded as a whole answer's is.
          readUpstreamBody(res.body, http.maxResponseBytes, "fail", connection.timeouts?.idleMs ?? timeouts.bodyIdleMs).pipe(
            Effect.map((b) => b.toString("utf8")),
            Effect.mapError((e) => unreadableAnswer(client, connection, e))
          )

  /** `wholeText` without an effect (the common path). */
  const wholeTextNow = (
    res: UpstreamResponse,
    client: WireFormat,
    connection: Connection,
    done: (text: { readonly text: string } | { readonly failure: { readonly error: InferenceError; readonly info: FailureInfo } }) => void
  ): void => {
    if (res.bodyError) return done({ failure: unreadableAnswer(client, connection, res.bodyError) })
    if (res.bytes) return done({ text: res.bytes.toString("utf8") })
    collect(
      res.body,
      http.maxResponseBytes,
      "fail",
      (error, bytes) => done(error ? { failure: unreadableAnswer(client, connection, error) } : { text: bytes!.toString("utf8") }),
      connection.timeouts?.idleMs ?? timeouts.bodyIdleMs
    )
  }

  return { sendAs, send, readFailure, wholeText, canSendNow, sendNow, readFailureNow, wholeTextNow }
}
