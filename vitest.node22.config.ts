import { defineConfig } from "vitest/config"
import base from "./vitest.config.js"

/**
 * CI's Node 22 pass (.ci/run): the whole suite runs under the machine's Node (20) in `npm test`;
 * under Node 22 run the files whose outcome depends on the Node runtime rather than on the
 * gateway's own logic (docs/performance.md, "The Node 22 pass and the packed install"):
 * - what needs Node 22 (the files vitest.config.ts leaves out on Node 20);
 * - the built gateway and CLI as processes (start, signals, restart, cluster workers and their IPC,
 *   V8 flags and the collector, the compile cache, child processes of stdio MCP servers);
 * - the Node parts the request path leans on, whose implementation changes between versions:
 *   the HTTP server's connection handling, fetch and undici's dispatchers, TLS, WebSocket,
 *   streams and byte handling, sockets that fail, the forward proxy, better-sqlite3's ABI, the
 *   plugin sandbox's worker, and the common request end to end.
 */
// The suite's own settings (workers, timeouts, reporters), with this list as what it runs.
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: [
      // Node 22 only
      "test/mcp.conformance.test.ts",
      "test/inspector.proxy-client.test.ts",
      "test/mcp.inspector-cli.test.ts",
      // the built gateway and CLI as processes
      "test/cli-server.test.ts",
      "test/cli.ops.test.ts",
      "test/workers.test.ts",
      "test/helper-threads.test.ts",
      "test/process-survival.test.ts",
      "test/idle-memory.test.ts",
      "test/serve-code-cache.process.test.ts",
      "test/mcp.stdio.test.ts",
      "test/webhooks.crash.test.ts",
      // Node's HTTP, fetch, TLS, WebSocket, streams, sockets, SQLite, workers
      "test/http.lingering.test.ts",
      // IncomingMessage's buffer read at once when the parser has the message whole
      "test/io.readBodyNow.test.ts",
      "test/server.turns.test.ts",
      "test/responses-ws.test.ts",
      "test/responses-ws.lifecycle.test.ts",
      "test/egress.test.ts",
      "test/egress.tls.test.ts",
      "test/egress.family.test.ts",
      "test/egress.fingerprint.test.ts",
      "test/resilience.upstream-tls.test.ts",
      "test/resilience.upstream-faults.test.ts",
      "test/upstream.limits.test.ts",
      "test/stream.bytes.test.ts",
      "test/nonstreamed.collect.test.ts",
      "test/inspector.capture.test.ts",
      "test/store.test.ts",
      "test/plugins.sandbox.test.ts",
      "test/wire.test.ts",
      "test/chat.test.ts",
      "test/common-path.test.ts"
    ]
  }
})
