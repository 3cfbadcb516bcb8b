/**
 * One Responses WebSocket's session: its conversation, its frames answered one after another,
 * `response.cancel` and the socket's close stopping the response in progress.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as http from "node:http"
import type { WebSocket } from "ws"
import { jsonTooDeep, TOO_DEEP_MESSAGE } from "../kernel/untrusted.js"
import { obj, str, tryJson } from "../upstream/formats/common.js"
import { ResponseStore } from "../inference/ResponseStore.js"
import { prewarm, type RespondDeps, respond, type SocketConn } from "./responsesWsResponse.js"
import type { SocketAnswer } from "./responsesWsSink.js"

/** What a session needs of the layer: the fibers its frames run in, the open sockets, and what `respond` needs. */
export interface SessionDeps extends RespondDeps {
  /** Runs an effect in the layer's fiber set (interrupted when the layer closes). */
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>
  /** The open sockets (closed when the gateway stops); a session leaves it when its socket closes. */
  readonly sockets: Set<WebSocket>
}

/** Serves the frames of an accepted socket, for the key `apiKeyId` (null: no key), until it closes. */
export const openSession = (deps: SessionDeps, ws: WebSocket, req: http.IncomingMessage, apiKeyId: string | null): void => {
  const { run, sockets } = deps
  const store = ResponseStore.make({ maxEntries: 100, maxAgeMs: 2 * 60 * 60 * 1000 })
  let current: Fiber.RuntimeFiber<void, never> | undefined
  /** The answer of the response in progress (`current`), once it has one. */
  let answering: SocketAnswer | undefined
  const queue: Array<string> = []
  const send = (text: string) => {
    if (ws.readyState === ws.OPEN) ws.send(text)
  }
  const conn: SocketConn = { ws, req, apiKeyId, store, send }

  /** A frame the gateway cannot take (not a request: no lifecycle), answered with an error event. */
  const invalid = (code: string, message: string) =>
    send(JSON.stringify({ type: "error", status: 400, error: { type: "invalid_request_error", code, message } }))

  const handle = (raw: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (jsonTooDeep(raw)) return Effect.sync(() => invalid("json_too_deep", `frame is ${TOO_DEEP_MESSAGE}`))
      const frame = obj(tryJson(raw))
      if (!frame) return Effect.sync(() => invalid("invalid_json", "frames must be JSON objects"))
      if (frame["type"] !== "response.create")
        return Effect.sync(() => invalid("unsupported_frame", `expected type response.create, got ${String(frame["type"])}`))
      const { type: _t, generate, ...body } = frame
      const model = str(body["model"])
      if (!model) return Effect.sync(() => invalid("missing_model", "response.create needs a model"))
      // Prewarm: remember the input, generate nothing (no upstream call, no lifecycle, no usage row).
      if (generate === false) return prewarm(conn, body, model)
      const answer: SocketAnswer = { statusCode: 200, headersSent: false }
      answering = answer
      return respond(deps, conn, answer, raw, body, model)
    }).pipe(
      Effect.catchAllDefect((d) =>
        Effect.logError("websocket frame failed", d).pipe(
          Effect.zipRight(
            Effect.sync(() =>
              send(JSON.stringify({ type: "error", status: 500, error: { type: "server_error", message: "internal error" } }))
            )
          )
        )
      ),
      Effect.annotateLogs({ transport: "websocket" })
    )

  // Frames are answered one after another; response.cancel stops the one in progress.
  const next = () => {
    if (current || queue.length === 0) return
    const raw = queue.shift()!
    current = run(handle(raw))
    current.addObserver(() => {
      current = undefined
      answering = undefined
      next()
    })
  }
  ws.on("message", (data, isBinary) => {
    const text = isBinary ? Buffer.from(data as Buffer).toString("utf8") : data.toString()
    if (obj(tryJson(text))?.["type"] === "response.cancel") {
      if (current) run(Fiber.interrupt(current))
      return
    }
    queue.push(text)
    next()
  })
  ws.on("close", () => {
    sockets.delete(ws)
    queue.length = 0
    // A response whose last message went out is not cancelled by the close that follows it
    // (clients close right after response.completed): it ends, its usage row says 200.
    if (current && answering?.finished !== true) run(Fiber.interrupt(current))
  })
  ws.on("error", () => ws.terminate())
}
