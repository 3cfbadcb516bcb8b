/**
 * Lingering close for answers sent before the request body has arrived (a 401, 413 or 400 given
 * early, or a GET that carries a body nobody reads). When the connection is to close after the
 * answer (the client sent `Connection: close`, or the server is shutting down), node destroys the
 * socket as soon as the answer is written; the client's body still in flight then makes the
 * kernel send a reset, and the client can lose the answer it was reading. Like nginx's
 * lingering close, the end of such an answer waits (a bounded time, a bounded size) for the rest
 * of the body, which is read and discarded.
 */
import type * as http from "node:http"

/** How long an answer's end waits for the rest of the body. */
export const LINGER_MS = 5_000
/** A body with more than this left to arrive is not waited for: the connection is cut as before. */
export const LINGER_BYTES = 64 * 1024 * 1024

const hasBody = (req: http.IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined
}

/** Installs the lingering end on `res` when it can matter: a body, and a connection that closes after the answer. */
export const lingerOnClose = (req: http.IncomingMessage, res: http.ServerResponse): void => {
  if (res.shouldKeepAlive || !hasBody(req)) return
  const declared = Number(req.headers["content-length"])
  if (Number.isFinite(declared) && declared > LINGER_BYTES) return
  const end = res.end
  res.end = function lingeringEnd(this: http.ServerResponse, ...args: Array<unknown>) {
    res.end = end
    if (req.complete || req.destroyed) return end.apply(res, args as never)
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      req.off("end", finish)
      req.off("close", finish)
      req.off("error", finish)
      end.apply(res, args as never)
    }
    const timer = setTimeout(finish, LINGER_MS)
    req.once("end", finish)
    req.once("close", finish)
    req.once("error", finish)
    // Whatever a handler left unread is discarded.
    req.removeAllListeners("data")
    req.resume()
    return res
  } as typeof res.end
}

/**
 * A body refused part-way through reading (over a size limit) must still get its answer. The
 * platform's body reader destroys the request stream when it stops reading, which destroys the
 * socket, and the kernel answers the client's body still in flight with a reset: the client gets
 * ECONNRESET instead of the 413 (a chunked body, whose size is known only as it arrives). On this
 * request, a `destroy()` without a reason while the body is still arriving drains the rest
 * instead (read and discarded: keep-alive then goes on; a connection closing after the answer
 * lingers as above); a destroy with a reason (the client went away, a parse error) is left as is.
 */
export const drainInsteadOfDestroy = (req: http.IncomingMessage): void => {
  if (!hasBody(req)) return
  const destroy = req.destroy
  req.destroy = function drainingDestroy(this: http.IncomingMessage, error?: Error) {
    if (error === undefined && !this.complete && !this.destroyed) {
      this.removeAllListeners("data")
      this.resume()
      return this
    }
    return destroy.call(this, error)
  } as typeof req.destroy
}
