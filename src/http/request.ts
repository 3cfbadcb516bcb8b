import type * as http from "node:http"

/** A request header's first value, trimmed; undefined when absent or blank. */
export const trimmedHeader = (req: http.IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name]
  return (Array.isArray(v) ? v[0] : v)?.trim() || undefined
}

/** The token of an `Authorization: Bearer <token>` header value. */
export const bearerToken = (authorization: string | undefined): string | undefined => {
  const m = authorization ? /^Bearer\s+(.+)$/i.exec(authorization.trim()) : null
  return m ? m[1]!.trim() : undefined
}

/**
 * The client address; `X-Forwarded-For` only when the operator trusts the proxy in front, and
 * then its rightmost entry: the one that proxy appended (entries to its left are whatever the
 * client claimed).
 */
export const clientAddress = (req: http.IncomingMessage, trustProxy: boolean): string => {
  if (trustProxy) {
    const fwd = req.headers["x-forwarded-for"]
    const last = (Array.isArray(fwd) ? fwd.join(",") : fwd)?.split(",").pop()?.trim()
    if (last) return last
  }
  return req.socket.remoteAddress ?? "unknown"
}
