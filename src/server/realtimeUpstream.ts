/**
 * A realtime session's try on one candidate, as the guarded attempt (src/inference/fallback.ts)
 * makes it: a WebSocket handshake with the candidate's `/realtime?model=…` and its own key. A
 * refused or failed handshake is the candidate's failure (breaker, cooldown, next candidate); an
 * open socket is the session's upstream for as long as the session lasts (docs/realtime.md).
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type WebSocket from "ws"
import { AttemptFailed, type AttemptOutcome, attemptFailed } from "../kernel/attempts.js"
import { InferenceError } from "../kernel/errors.js"
import type { AttemptRequest } from "../inference/fallback.js"
import { isLoopbackHost } from "../platform/config/AppConfig.js"
import type { Candidate } from "../services/routing/types.js"
import { joinUrl, providerAuthHeaders } from "../upstream/client/auth.js"
import { oauthHeaders } from "../upstream/client/executors.js"

/** The beta protocol's header value (`OpenAI-Beta: realtime=v1`). */
export const BETA = "realtime=v1"

/** One session's connect, in the client's terms. */
export interface RealtimeRequest extends AttemptRequest {
  /** The client asked for the beta protocol: the upstream must take it. */
  readonly beta: boolean
  /** How long a handshake may take (ms). */
  readonly handshakeMs: number
}

/** A candidate that answered the handshake: its open socket. */
export interface RealtimeConnected extends AttemptOutcome {
  readonly socket: WebSocket
  /**
   * The events the upstream sent before the session took the socket over (its `session.created`
   * comes right after the handshake): call once to stop collecting and get them, in order.
   */
  readonly early: () => Array<{ readonly data: WebSocket.RawData; readonly isBinary: boolean }>
}

/** Refused before any try: the candidate cannot be spoken to over a realtime WebSocket at all. */
const unusable = (message: string, code = "provider_url_blocked") =>
  attemptFailed(new InferenceError({ status: 502, kind: "upstream", code, message }), undefined, true)

/**
 * The upstream's realtime URL: its base URL with `/realtime?model=…`, `https:` as `wss:`; `http:`
 * (as `ws:`) only for a server on loopback (a provider node on this machine), never in clear
 * over a network.
 */
export const realtimeUrl = (base: string, model: string): string | AttemptFailed => {
  let url: URL
  try {
    url = new URL(joinUrl(base, "/realtime"))
  } catch {
    return unusable(`the connection's base URL is not a URL`, "provider_misconfigured")
  }
  if (url.protocol === "https:" || url.protocol === "wss:") url.protocol = "wss:"
  else if ((url.protocol === "http:" || url.protocol === "ws:") && isLoopbackHost(url.hostname.replace(/^\[|\]$/g, "")))
    url.protocol = "ws:"
  else return unusable(`realtime upstreams are reached over wss: (or ws: on loopback), not ${url.protocol}//${url.host}`)
  url.searchParams.set("model", model)
  return url.toString()
}

/** The headers that authenticate the candidate's own key, as its HTTP calls do. */
const authOf = (c: Candidate): Record<string, string> => {
  const { connection } = c
  const key = connection.apiKey ? Redacted.value(connection.apiKey) : undefined
  if (connection.provider.oauth) return oauthHeaders(connection, connection.format, undefined)
  return providerAuthHeaders(connection.provider, connection.format, key)
}

/** The first KB of a refused handshake's body. */
const readSome = (res: import("node:http").IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    let text = ""
    res.setEncoding("utf8")
    res.on("data", (c: string) => {
      if (text.length < 1024) text += c
    })
    res.on("end", () => resolve(text.slice(0, 1024)))
    res.on("error", () => resolve(text.slice(0, 1024)))
  })

/** The upstream's error message in a refused handshake's JSON body, when it has one. */
const messageOf = (body: string): { readonly message?: string; readonly code?: string } => {
  try {
    const e = (JSON.parse(body) as { error?: { message?: unknown; code?: unknown } }).error
    return {
      ...(typeof e?.message === "string" ? { message: e.message } : {}),
      ...(typeof e?.code === "string" ? { code: e.code } : {})
    }
  } catch {
    return {}
  }
}

/** A session's try on one candidate: the handshake, its socket on success. */
export const connectRealtime = (
  request: RealtimeRequest,
  c: Candidate,
  _options: { readonly probe: boolean }
): Effect.Effect<RealtimeConnected, AttemptFailed> =>
  Effect.suspend(() => {
    const base = c.connection.effectiveBaseUrl
    if (!base) return Effect.fail(unusable(`connection ${c.connection.name} has no base URL`, "provider_misconfigured"))
    const url = realtimeUrl(base, c.model)
    if (url instanceof AttemptFailed) return Effect.fail(url)
    const where = `${c.connection.name} (${c.model})`
    // ws loads with the first realtime session (src/platform/http/lazyWebSocketServer.ts says why).
    return Effect.flatMap(
      Effect.promise(() => import("ws")),
      ({ default: WebSocketClient }) =>
        Effect.async<RealtimeConnected, AttemptFailed>((resume) => {
          const socket = new WebSocketClient(url, {
            headers: { ...authOf(c), ...(request.beta ? { "openai-beta": BETA } : {}) },
            handshakeTimeout: request.handshakeMs,
            perMessageDeflate: false,
            maxPayload: 64 * 1024 * 1024,
            followRedirects: false
          })
          let done = false
          const finish = (e: Effect.Effect<RealtimeConnected, AttemptFailed>) => {
            if (done) return
            done = true
            resume(e)
          }
          socket.once("open", () => {
            const held: Array<{ readonly data: WebSocket.RawData; readonly isBinary: boolean }> = []
            const hold = (data: WebSocket.RawData, isBinary: boolean) => held.push({ data, isBinary })
            socket.on("message", hold)
            const early = () => {
              socket.off("message", hold)
              return held
            }
            finish(Effect.succeed({ status: 200, usage: undefined, ttftMs: null, error: null, socket, early }))
          })
          socket.once("unexpected-response", (_req, res) => {
            const status = res.statusCode ?? 502
            void readSome(res).then((body) => {
              socket.terminate()
              const said = messageOf(body)
              const message = `${where} refused the realtime session: HTTP ${status}${said.message ? ` (${said.message})` : ""}`
              // A beta client's handshake refused as a bad request: the upstream does not take the beta.
              if (request.beta && status === 400)
                return finish(
                  Effect.fail(
                    attemptFailed(
                      new InferenceError({ status: 400, kind: "invalid_request", code: "realtime_beta_unsupported", message }),
                      undefined,
                      true
                    )
                  )
                )
              const retryAfter = res.headers["retry-after"]
              finish(
                Effect.fail(
                  attemptFailed(
                    new InferenceError({
                      status: 502,
                      kind: "upstream",
                      code: "upstream_error",
                      message
                    }),
                    {
                      status,
                      kind: "http",
                      message,
                      code: said.code ?? null,
                      body,
                      ...(typeof retryAfter === "string" ? { headers: { "retry-after": retryAfter } } : {})
                    }
                  )
                )
              )
            })
          })
          socket.once("error", (err) => {
            socket.terminate()
            const timeout = /timed out|timeout/i.test(err.message)
            const tls = /certificate|self.signed|SSL|TLS/i.test(err.message)
            const message = `${where} could not be reached for a realtime session: ${err.message}`
            const code = timeout ? "upstream_timeout" : tls ? "upstream_tls_error" : "upstream_unreachable"
            finish(
              Effect.fail(
                attemptFailed(new InferenceError({ status: timeout ? 504 : 502, kind: "upstream", code, message }), {
                  status: timeout ? 504 : 502,
                  kind: timeout ? "timeout" : tls ? "tls" : "unreachable",
                  message,
                  code
                })
              )
            )
          })
          return Effect.sync(() => {
            if (!done) {
              done = true
              socket.terminate()
            }
          })
        })
    )
  })
