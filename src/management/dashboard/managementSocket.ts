/**
 * Who may open a management WebSocket (the dashboard's live feed, the inspector feed): what may
 * use the management API, from the gateway's own pages only; a caller who may not is refused with
 * a JSON answer on the socket.
 */
import * as Effect from "effect/Effect"
import type * as http from "node:http"
import type * as net from "node:net"
import { SESSION_COOKIE } from "../../services/auth/AdminAuth.js"
import type { makeIdentify } from "../api/Auth.js"

/** A cookie's value in a Cookie header, undefined when absent or badly escaped. */
const cookieValue = (header: string | undefined, name: string): string | undefined => {
  if (!header) return undefined
  for (const part of header.split(";")) {
    const i = part.indexOf("=")
    if (i !== -1 && part.slice(0, i).trim() === name) {
      try {
        return decodeURIComponent(part.slice(i + 1).trim())
      } catch {
        return undefined
      }
    }
  }
  return undefined
}

/** The host name of a Host header (an IPv6 literal keeps its brackets). */
const hostname = (hostHeader: string): string =>
  hostHeader.startsWith("[") ? hostHeader.slice(0, hostHeader.indexOf("]") + 1) : hostHeader.split(":")[0]!

/**
 * A browser may open a WebSocket to any site, with the user's cookies: only a page of the
 * gateway itself may use the session. On the main port the Origin must be this host and port;
 * on the live port, this host name (the page was loaded from the main port). No Origin: not a
 * browser, the credentials decide.
 */
export const originAllowed = (req: http.IncomingMessage, samePort: boolean): boolean => {
  const origin = req.headers["origin"]
  if (origin === undefined) return true
  const host = req.headers["host"]
  if (!host) return false
  try {
    const o = new URL(origin)
    return samePort ? o.host === host : o.hostname === hostname(host)
  } catch {
    return false
  }
}

/** An upgrade refused with a JSON answer written to the socket itself (destroyed when it can no longer be written). */
export const refuse = (socket: net.Socket, status: number, text: string, message: string) => {
  const body = JSON.stringify({ _tag: status === 401 ? "Unauthorized" : status === 403 ? "Forbidden" : "NotFound", message })
  if (socket.writable)
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
    )
  else socket.destroy()
}

/**
 * Who may open a management WebSocket (`what`: "the live feed", "the inspector feed"): what may
 * use the management API (a session cookie, an admin key, this machine while requireLogin is
 * off). Refused with a JSON answer on the socket; `admitted` runs for a caller who may.
 */
export const admitManagementSocket = (
  identify: ReturnType<typeof makeIdentify>,
  runFork: (effect: Effect.Effect<void>) => unknown,
  req: http.IncomingMessage,
  socket: net.Socket,
  what: string,
  admitted: () => void
): void => {
  runFork(
    identify({
      method: "GET",
      headers: req.headers as Record<string, string | undefined>,
      sessionCookie: cookieValue(req.headers["cookie"], SESSION_COOKIE),
      source: req
    }).pipe(
      Effect.either,
      Effect.map((who) => {
        if (who._tag === "Left") return refuse(socket, who.left._tag === "Unauthorized" ? 401 : 403, who.left._tag, who.left.message)
        const id = who.right
        if (id.kind === "none")
          return refuse(
            socket,
            401,
            "Unauthorized",
            `${what} needs a dashboard session, an admin API key, or this machine with requireLogin off`
          )
        if (id.kind === "api-key" && !id.key.scopes.includes("admin"))
          return refuse(socket, 401, "Unauthorized", `this API key lacks the admin scope ${what} needs`)
        admitted()
      }),
      Effect.catchAllCause(() => Effect.sync(() => socket.destroy()))
    )
  )
}
