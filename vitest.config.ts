import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

// CI asks for a machine-readable report as well (see .ci/run); the command stays `npm test`.
const jsonReport = process.env.GATEWAY_TEST_REPORT
// The MCP conformance suite's CLI needs Node 22 or newer: on an older Node its file runs only when
// GATEWAY_NODE22 names a Node 22 binary (CI runs it in its Node 22 pass; test/mcp.conformance.test.ts).
const conformanceRuns = Number(process.versions.node.split(".")[0]) >= 22 || process.env.GATEWAY_NODE22 !== undefined

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The scale-out suite needs PostgreSQL, Redis and nginx (`npm run test:scale`, vitest.scale.config.ts)
    // and the dashboard's end-to-end suite needs Chromium (`npm run test:e2e`): neither is in npm test.
    exclude: ["test/scale/**", "test/e2e/**", "test/long/**", "**/node_modules/**", ...(conformanceRuns ? [] : ["test/mcp.conformance.test.ts"])],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // One process per core (vitest's default leaves one core out: one process on CI's two), each
    // running its files one after another without a fresh module graph per file: loading the
    // gateway's modules again for every file cost a third of the run. Files must not depend on
    // module state another file may have left (a test that needs fresh modules resets them).
    maxWorkers: Math.max(2, availableParallelism()),
    isolate: false,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
