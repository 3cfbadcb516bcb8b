import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { Connection } from "../providers/Connections.js"
import { joinUrl, upstreamAuthHeaders } from "./auth.js"
import type { UpstreamHttpShape, UpstreamResponse, UpstreamTransportError } from "./UpstreamHttp.js"

/**
 * Executor for OpenAI-compatible chat completions upstreams: `{baseUrl}/chat/completions`
 * (the base URL includes `/v1`, as the OpenAI SDK's does), bearer auth.
 */
export const sendOpenAiChat = (
  http: UpstreamHttpShape,
  connection: Connection,
  body: string,
  stream: boolean
): Effect.Effect<UpstreamResponse, UpstreamTransportError> =>
  http.request({
    url: joinUrl(connection.effectiveBaseUrl ?? "", "/chat/completions"),
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: stream ? "text/event-stream" : "application/json",
      "accept-encoding": "identity",
      "user-agent": http.userAgent,
      ...upstreamAuthHeaders(
        connection.provider.authStyle,
        connection.provider.format,
        connection.apiKey ? Redacted.value(connection.apiKey) : undefined
      )
    },
    body
  })
