// Runs inside a network namespace (`ip netns exec <ns> node nsServer.mjs <address> <name>`): an
// HTTP CONNECT proxy (the `proxy` package) on <address>:3128, and on the namespace's own
// 127.0.0.1:8080 a minimal OpenAI-compatible upstream whose answer names the namespace. Prints
// one JSON line when both listen, then one per tunnel the proxy opened ({ target, family }).
import * as http from "node:http"
import { createProxy } from "proxy"

const [address, name] = process.argv.slice(2)
const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`)

const upstream = http.createServer((req, res) => {
  let raw = ""
  req.setEncoding("utf8")
  req.on("data", (c) => (raw += c))
  req.on("end", () => {
    if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) return res.writeHead(404).end()
    const body = JSON.parse(raw || "{}")
    const content = `from ${name}`
    const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(
        JSON.stringify({
          id: "c1",
          object: "chat.completion",
          created: 1,
          model: body.model,
          choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
          usage
        })
      )
    }
    res.writeHead(200, { "content-type": "text/event-stream" })
    const chunk = (delta, finish) => ({
      id: "c1",
      object: "chat.completion.chunk",
      created: 1,
      model: body.model,
      choices: [{ index: 0, delta, finish_reason: finish }]
    })
    res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content }, null))}\n\n`)
    res.write(`data: ${JSON.stringify({ ...chunk({}, "stop"), usage })}\n\n`)
    res.end("data: [DONE]\n\n")
  })
})

const proxy = createProxy(http.createServer())
proxy.authenticate = (req) => {
  emit({ target: `${req.method} ${req.url}`, family: req.socket.remoteFamily })
  return true
}

await new Promise((resolve, reject) => upstream.once("error", reject).listen(8080, "127.0.0.1", resolve))
await new Promise((resolve, reject) => proxy.once("error", reject).listen(3128, address, resolve))
emit({ listening: true })
process.on("SIGTERM", () => process.exit(0))
