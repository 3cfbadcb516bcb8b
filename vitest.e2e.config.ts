import { defineConfig } from "vitest/config"

// The dashboard's end-to-end suite (`npm run test:e2e`): real gateways on loopback driven by
// Debian's Chromium through playwright-core. It needs /usr/bin/chromium (or CHROMIUM_PATH) and
// fails, never skips, without it. One file at a time: one browser on two cores is plenty.
const jsonReport = process.env.GATEWAY_TEST_REPORT

export default defineConfig({
  test: {
    include: ["test/e2e/**/*.e2e.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 90_000,
    pool: "forks",
    fileParallelism: false,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
