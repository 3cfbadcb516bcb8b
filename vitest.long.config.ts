import { defineConfig } from "vitest/config"

// `npm run test:long`: cases that take minutes of real time by design (a generation of three
// minutes against the default limits); CI runs it beside npm test, where it costs almost no CPU.
const jsonReport = process.env.GATEWAY_TEST_REPORT

export default defineConfig({
  test: {
    include: ["test/long/**/*.test.ts"],
    testTimeout: 6 * 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
