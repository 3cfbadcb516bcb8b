import { defineConfig } from "vitest/config"

// The dashboard's end-to-end suite (`npm run test:e2e`): real gateways on loopback driven by
// Debian's Chromium through playwright-core. It needs /usr/bin/chromium (or CHROMIUM_PATH) and
// fails, never skips, without it. Two files at a time, in two processes that keep their modules
// between files (playwright-core and the harness loaded once per process): one file at a time left
// 43% of two cores idle (the browser and the gateways wait on each other), and loading the modules
// again for each of the 17 files cost 42 s. Measured on two cores: 271 s of wall and 188 s of CPU
// one at a time, 171 s and 154 s two at a time (docs/performance.md, "CI time (2026-11-29)").
const jsonReport = process.env.GATEWAY_TEST_REPORT

export default defineConfig({
  test: {
    include: ["test/e2e/**/*.e2e.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 90_000,
    pool: "forks",
    maxWorkers: 2,
    isolate: false,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
