// Preloaded into the peer (node --import): every server it starts listens on 127.0.0.1 only.
// Portkey's Node server calls serve({ port }) without a hostname, which would bind all
// interfaces; the benchmark never exposes anything beyond loopback.
import * as net from "node:net"

const HOST = process.env.BENCH_LISTEN_HOST || "127.0.0.1"
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  const first = args[0]
  if (first !== null && typeof first === "object" && !Array.isArray(first)) {
    if (first.path === undefined && first.fd === undefined && first.handle === undefined) args[0] = { ...first, host: HOST }
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] === "string") args[1] = HOST
    else if (args[1] === undefined || args[1] === null) args[1] = HOST
    else args.splice(1, 0, HOST)
  }
  return listen.apply(this, args)
}
