/**
 * A request body nobody reads must never cost the client its answer: the answer goes out at once, then the rest of the body
 * is read and dropped (bounded) instead of the socket being closed on it, which the client would see as a reset. Installed
 * by the server on every connection and request of both planes (docs/internals.md, "Bodies nobody reads"; docs/errors.md).
 */
import * as http from "node:http"
import type * as net from "node:net"

/** The longest pause in what is read and dropped after an answer. */
export const LINGER_MS = 5_000
/** The most read and dropped after an answer; a body with more than this left is cut after its answer. */
export const LINGER_BYTES = 64 * 1024 * 1024
/** How often what is being dropped is checked for progress and size. */
const TICK_MS = 250

/**
 * Watches bytes being read and dropped (`read`, a running count: a body node itself drops
 * arrives without events): `over()` once more than LINGER_BYTES were read past its value now,
 * or none for LINGER_MS. Returns the function that stops watching.
 */
const bound = (read: () => number, over: () => void): (() => void) => {
  const limit = read() + LINGER_BYTES
  let seen = read()
  let still = Date.now()
  const timer = setInterval(() => {
    const now = read()
    if (now > limit) {
      clearInterval(timer)
      return over()
    }
    if (now !== seen) {
      seen = now
      still = Date.now()
    } else if (Date.now() - still >= LINGER_MS) {
      clearInterval(timer)
      over()
    }
  }, TICK_MS)
  timer.unref()
  return () => clearInterval(timer)
}

/** Destroys `socket` once what was written to it has gone out. */
const closeWhenWritten = (socket: net.Socket): void => {
  if (socket.writableFinished || socket.destroyed) socket.destroy()
  else socket.once("finish", () => socket.destroy())
}

/** Sockets closing with a linger (their side ended, the client's still read and dropped). */
const lingeringSockets = new WeakSet<net.Socket>()

/**
 * Ends the gateway's side now (after what is written) and closes the socket once the client has
 * closed its side, or a bound was passed; meanwhile what arrives is read (and dropped by the
 * parser or the request it belongs to).
 */
const lingerThenClose = (socket: net.Socket): void => {
  if (lingeringSockets.has(socket) || socket.destroyed) return
  lingeringSockets.add(socket)
  let stop = () => {}
  const close = () => {
    stop()
    socket.off("end", close)
    socket.off("close", close)
    closeWhenWritten(socket)
  }
  socket.end()
  if (socket.readableEnded) return close()
  stop = bound(() => socket.bytesRead, close)
  socket.once("end", close)
  socket.once("close", close)
  socket.resume()
}

/**
 * On a new connection: node closes a connection after its last answer with
 * `socket.destroySoon()` (an end, then a destroy once written); here the end goes at once and
 * the destroy waits for the client's side (`lingerThenClose`).
 */
export const lingerOnClose = (socket: net.Socket): void => {
  socket.destroySoon = function lingeringClose(this: net.Socket) {
    lingerThenClose(this)
  }
}

const hasBody = (req: http.IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined
}

/** Keep-alive connections reading and dropping the rest of a body after its answer. */
const draining = new WeakSet<net.Socket>()

/** Whether the body has been read to its end (or its request is gone): nothing is left to wait for. */
const settled = (req: http.IncomingMessage): boolean => req.readableEnded || req.destroyed

/** A request with a body (`lingering`): where its body began in its socket's bytes, near enough (the first read may hold some). */
interface LingeringRequest extends http.IncomingMessage {
  lingerFrom?: number
}

/**
 * On a request with a body: once its answer is written, what is left of the body is read and
 * dropped, whoever listened before (a reader left paused would stall the connection). On a
 * keep-alive connection past a bound (or with more declared than the bound), and on a closing
 * one with more declared than the bound, the connection is closed after the answer instead.
 * Per request this costs two fields on the request and a listener, both functions made once
 * (`drainingDestroy`, `afterAnswer`): the closures are made only when a body is left after its answer.
 */
export const lingering = (req: http.IncomingMessage, res: http.ServerResponse): void => {
  if (!hasBody(req)) return
  req.destroy = drainingDestroy as typeof req.destroy
  ;(req as LingeringRequest).lingerFrom = req.socket.bytesRead
  // Listeners run in order: node's own (which closes the connection, or keeps it for the next
  // request) was added before the request was handed over, so this one runs after it. The
  // answer finishes once: no need to remove it.
  res.on("finish", afterAnswer)
}

/** After the answer (`this`) to a request with a body: what is left of the body is read and dropped, bounded. */
function afterAnswer(this: http.ServerResponse): void {
  const req: LingeringRequest = this.req
  if (settled(req)) return
  const socket: net.Socket = req.socket
  const start = req.lingerFrom ?? socket.bytesRead
  // Body bytes pulled from the socket so far.
  const received = () => socket.bytesRead - start
  const cut = () => {
    if (socket.destroyed) return
    socket.end()
    closeWhenWritten(socket)
  }
  const declared = Number(req.headers["content-length"])
  if (Number.isFinite(declared) && declared - received() > LINGER_BYTES) return cut()
  req.removeAllListeners("data")
  req.resume()
  // Closing: the connection's linger bounds it.
  if (lingeringSockets.has(socket)) return
  draining.add(socket)
  let stop = () => {}
  const whole = () => {
    stop()
    draining.delete(socket)
    req.off("end", whole)
    req.off("close", whole)
    socket.off("close", whole)
  }
  stop = bound(received, () => {
    whole()
    cut()
  })
  req.once("end", whole)
  req.once("close", whole)
  // After its answer a request is no longer the connection's: its closing does not end the request.
  socket.once("close", whole)
}

/** A request's own `destroy` (the stream's), which `drainingDestroy` stands in front of. */
const streamDestroy = http.IncomingMessage.prototype.destroy

/**
 * A body refused part-way (the platform's body reader over its limit destroys the request, and with it the socket): a
 * `destroy()` without a reason before the body's end drains the rest instead, so the 413 still reaches the client.
 */
function drainingDestroy(this: http.IncomingMessage, error?: Error): http.IncomingMessage {
  if (error === undefined && !settled(this)) {
    this.removeAllListeners("data")
    this.resume()
    return this
  }
  return streamDestroy.call(this, error)
}

/** Connections whose refused request was seen to: each further piece of it fails to parse again. */
const refused = new WeakSet<net.Socket>()

/** Node's own statuses for what its parser refuses (a 400 for anything else). */
const REFUSED_STATUS: Readonly<Record<string, number>> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408
}

/**
 * The server's `clientError` listener, in place of node's bare status and immediate destroy: what the parser refused is
 * answered in OpenAI's error shape with `Connection: close` (or, when it belongs to the request being answered, follows that
 * answer), then the connection closes with a linger (docs/internals.md, "Bodies nobody reads").
 */
export const answerRefused = (error: Error & { code?: string; reason?: string; rawPacket?: unknown }, socket: net.Socket): void => {
  if (refused.has(socket) || lingeringSockets.has(socket)) return
  refused.add(socket)
  // The client went away (or the socket is gone): nothing to answer.
  if (error.code === "ECONNRESET" || socket.destroyed) return void socket.destroy()
  const inFlight = (socket as { _httpMessage?: http.ServerResponse | null })._httpMessage
  if (inFlight && !inFlight.writableFinished && !inFlight.destroyed) {
    // The client closed its side in the middle of that request: it is over (node's way, which
    // aborts the request for its handler).
    if (!inFlight.req.complete && socket.readableEnded) return void socket.destroy()
    if (inFlight.req.complete) {
      // After it node either closes the connection (a linger, `lingerOnClose`) or keeps it: closed here.
      inFlight.once("finish", () => setImmediate(() => lingerThenClose(socket)))
      inFlight.once("close", () => {
        if (!inFlight.writableFinished) socket.destroy()
      })
      return
    }
    // Its own body is malformed (a broken chunk): answered below unless its answer has begun; its
    // handler's read ends with the connection.
    if (inFlight.headersSent) return lingerThenClose(socket)
  }
  // Bytes after `Connection: close`, or a body already answered (malformed, or cut by the
  // client's close): that request had its answer.
  if (!socket.writable || error.code === "HPE_CLOSED_CONNECTION" || draining.has(socket)) return lingerThenClose(socket)
  const status = REFUSED_STATUS[error.code ?? ""] ?? 400
  const why = typeof error.reason === "string" && /^[\x20-\x7e]{1,80}$/.test(error.reason) ? `: ${error.reason}` : ""
  const message =
    status === 408
      ? "the request did not arrive in time"
      : status === 431
        ? "the request's headers are too large"
        : `the request is not valid HTTP/1.1 (${error.code ?? "parse error"}${why})`
  const body = JSON.stringify({
    error: { message, type: "invalid_request_error", code: status === 408 ? "request_timeout" : "malformed_request", param: null }
  })
  // An answer to HEAD has no body (its client would read one as the next answer): the bytes the
  // parser refused begin with the request line when the request line is what it refused.
  const head = Buffer.isBuffer(error.rawPacket) && /^(\r\n)*HEAD /.test(error.rawPacket.subarray(0, 16).toString("latin1"))
  socket.write(
    head
      ? `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nconnection: close\r\n\r\n`
      : `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  )
  lingerThenClose(socket)
}
