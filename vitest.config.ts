import { availableParallelism } from "node:os"
import * as path from "node:path"
import { defineConfig } from "vitest/config"

// CI asks for a machine-readable report as well (see .ci/run); the command stays `npm test`.
const jsonReport = process.env.GATEWAY_TEST_REPORT
// Files that need Node 22 or newer: each runs a Node 22 child process (this Node when it is one, else
// the binary GATEWAY_NODE22 names). On an older Node without that variable `npm test` leaves them out
// (CI runs them in its Node 22 pass); a file named on the command line still runs there and fails,
// saying what it needs, rather than vanishing into "No test files found".
// - test/mcp.conformance.test.ts: the MCP conformance suite's CLI imports `fs.globSync`.
// - test/inspector.proxy-client.test.ts: the OpenAI SDK reaches the inspector's proxy through
//   HTTPS_PROXY, which fetch honours only with NODE_USE_ENV_PROXY (Node 22+).
// - test/mcp.inspector-cli.test.ts: the MCP inspector (2.x) needs Node 22.19 or newer.
const node22Only = ["test/mcp.conformance.test.ts", "test/inspector.proxy-client.test.ts", "test/mcp.inspector-cli.test.ts"]
const node22 = Number(process.versions.node.split(".")[0]) >= 22 || process.env.GATEWAY_NODE22 !== undefined
/** Whether a command-line filter names `file`: its path (relative, ./ or absolute) or a part of it holding its whole name. */
const named = (file: string) =>
  process.argv.slice(2).some((arg) => {
    const rel = path.isAbsolute(arg) ? path.relative(process.cwd(), arg) : arg.replace(/^\.\//, "")
    return rel.includes(path.basename(file, ".test.ts")) && file.includes(rel)
  })
const node22Excluded = node22 ? [] : node22Only.filter((file) => !named(file))

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The scale-out suite needs PostgreSQL, Redis and nginx (`npm run test:scale`, vitest.scale.config.ts)
    // and the dashboard's end-to-end suite needs Chromium (`npm run test:e2e`): neither is in npm test.
    exclude: ["test/scale/**", "test/e2e/**", "test/long/**", "**/node_modules/**", ...node22Excluded],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // One process per core (vitest's default leaves one core out: one process on CI's two), each
    // running its files one after another without a fresh module graph per file: loading the
    // gateway's modules again for every file cost a third of the run. Files must not depend on
    // module state another file may have left (a test that needs fresh modules resets them).
    maxWorkers: Math.max(2, availableParallelism()),
    isolate: false,
    // The MCP modules the gateway loads lazily, loaded at the start of each worker's first file
    // (and answered from its cache for the others): a module fetched late in a busy run can meet
    // vitest's fixed 60 s RPC timeout, and the failure stays for the worker's life
    // (test/support/preloadLazy.ts).
    setupFiles: ["test/support/preloadLazy.ts"],
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
