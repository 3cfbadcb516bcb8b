#!/usr/bin/env node
// Design floor 2: design floor 1 with each request run the way the gateway's server runs it: an
// Effect program forked on a prepared runtime (a FiberSet's, fiber metrics off), the body read
// and the upstream call as Effect.async waits, one uninterruptible exit handler, the fiber
// interrupted when the client leaves. No gateway logic: what an Effect fiber per request costs.
// Usage: node effect-proxy.mjs --upstream http://127.0.0.1:<port> [--port <port>]
import * as http from "node:http"
import { effect, listen, makeAgent, readAll, reencode, upstreamOrigin } from "./common.mjs"

const [Effect, Exit, FiberId, FiberSet, RuntimeFlags, RuntimeFlagsPatch] = await Promise.all(
  ["Effect", "Exit", "FiberId", "FiberSet", "RuntimeFlags", "RuntimeFlagsPatch"].map(effect)
)
const origin = upstreamOrigin()
const agent = makeAgent()

const readBody = (req) => Effect.async((resume) => readAll(req, (buf) => resume(Effect.succeed(buf))))
const send = (path, headers, body) =>
  Effect.async((resume) => {
    agent.request({ origin, path, method: "POST", headers, body }, (err, up) => {
      if (err) return resume(Effect.fail(err))
      if (String(up.headers["content-type"] ?? "").includes("event-stream")) return resume(Effect.succeed({ up }))
      readAll(up.body, (buf) => resume(Effect.succeed({ up, buf })))
    })
  })
const relay = (res, up) =>
  Effect.async((resume) => {
    res.writeHead(up.statusCode, { "content-type": up.headers["content-type"], "cache-control": "no-cache" })
    up.body.on("data", (c) => res.write(c))
    up.body.on("end", () => {
      res.end()
      resume(Effect.void)
    })
  })

const handle = (req, res) =>
  Effect.gen(function* () {
    const raw = yield* readBody(req)
    const body = yield* Effect.try(() => reencode(raw))
    const { up, buf } = yield* send(req.url, { "content-type": "application/json", authorization: req.headers.authorization ?? "" }, body)
    if (!buf) return yield* relay(res, up)
    JSON.parse(buf.toString("utf8"))
    res.writeHead(up.statusCode, { "content-type": "application/json", "content-length": buf.length })
    res.end(buf)
  })

const program = (req, res) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.exit(restore(handle(req, res))), (exit) =>
      Exit.isSuccess(exit) || res.headersSent
        ? Effect.sync(() => res.writableEnded || res.end())
        : Effect.sync(() => {
            res.writeHead(502, { "content-type": "application/json" })
            res.end('{"error":{"message":"effect proxy: request failed"}}')
          })
    )
  )

Effect.runFork(
  Effect.scoped(
    Effect.gen(function* () {
      const fibers = yield* FiberSet.make()
      const run = yield* FiberSet.runtime(fibers)().pipe(
        Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.disable(RuntimeFlags.RuntimeMetrics))
      )
      const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
        const fiber = run(program(req, res))
        res.once("close", () => {
          if (!res.writableFinished) fiber.unsafeInterruptAsFork(FiberId.none)
        })
      })
      listen(server)
      yield* Effect.never
    })
  )
)
