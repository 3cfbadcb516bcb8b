import { isLoopbackHost, throughTunnel } from "../config/AppConfig.js"
import type * as http from "node:http"

/** A request header's first value, trimmed; undefined when absent or blank. */
export const trimmedHeader = (req: http.IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name]
  return (Array.isArray(v) ? v[0] : v)?.trim() || undefined
}

/** `Bearer` and the whitespace after it. */
const BEARER_SCHEME = /^Bearer\s/i
const WHITESPACE = /\s/
/** A token never spans lines. */
const LINE_BREAK = /[\n\r\u2028\u2029]/

/**
 * The token of an `Authorization: Bearer <token>` header value: the scheme, any whitespace, then
 * the rest of the trimmed value on one line. Read without a regular expression's match (which made
 * a match array and a copy of the token): every inference request reads it.
 */
export const bearerToken = (authorization: string | undefined): string | undefined => {
  if (!authorization) return undefined
  const value = authorization.trim()
  if (!BEARER_SCHEME.test(value)) return undefined
  let start = "Bearer".length + 1
  while (start < value.length && WHITESPACE.test(value[start]!)) start++
  const token = value.slice(start)
  return token !== "" && !LINE_BREAK.test(token) ? token : undefined
}

/**
 * The client address; `X-Forwarded-For` only when the operator trusts the proxy in front, and
 * then its rightmost entry: the one that proxy appended (entries to its left are whatever the
 * client claimed).
 */
export const clientAddress = (req: http.IncomingMessage, trustProxy: boolean): string => {
  // Through one of the gateway's own tunnels the socket is the helper's (loopback): the client is
  // the address the tunnel's edge appended to X-Forwarded-For (each edge appends, so the rightmost
  // entry is not the client's claim), else the quick tunnel's Cf-Connecting-Ip. Counting every
  // tunnel client as 127.0.0.1 would let a stranger's failed logins slow down the local admin.
  // Only from a loopback socket: a tunnel's helper runs on this machine, so a marker header on a
  // connection from elsewhere is a client's own claim and says nothing about its address.
  const socket = req.socket.remoteAddress
  const tunnel = socket !== undefined && isLoopbackHost(socket) && throughTunnel(req.headers)
  if (trustProxy || tunnel) {
    const fwd = req.headers["x-forwarded-for"]
    const last = (Array.isArray(fwd) ? fwd.join(",") : fwd)?.split(",").pop()?.trim()
    if (last) return last
    const cf = tunnel ? trimmedHeader(req, "cf-connecting-ip") : undefined
    if (cf) return cf
  }
  return socket ?? "unknown"
}

const HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/

/**
 * The origin a client used to reach this server, for absolute URLs in answers: the `Host`
 * header when it is a plain host name or address (else the local socket's address), `https`
 * when the socket is TLS or, with trusted proxy headers, `X-Forwarded-Proto` says so.
 */
export const requestOrigin = (req: http.IncomingMessage, trustProxy: boolean): string => {
  const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true
  const proto = encrypted || (trustProxy && trimmedHeader(req, "x-forwarded-proto")?.toLowerCase() === "https") ? "https" : "http"
  const host = trimmedHeader(req, "host")
  if (host !== undefined && HOST.test(host)) return `${proto}://${host}`
  const address = req.socket.localAddress ?? "127.0.0.1"
  return `${proto}://${address.includes(":") ? `[${address}]` : address}:${req.socket.localPort ?? 20128}`
}
