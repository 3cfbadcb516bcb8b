/**
 * A test gateway (test/support/gateway.ts: every layer, from the sources) in a process of its own,
 * for what a test cannot change in its own process: the CAs node trusts (NODE_EXTRA_CA_CERTS is
 * read when a process starts), the network namespace and resolv.conf it runs in. Started by
 * `startGatewayChild` (test/support/gatewayChild.ts) under vite-node, never by vitest: nothing
 * here imports vitest. Its options are JSON in GATEWAY_CHILD_OPTIONS (`ChildOptions`).
 *
 * Prints one JSON line when ready (`ChildReady`), then one line per query its DNS server answered
 * (`{"dns": {...}}`); SIGTERM closes everything.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as net from "node:net"
import type { StreamTimeoutsShape } from "../../src/inference/StreamTimeouts.js"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { startFakeDns } from "./fakeDns.js"
import { startGateway } from "./gateway.js"

export interface ChildOptions {
  /** The secret of an admin API key created at start. */
  readonly adminKey: string
  /** The gateway's upstream timeouts (StreamTimeouts), in ms. */
  readonly timeouts?: Partial<StreamTimeoutsShape>
  /**
   * A DNS server on 127.0.0.1:`port` (UDP; 53 for a namespace's resolv.conf): NXDOMAIN for every
   * name, but SERVFAIL for names beginning `servfail.` and no answer at all for `silent.`.
   */
  readonly dnsPort?: number
  /** An OpenAI-compatible upstream on 127.0.0.1 answering every chat completion "from steady". */
  readonly upstream?: boolean
  /**
   * A Unix socket at this path that reaches the gateway: the way in from outside a network
   * namespace that has nothing but its loopback (a socket file is not in any network namespace).
   */
  readonly socket?: string
  /** The gateway's configuration (feature flags and settings by their environment names), as `startGateway({ env })` takes it. */
  readonly env?: Record<string, string>
}

export interface ChildReady {
  readonly url: string
  readonly dataDir: string
  /** The upstream's base URL (`.../v1`), with `upstream`. */
  readonly upstream?: string
}

const out = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`)

/** A chat completions server: every answer is "from steady", whole or streamed. */
const steadyUpstream = async (): Promise<http.Server> => {
  const server = http.createServer((req, res) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (c: string) => (raw += c))
    req.on("end", () => {
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) return void res.writeHead(404).end()
      const body = JSON.parse(raw || "{}") as { model?: string; stream?: boolean }
      const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }
      if (!body.stream) {
        res.writeHead(200, { "content-type": "application/json" })
        const message = { role: "assistant", content: "from steady" }
        return void res.end(
          JSON.stringify({
            id: "c1",
            object: "chat.completion",
            created: 1,
            model: body.model,
            choices: [{ index: 0, message, finish_reason: "stop" }],
            usage
          })
        )
      }
      res.writeHead(200, { "content-type": "text/event-stream" })
      const chunk = (delta: unknown, finish: string | null) => ({
        id: "c1",
        object: "chat.completion.chunk",
        created: 1,
        model: body.model,
        choices: [{ index: 0, delta, finish_reason: finish }]
      })
      res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "from steady" }, null))}\n\n`)
      res.write(`data: ${JSON.stringify({ ...chunk({}, "stop"), usage })}\n\n`)
      res.end("data: [DONE]\n\n")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return server
}

const options = JSON.parse(process.env["GATEWAY_CHILD_OPTIONS"] ?? "{}") as ChildOptions
const dns =
  options.dnsPort === undefined
    ? undefined
    : await startFakeDns({
        port: options.dnsPort,
        answer: (name) => (name.startsWith("servfail.") ? "servfail" : name.startsWith("silent.") ? "silent" : "nxdomain"),
        onQuery: (q) => out({ dns: q })
      })
const upstream = options.upstream ? await steadyUpstream() : undefined
const gw = await startGateway({ ...(options.timeouts ? { timeouts: options.timeouts } : {}), ...(options.env ? { env: options.env } : {}) })
await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: options.adminKey })))
let door: net.Server | undefined
if (options.socket !== undefined) {
  const gwPort = Number(new URL(gw.url).port)
  fs.rmSync(options.socket, { force: true })
  door = net.createServer((client) => {
    const inner = net.connect(gwPort, "127.0.0.1")
    client.pipe(inner).pipe(client)
    client.on("error", () => inner.destroy())
    inner.on("error", () => client.destroy())
  })
  await new Promise<void>((resolve) => door!.listen(options.socket, resolve))
}
out({
  url: gw.url,
  dataDir: gw.dataDir,
  ...(upstream ? { upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1` } : {})
} satisfies ChildReady)

process.once("SIGTERM", () => {
  door?.close()
  upstream?.closeAllConnections()
  upstream?.close()
  void Promise.allSettled([gw.close(), dns?.close()]).then(() => process.exit(0))
})
