/**
 * HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) of intercepted requests: what HAR
 * viewers (browsers' network panels, HTTP Toolkit, Charles) open. The inspector's own fields go in
 * `_`-prefixed members, which the format allows: `_source`, `_llm`, `_conversation`, `_annotation`.
 */
import { VERSION } from "../../kernel/version.js"
import type { CapturedBody, InterceptedRequest } from "./types.js"

const STATUS_TEXT: Readonly<Record<number, string>> = {
  200: "OK",
  201: "Created",
  204: "No Content",
  301: "Moved Permanently",
  302: "Found",
  304: "Not Modified",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  413: "Payload Too Large",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout"
}

const headerList = (headers: Readonly<Record<string, string>> | null) =>
  Object.entries(headers ?? {}).map(([name, value]) => ({ name, value }))

const cookiesOf = (header: string | undefined) =>
  (header ?? "")
    .split(";")
    .map((p) => p.trim())
    .filter((p) => p.includes("="))
    .map((p) => ({ name: p.slice(0, p.indexOf("=")), value: p.slice(p.indexOf("=") + 1) }))

const queryOf = (url: string) => {
  try {
    return [...new URL(url).searchParams].map(([name, value]) => ({ name, value }))
  } catch {
    return []
  }
}

const httpVersionOf = (v: string) => (v.startsWith("HTTP/") ? v : `HTTP/${v}`)

const content = (body: CapturedBody | null, headers: Readonly<Record<string, string>> | null) => ({
  size: body?.size ?? 0,
  mimeType: headers?.["content-type"] ?? "",
  ...(body ? { text: body.text, ...(body.encoding === "base64" ? { encoding: "base64" } : {}) } : {}),
  ...(body?.notice ? { comment: body.notice } : {})
})

/** One HAR entry. */
export const harEntry = (e: InterceptedRequest) => {
  const started = e.timings.startedAt
  const total = e.timings.totalMs ?? 0
  const wait = e.timings.ttfbMs ?? total
  const status = typeof e.status === "number" ? e.status : 0
  return {
    startedDateTime: new Date(started).toISOString(),
    time: Math.max(0, total),
    request: {
      method: e.method,
      url: e.url,
      httpVersion: httpVersionOf(e.httpVersion),
      cookies: cookiesOf(e.requestHeaders["cookie"]),
      headers: headerList(e.requestHeaders),
      queryString: queryOf(e.url),
      ...(e.requestBody ? { postData: { mimeType: e.requestHeaders["content-type"] ?? "", text: e.requestBody.text, params: [] } } : {}),
      headersSize: -1,
      bodySize: e.requestSize
    },
    response: {
      status,
      statusText: typeof e.status === "number" ? (STATUS_TEXT[e.status] ?? "") : e.status,
      httpVersion: httpVersionOf(e.httpVersion),
      cookies: [],
      headers: headerList(e.responseHeaders),
      content: content(e.responseBody, e.responseHeaders),
      redirectURL: e.responseHeaders?.["location"] ?? "",
      headersSize: -1,
      bodySize: e.responseSize ?? -1
    },
    cache: {},
    timings: { send: 0, wait: Math.max(0, wait), receive: Math.max(0, total - wait) },
    ...(e.annotation ? { comment: e.annotation } : {}),
    _id: e.id,
    _source: e.source,
    _detectedKind: e.detectedKind,
    ...(e.llm ? { _llm: e.llm } : {}),
    ...(e.conversation ? { _conversation: e.conversation } : {}),
    ...(e.error ? { _error: e.error } : {}),
    ...(e.processName ? { _process: { pid: e.pid, name: e.processName } } : {})
  }
}

/** A HAR 1.2 document of `entries` (oldest first). */
export const toHar = (entries: ReadonlyArray<InterceptedRequest>, comment?: string) => ({
  log: {
    version: "1.2",
    creator: { name: "gateway traffic inspector", version: VERSION },
    entries: entries.map(harEntry),
    ...(comment ? { comment } : {})
  }
})
