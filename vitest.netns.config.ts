import { defineConfig } from "vitest/config"

// The IPv4/IPv6 family tests in network namespaces (`npm run test:netns`): they need root and
// iproute2's `ip`, and fail (never skip) without them. CI runs them after the suite (.ci/run).
const jsonReport = process.env.GATEWAY_TEST_REPORT

export default defineConfig({
  test: {
    include: ["test/netns/**/*.netns.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    fileParallelism: false,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
