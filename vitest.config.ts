import { defineConfig } from "vitest/config"

// CI asks for a machine-readable report as well (see .ci/run); the command stays `npm test`.
const jsonReport = process.env.GATEWAY_TEST_REPORT

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The scale-out suite needs PostgreSQL, Redis and nginx (`npm run test:scale`, vitest.scale.config.ts)
    // and the dashboard's end-to-end suite needs Chromium (`npm run test:e2e`): neither is in npm test.
    exclude: ["test/scale/**", "test/e2e/**", "**/node_modules/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
