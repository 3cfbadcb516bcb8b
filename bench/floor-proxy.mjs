#!/usr/bin/env node
// The floor: the least a Node proxy can add. Raw node:http, forwards method, path, headers and
// body to the upstream over a keep-alive agent and pipes the answer back (streams included).
// Usage: node floor-proxy.mjs --upstream http://127.0.0.1:<port> [--port <port>]
import * as http from "node:http"

const arg = (name, dflt) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt)
const upstream = new URL(arg("--upstream", "http://127.0.0.1:8000"))
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 })
const HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "proxy-connection",
  "proxy-authorization"
])
const strip = (headers) => {
  const out = {}
  for (const k in headers) if (!HOP.has(k)) out[k] = headers[k]
  return out
}

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const up = http.request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: strip(req.headers), agent },
    (ur) => {
      res.writeHead(ur.statusCode, strip(ur.headers))
      ur.pipe(res)
    }
  )
  up.on("error", (err) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "application/json" })
    res.end(JSON.stringify({ error: { message: `floor proxy: ${err.message}`, type: "proxy_error" } }))
  })
  res.on("close", () => {
    if (!res.writableFinished) up.destroy()
  })
  req.pipe(up)
})
server.headersTimeout = 0
server.requestTimeout = 0
server.listen(Number(arg("--port", "0")), "127.0.0.1", () => console.log(`listening ${server.address().port}`))
const stop = () => server.close(() => process.exit(0)) && server.closeAllConnections()
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
