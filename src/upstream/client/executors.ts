import * as Redacted from "effect/Redacted"
import type { Readable } from "node:stream"
import type { FormatId } from "../../domain/canonical.js"
import type { Connection } from "../providers/Connections.js"
import { ANTHROPIC_VERSION, compatHeaders, joinUrl, providerAuthHeaders } from "./auth.js"
import { shareHeaders, type UpstreamRequest } from "./UpstreamHttp.js"
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
  switch (format) {
    case "openai-chat":
      return op === "embed" ? "/embeddings" : "/chat/completions"
    case "openai-responses":
      return op === "embed" ? "/embeddings" : "/responses"
    case "anthropic":
      return op === "count_tokens" ? "/v1/messages/count_tokens" : "/v1/messages"
    case "gemini": {
      const m = encodeComponent(model)
      return op === "count_tokens"
        ? `/v1beta/models/${m}:countTokens`
        : op === "embed"
          ? `/v1beta/models/${m}:batchEmbedContents`
          : `/v1beta/models/${m}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`
    }
    case "ollama":
      return op === "embed" ? "/api/embed" : "/api/chat"
  }
}

/**
 * What every call to one connection shares, made once per Connection object (a snapshot rebuild
 * makes new ones; a changed provider, key, base URL or user agent is noticed as well): its URLs by
 * path (Gemini's generate URLs, whose path names the model, by model and stream; up to MAX_URLS in
 * each map), and its headers by format and stream when the request changes none of them (no client header forwarded, no OAuth token).
 * The request path then builds neither a URL nor a header object. The cached headers are never
 * changed: UpstreamHttp hands a proxy's dispatcher (which adds `host` to what it gets) a copy.
 */
interface Shared {
  readonly provider: Connection["provider"]
  readonly apiKey: Connection["apiKey"]
  readonly base: string
  readonly userAgent: string
  readonly urls: Map<string, string>
  /** Gemini's generate URLs by model, as `whole` and `streamed` below hold headers. */
  readonly geminiWhole: Map<string, string>
  readonly geminiStreamed: Map<string, string>
  readonly whole: Map<FormatId, Record<string, string>>
  readonly streamed: Map<FormatId, Record<string, string>>
}

const sharedBy = new WeakMap<Connection, Shared>()

const sharedOf = (connection: Connection, userAgent: string): Shared => {
  const base = connection.effectiveBaseUrl ?? ""
  let s = sharedBy.get(connection)
  if (
    s === undefined ||
    s.provider !== connection.provider ||
    s.apiKey !== connection.apiKey ||
    s.base !== base ||
    s.userAgent !== userAgent
  ) {
    s = {
      provider: connection.provider,
      apiKey: connection.apiKey,
      base,
      userAgent,
      urls: new Map(),
      geminiWhole: new Map(),
      geminiStreamed: new Map(),
      whole: new Map(),
      streamed: new Map()
    }
    sharedBy.set(connection, s)
  }
  return s
}

/** The headers of a call in `format`: content negotiation, the user agent, the client's forwarded headers, then authentication. */
const requestHeaders = (
  connection: Connection,
  format: FormatId,
  stream: boolean,
  userAgent: string,
  forward: Readonly<Record<string, string>> | undefined
): Record<string, string> => {
  const compat = connection.provider.clientCompat
  return {
    "content-type": "application/json",
    accept: stream ? STREAM_ACCEPT[format] : "application/json",
    "accept-encoding": "identity",
    "user-agent": userAgent,
    ...forward,
    ...(connection.provider.oauth
      ? oauthHeaders(connection, format, forward)
      : providerAuthHeaders(connection.provider, format, connection.apiKey ? Redacted.value(connection.apiKey) : undefined)),
    ...(compat ? compatHeaders(connection.provider, connection.apiKey ? Redacted.value(connection.apiKey) : undefined, forward) : {})
  }
}

/**
 * The HTTP request for one upstream call: URL from the connection's base URL and the family's
 * path convention (base URLs include `/v1` for OpenAI-compatible upstreams and are bare origins
 * for anthropic, gemini and ollama), the family's auth headers, and the body. Gemini takes the
 * model in the path, the others in the body. URL and headers come from the connection's `Shared`
 * when the request changes neither.
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
  // The Gemini encoder sets neither member, so its body is sent as it is (nothing below changes a Gemini payload).
  const payload =
    format !== "gemini"
      ? { ...body, model: options.model }
      : body["model"] === undefined && body["stream"] === undefined
        ? body
        : withoutModel(body)
  if (format === "ollama" && op === "generate") payload["stream"] = options.stream
  const compat = connection.provider.clientCompat
  if (compat?.systemPreamble && format === "anthropic" && op === "generate")
    payload["system"] = withPreamble(payload["system"], compat.systemPreamble)
  const shared = sharedOf(connection, options.userAgent)
  const url =
    format === "gemini" && op === "generate"
      ? geminiUrl(shared, options.model, options.stream)
      : urlOf(shared, path(format, op, options.model, options.stream))
  let headers: Record<string, string> | undefined
  if (options.forward === undefined && !connection.provider.oauth) {
    const byFormat = options.stream ? shared.streamed : shared.whole
    headers = byFormat.get(format)
    if (headers === undefined) {
      headers = shareHeaders(requestHeaders(connection, format, options.stream, options.userAgent, undefined))
      byFormat.set(format, headers)
    }
  } else headers = requestHeaders(connection, format, options.stream, options.userAgent, options.forward)
  return { url, method: "POST", headers, body: JSON.stringify(payload) }
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

/** How many URLs a connection keeps in each map (Gemini's name the model: a connection serves a few; past this they are built each time). */
const MAX_URLS = 64

const urlOf = (shared: Shared, route: string): string => {
  let url = shared.urls.get(route)
  if (url === undefined) {
    url = joinUrl(shared.base, route)
    if (shared.urls.size < MAX_URLS) shared.urls.set(route, url)
  }
  return url
}

/** A Gemini generate URL, the same string for every request to one model (no path built, no new string hashed downstream). */
const geminiUrl = (shared: Shared, model: string, stream: boolean): string => {
  const byModel = stream ? shared.geminiStreamed : shared.geminiWhole
  let url = byModel.get(model)
  if (url === undefined) {
    url = joinUrl(shared.base, path("gemini", "generate", model, stream))
    if (byModel.size < MAX_URLS) byModel.set(model, url)
  }
  return url
}

const withoutModel = (body: Record<string, unknown>): Record<string, unknown> => {
  const { model: _model, stream: _stream, ...rest } = body
  return rest
}
