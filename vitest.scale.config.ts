import { defineConfig } from "vitest/config"

// The scale-out suite (`npm run test:scale`): gateways on PostgreSQL and Redis, behind nginx.
// test/scale/setup.ts starts a private PostgreSQL and Redis from Debian's packages (nginx is
// started by the tests that need it); a missing package fails the run naming it, never skips.
// CI runs it after the suite (.ci/run installs postgresql, redis-server and nginx).
const jsonReport = process.env.GATEWAY_TEST_REPORT

export default defineConfig({
  test: {
    include: ["test/scale/**/*.test.ts"],
    globalSetup: ["test/scale/setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    fileParallelism: false,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
