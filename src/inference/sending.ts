/**
 * What goes to an upstream and how its refusals are read: one prepared request sent to a
 * connection (the key and the outbound URL policy checked first), the body for a connection's
 * own format, and an upstream error answer rendered for the client and described for the
 * resilience layer.
 */
import * as Effect from "effect/Effect"
import type { CanonicalRequest, FormatId } from "../formats/canonical.js"
import { tryJson } from "../formats/common.js"
import type { WireFormat } from "../formats/format.js"
import { encodeChatRequest } from "../formats/openai-chat.js"
import { FORMATS } from "../formats/registry.js"
import type { Connection, ConnectionsShape, ResolvedTarget } from "../providers/Connections.js"
import { checkProviderUrl, type UrlPolicyFlags } from "../providers/urlPolicy.js"
import type { FailureInfo } from "../resilience/types.js"
import { upstreamRequest } from "../upstream/executors.js"
import { ERROR_BODY_MAX_BYTES, readUpstreamBody, type UpstreamHttpShape, type UpstreamResponse, type UpstreamTransportError } from "../upstream/UpstreamHttp.js"
import { hintHeaders, isErrorShape } from "./answers.js"
import { headerValue } from "./attempts.js"
import { clientError, InferenceError } from "./errors.js"
import type { StreamTimeoutsShape } from "./timeouts.js"

export interface SendOptions {
  readonly stream: boolean
  readonly op?: "generate" | "count_tokens" | "embed"
  readonly forward?: Readonly<Record<string, string>>
  /** Overrides the headers timeout (probes after an exclusion use a shorter one). */
  readonly headersTimeoutMs?: number
  /** Read the answer whole before answering (a non-streamed call): see UpstreamRequest.readWhole. */
  readonly readWhole?: boolean
  /** Abort when the client goes away rather than on interruption: see UpstreamRequest.abortWhen. */
  readonly abortWhen?: (abort: () => void) => () => void
}

/** The request body for a connection's own format (the translated path). */
export const encodeFor = (connection: Connection, req: CanonicalRequest): { readonly format: FormatId; readonly body: Record<string, unknown> } => {
  const upstream = FORMATS[connection.format]
  return {
    format: upstream.id,
    body:
      upstream.id === "openai-chat"
        ? encodeChatRequest(req, { maxTokensField: connection.provider.id === "openai" ? "max_completion_tokens" : "max_tokens", reasoningContent: connection.provider.id === "deepseek" })
        : upstream.encodeRequest(req)
  }
}

const transportError = (clientFormat: WireFormat, connection: Connection) => (e: UpstreamTransportError) =>
  clientError(clientFormat, {
    status: e.kind === "timeout" ? 504 : 502,
    kind: e.kind === "timeout" ? "timeout" : "upstream",
    message: `${connection.name}: ${e.kind === "timeout" ? "upstream timed out" : "upstream unreachable"} (${e.message})`,
    code: e.kind === "timeout" ? "upstream_timeout" : "upstream_unreachable"
  })

export const makeSending = (deps: { readonly connections: ConnectionsShape; readonly http: UpstreamHttpShape; readonly timeouts: StreamTimeoutsShape }) => {
  const { connections, http, timeouts } = deps

  /** Sends one prepared request, with its failures mapped by `fail` in the same step (the caller's own error type). */
  const sendAs = <E>(
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: SendOptions,
    clientFormat: WireFormat,
    fail: (e: InferenceError) => E
  ): Effect.Effect<UpstreamResponse, E> => {
    const { connection } = target
    if (connection.keyError) {
      return Effect.fail(fail(clientError(clientFormat, { status: 503, kind: "overloaded", message: `${connection.name}: ${connection.keyError}`, code: "provider_misconfigured" })))
    }
    const request = (policy: UrlPolicyFlags) => {
      const verdict = checkProviderUrl(connection.effectiveBaseUrl ?? "", policy)
      if (!verdict.ok) {
        return Effect.fail(fail(clientError(clientFormat, { status: 403, kind: "permission", message: `${connection.name}: ${verdict.reason}`, code: "provider_url_blocked" })))
      }
      const prepared = upstreamRequest(connection, format, body, {
        model: target.model,
        stream: options.stream,
        userAgent: http.userAgent,
        ...(options.op ? { op: options.op } : {}),
        ...(options.forward ? { forward: options.forward } : {})
      })
      // The connection's own limits first; a stream's body is watched by the stream watchdog instead.
      const own = connection.timeouts
      const headersTimeout = options.headersTimeoutMs ?? own?.headersMs ?? (options.stream ? timeouts.streamHeadersMs : timeouts.headersMs)
      const bodyIdleTimeout = options.stream ? undefined : (own?.idleMs ?? timeouts.bodyIdleMs)
      const toClient = transportError(clientFormat, connection)
      return Effect.mapError(
        http.request({
          ...prepared,
          headersTimeout,
          ...(bodyIdleTimeout !== undefined ? { bodyIdleTimeout } : {}),
          ...(options.readWhole ? { readWhole: true } : {}),
          ...(options.abortWhen ? { abortWhen: options.abortWhen } : {})
        }),
        (e) => fail(toClient(e))
      )
    }
    // The flags are almost always fresh: no effect to read them.
    const known = connections.peekUrlPolicy()
    return known ? request(known) : Effect.flatMap(connections.urlPolicy, request)
  }

  const send = (target: ResolvedTarget, format: FormatId, body: Record<string, unknown>, options: SendOptions, clientFormat: WireFormat) =>
    Effect.suspend(() => sendAs(target, format, body, options, clientFormat, (e) => e))

  /** An upstream error answer, read: the client's rendering and the resilience layer's description. */
  const readFailure = (res: UpstreamResponse, upstream: WireFormat, client: WireFormat): Effect.Effect<{ readonly error: InferenceError; readonly info: FailureInfo }> =>
    (res.bytes !== undefined || res.bodyError !== undefined
      ? Effect.succeed(res.bytes?.toString("utf8") ?? "")
      : readUpstreamBody(res.body, ERROR_BODY_MAX_BYTES).pipe(
          Effect.map((b) => b.toString("utf8")),
          Effect.orElseSucceed(() => "")
        )
    ).pipe(
      Effect.map((text) => {
        const parsed = tryJson(text)
        const decoded = upstream.decodeError(res.status, parsed, text)
        const info: FailureInfo = { status: res.status, kind: "http", message: decoded.message, code: decoded.code ?? null, headers: headerValue(res.headers), body: text.slice(0, 4096) }
        // Same format: the upstream's own error object is already what the client expects.
        const error =
          upstream.id === client.id && isErrorShape(upstream.id, parsed)
            ? new InferenceError({ status: res.status, kind: decoded.kind, code: decoded.code ?? null, message: decoded.message, headers: hintHeaders(res.headers), body: parsed })
            : clientError(client, decoded, hintHeaders(res.headers))
        return { error, info }
      })
    )

  const failure = (res: UpstreamResponse, upstream: WireFormat, client: WireFormat) => Effect.map(readFailure(res, upstream, client), (r) => r.error)

  return { sendAs, send, readFailure, failure }
}
