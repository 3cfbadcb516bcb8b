#!/usr/bin/env node
// Design floor 1: the gateway's transport with no gateway logic. node:http server, undici
// upstream client (the gateway's), the request body parsed and re-serialised, a JSON answer read
// whole and parsed (as the gateway does for usage), an SSE answer relayed chunk by chunk.
// Usage: node undici-proxy.mjs --upstream http://127.0.0.1:<port> [--port <port>]
import * as http from "node:http"
import { listen, makeAgent, readAll, reencode, upstreamOrigin } from "./common.mjs"

const origin = upstreamOrigin()
const agent = makeAgent()

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  readAll(req, (raw) => {
    let body
    try {
      body = reencode(raw)
    } catch {
      res.writeHead(400, { "content-type": "application/json" })
      return res.end('{"error":{"message":"request body is not JSON"}}')
    }
    agent.request(
      {
        origin,
        path: req.url,
        method: "POST",
        headers: { "content-type": "application/json", authorization: req.headers.authorization ?? "" },
        body
      },
      (err, up) => {
        if (err) {
          res.writeHead(502, { "content-type": "application/json" })
          return res.end(JSON.stringify({ error: { message: err.message } }))
        }
        const type = String(up.headers["content-type"] ?? "")
        if (type.includes("event-stream")) {
          res.writeHead(up.statusCode, { "content-type": type, "cache-control": "no-cache" })
          up.body.on("data", (c) => res.write(c))
          up.body.on("end", () => res.end())
          return
        }
        readAll(up.body, (buf) => {
          JSON.parse(buf.toString("utf8"))
          res.writeHead(up.statusCode, { "content-type": "application/json", "content-length": buf.length })
          res.end(buf)
        })
      }
    )
  })
})
listen(server)
