/**
 * Why an upstream call failed before any answer (src/upstream/client/UpstreamHttp.ts): the
 * transport error and its kind, read from undici's and the connector's errors.
 */
import * as Data from "effect/Data"
import { errors as undiciErrors } from "./undici.js"

/** The upstream could not be reached or did not answer in time; no HTTP status exists. */
export class UpstreamTransportError extends Data.TaggedError("UpstreamTransportError")<{
  /**
   * `blocked`: the outbound policy (SSRF guard) refused the address; nothing was sent.
   * `proxy_family`: the call's proxy has no address in its pinned family (docs/egress.md).
   * `tls`: the TLS handshake failed (a certificate that is expired, for another name, not
   * trusted; a protocol the peer refused); nothing was sent.
   */
  readonly kind: "connect" | "timeout" | "network" | "blocked" | "proxy_family" | "tls"
  readonly message: string
}> {}

/** Error codes of a failed TLS handshake: node's (`ERR_TLS_CERT_ALTNAME_INVALID`, `ERR_SSL_...`) and OpenSSL's verify results
 * (`CERT_HAS_EXPIRED`, `DEPTH_ZERO_SELF_SIGNED_CERT`...). */
const TLS_CODES = /^(?:ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH$|EPROTO$)/

/**
 * A host name the resolver could not turn into an address: the system resolver's codes
 * (ENOTFOUND: no such name or no address; EAI_AGAIN, EAI_FAIL: the DNS server failed or did not
 * answer) and a DNS client's (ENODATA, ESERVFAIL, ETIMEOUT).
 */
const DNS_FAILED = "could not be resolved (the DNS server failed or did not answer)"
const DNS_CODES: ReadonlyMap<string, string> = new Map([
  ["ENOTFOUND", "does not resolve"],
  ["ENODATA", "does not resolve"],
  ["EAI_AGAIN", DNS_FAILED],
  ["EAI_FAIL", DNS_FAILED],
  ["ESERVFAIL", DNS_FAILED],
  ["ETIMEOUT", DNS_FAILED]
])

/** The message of a name that did not resolve: the code first, then the name and what happened. */
const unresolved = (code: string, message: string, hostname: string | undefined): string => {
  const name = hostname ?? new RegExp(`${code}\\s+(\\S+)`).exec(message)?.[1]
  return `${code}: ${name ? `the name ${name} ` : ""}${DNS_CODES.get(code)} (${message})`
}

/** What a failed upstream call was, from the error undici or the connector gave. */
export const classify = (cause: unknown): UpstreamTransportError => {
  const err = cause as {
    code?: string
    message?: string
    hostname?: string
    cause?: { code?: string; message?: string; hostname?: string }
  }
  const code = err.code ?? err.cause?.code ?? ""
  if (code === "ESSRF_BLOCKED")
    return new UpstreamTransportError({ kind: "blocked", message: err.message ?? err.cause?.message ?? "blocked by the outbound policy" })
  if (code === "PROXY_FAMILY_UNAVAILABLE")
    return new UpstreamTransportError({
      kind: "proxy_family",
      message: err.message ?? err.cause?.message ?? "the proxy has no address of its pinned family"
    })
  const message = err.cause?.message ?? err.message ?? String(cause)
  if (cause instanceof undiciErrors.HeadersTimeoutError) {
    return new UpstreamTransportError({ kind: "timeout", message: "no response headers from upstream in time" })
  }
  if (cause instanceof undiciErrors.BodyTimeoutError) {
    return new UpstreamTransportError({ kind: "timeout", message })
  }
  if (cause instanceof undiciErrors.ConnectTimeoutError || code === "UND_ERR_CONNECT_TIMEOUT") {
    return new UpstreamTransportError({ kind: "timeout", message: `connect timeout: ${message}` })
  }
  if (TLS_CODES.test(code)) return new UpstreamTransportError({ kind: "tls", message: `${code}: ${message}` })
  if (DNS_CODES.has(code))
    return new UpstreamTransportError({ kind: "connect", message: unresolved(code, message, err.hostname ?? err.cause?.hostname) })
  // Reset before any answer (an upstream that crashed or restarted, a middlebox): nothing was answered, another target may.
  if (code === "ECONNRESET")
    return new UpstreamTransportError({
      kind: "connect",
      message: `${code}: the upstream reset the connection before answering (${message})`
    })
  if (["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH"].includes(code)) {
    return new UpstreamTransportError({ kind: "connect", message: `${code}: ${message}` })
  }
  return new UpstreamTransportError({ kind: "network", message: code ? `${code}: ${message}` : message })
}
