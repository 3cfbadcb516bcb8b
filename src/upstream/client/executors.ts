import * as Redacted from "effect/Redacted"
import type { Readable } from "node:stream"
import type { FormatId } from "../../domain/canonical.js"
import type { Connection } from "../providers/Connections.js"
import { ANTHROPIC_VERSION, compatHeaders, joinUrl, providerAuthHeaders } from "./auth.js"
import type { UpstreamRequest } from "./UpstreamHttp.js"
import { encodeComponent } from "../../kernel/untrusted.js"

export type UpstreamOperation = "generate" | "count_tokens" | "embed"

/**
 * A call outside the five chat families' conventions (media endpoints, job polling, downloads):
 * the path after the connection's base URL (query included) or an absolute URL the upstream
 * itself returned, the method, and the body as JSON or as bytes with their content type.
 * Authenticated the provider's way (its `authStyle`), whatever its chat format.
 */
export interface CustomCall {
  readonly path: string
  readonly method?: "GET" | "POST" | "DELETE"
  readonly json?: Record<string, unknown>
  /** Bytes with their content type: in memory, or streamed (an upload read from disk as the upstream takes it; `length` then sets
   * Content-Length). */
  readonly bytes?: { readonly data: Buffer | Readable; readonly contentType: string; readonly length?: number }
  readonly accept?: string
  /** An absolute URL (a result's download link): still sent with the connection's credentials, so it must pass the URL policy too. */
  readonly url?: string
}

const STREAM_ACCEPT: Record<FormatId, string> = {
  "openai-chat": "text/event-stream",
  "openai-responses": "text/event-stream",
  anthropic: "text/event-stream",
  gemini: "text/event-stream",
  ollama: "application/x-ndjson"
}

const path = (format: FormatId, op: UpstreamOperation, model: string, stream: boolean): string => {
  const m = encodeComponent(model)
  switch (format) {
    case "openai-chat":
      return op === "embed" ? "/embeddings" : "/chat/completions"
    case "openai-responses":
      return op === "embed" ? "/embeddings" : "/responses"
    case "anthropic":
      return op === "count_tokens" ? "/v1/messages/count_tokens" : "/v1/messages"
    case "gemini":
      return op === "count_tokens"
        ? `/v1beta/models/${m}:countTokens`
        : op === "embed"
          ? `/v1beta/models/${m}:batchEmbedContents`
          : `/v1beta/models/${m}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`
    case "ollama":
      return op === "embed" ? "/api/embed" : "/api/chat"
  }
}

/**
 * The HTTP request for one upstream call: URL from the connection's base URL and the family's
 * path convention (base URLs include `/v1` for OpenAI-compatible upstreams and are bare origins
 * for anthropic, gemini and ollama), the family's auth headers, and the body. Gemini takes the
 * model in the path, the others in the body.
 */
export const upstreamRequest = (
  connection: Connection,
  format: FormatId,
  body: Record<string, unknown>,
  options: {
    readonly model: string
    readonly stream: boolean
    readonly op?: UpstreamOperation
    readonly userAgent: string
    /** Client headers passed on unchanged (`anthropic-beta` between Anthropic clients and upstreams). */
    readonly forward?: Readonly<Record<string, string>>
  }
): UpstreamRequest => {
  const op = options.op ?? "generate"
  const payload = format === "gemini" ? withoutModel(body) : { ...body, model: options.model }
  if (format === "ollama" && op === "generate") payload["stream"] = options.stream
  const compat = connection.provider.clientCompat
  if (compat?.systemPreamble && format === "anthropic" && op === "generate")
    payload["system"] = withPreamble(payload["system"], compat.systemPreamble)
  return {
    url: joinUrl(connection.effectiveBaseUrl ?? "", path(format, op, options.model, options.stream)),
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: options.stream ? STREAM_ACCEPT[format] : "application/json",
      "accept-encoding": "identity",
      "user-agent": options.userAgent,
      ...options.forward,
      ...(connection.provider.oauth
        ? oauthHeaders(connection, format, options.forward)
        : providerAuthHeaders(connection.provider, format, connection.apiKey ? Redacted.value(connection.apiKey) : undefined)),
      ...(compat
        ? compatHeaders(connection.provider, connection.apiKey ? Redacted.value(connection.apiKey) : undefined, options.forward)
        : {})
    },
    body: JSON.stringify(payload)
  }
}

/**
 * An OAuth connection's headers: its access token as `Authorization: Bearer` whatever the wire
 * format (an Anthropic upstream takes OAuth tokens that way, not as `x-api-key`), and the
 * provider's extra headers (Anthropic's OAuth beta), merged with a client's own `anthropic-beta`.
 */
export const oauthHeaders = (
  connection: Connection,
  format: FormatId,
  forward: Readonly<Record<string, string>> | undefined
): Record<string, string> => {
  const headers: Record<string, string> = {}
  if (connection.apiKey) headers["authorization"] = `Bearer ${Redacted.value(connection.apiKey)}`
  if (format === "anthropic") headers["anthropic-version"] = ANTHROPIC_VERSION
  for (const [name, value] of Object.entries(connection.provider.oauth?.upstreamHeaders ?? {})) {
    const client = forward?.[name]
    headers[name] =
      client &&
      !client
        .split(",")
        .map((s) => s.trim())
        .includes(value)
        ? `${value},${client}`
        : value
  }
  return headers
}

/** The HTTP request for a `CustomCall` to a connection. */
export const customRequest = (connection: Connection, call: CustomCall, userAgent: string): UpstreamRequest => {
  const key = connection.apiKey ? Redacted.value(connection.apiKey) : undefined
  const style = connection.provider.authStyle
  const auth: Record<string, string> =
    key === undefined || style === "none"
      ? {}
      : connection.provider.oauth
        ? oauthHeaders(connection, connection.format, undefined)
        : style === "x-goog-api-key"
          ? { "x-goog-api-key": key }
          : style === "x-api-key"
            ? { "x-api-key": key }
            : style === "xi-api-key"
              ? { "xi-api-key": key }
              : style === "x-subscription-token"
                ? { "x-subscription-token": key }
                : style === "token"
                  ? { authorization: `Token ${key}` }
                  : { authorization: `Bearer ${key}` }
  const body = call.json ? JSON.stringify(call.json) : call.bytes?.data
  return {
    url: call.url ?? joinUrl(connection.effectiveBaseUrl ?? "", call.path),
    method: call.method ?? (body === undefined ? "GET" : "POST"),
    headers: {
      ...(call.json
        ? { "content-type": "application/json" }
        : call.bytes
          ? {
              "content-type": call.bytes.contentType,
              ...(call.bytes.length !== undefined ? { "content-length": String(call.bytes.length) } : {})
            }
          : {}),
      accept: call.accept ?? "application/json",
      "accept-encoding": "identity",
      "user-agent": userAgent,
      ...(connection.provider.format === "anthropic" && style === "x-api-key" ? { "anthropic-version": ANTHROPIC_VERSION } : {}),
      ...auth,
      ...(connection.provider.node ? providerAuthHeaders(connection.provider, connection.provider.format, key) : {}),
      ...compatHeaders(connection.provider, key, undefined)
    },
    ...(body !== undefined ? { body } : {})
  }
}

/** An Anthropic `system` with `preamble` as its first text block (once). */
export const withPreamble = (system: unknown, preamble: string): unknown => {
  const block = { type: "text", text: preamble }
  if (system === undefined || system === null || system === "") return [block]
  if (typeof system === "string") return system.startsWith(preamble) ? system : [block, { type: "text", text: system }]
  if (Array.isArray(system)) {
    const first = system[0] as { text?: unknown } | undefined
    return typeof first?.text === "string" && first.text.startsWith(preamble) ? system : [block, ...system]
  }
  return system
}

const withoutModel = (body: Record<string, unknown>): Record<string, unknown> => {
  const { model: _model, stream: _stream, ...rest } = body
  return rest
}
