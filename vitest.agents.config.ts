import { defineConfig } from "vitest/config"

// The coding-agent end-to-end test; run it with `npm run test:agents` (test/agents/run.sh).
export default defineConfig({
  test: {
    include: ["test/agents/**/*.e2e.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: "forks",
    fileParallelism: false
  }
})
