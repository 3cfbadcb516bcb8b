import { defineConfig } from "vitest/config"
import type { Reporter } from "vitest/node"

/**
 * `npm run fuzz`: test/fuzz.test.ts with 10,000 cases (FUZZ_RUNS, FUZZ_SEED to change), outside
 * `npm test`'s time budget. Ends with one line, `fuzz: N cases, N answers of 500, N crashes,
 * N resets, N hangs`; the run fails (exit 1) when any is not zero. A 502/503/504, hang or cut
 * WebSocket session that does not show again when its case is replayed twice is listed and
 * counted apart, not failed; an HTTP request whose connection failed before its answer was read
 * (a reset) always counts.
 */
class FuzzSummary implements Reporter {
  onFinished(files: ReadonlyArray<{ tasks: ReadonlyArray<unknown> }> = []) {
    const total = { cases: 0, fivehundred: 0, crashes: 0, resets: 0, hangs: 0, other: 0, unconfirmed: 0 }
    const walk = (task: any) => {
      const f = task?.meta?.fuzz
      if (f) for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += f[k] ?? 0
      for (const t of task?.tasks ?? []) walk(t)
    }
    for (const f of files) walk(f)
    console.log(
      `\nfuzz: ${total.cases} cases, ${total.fivehundred} answers of 500, ${total.crashes} crashes, ${total.resets} resets, ${total.hangs} hangs${total.other ? `, ${total.other} other findings` : ""}${total.unconfirmed ? `, ${total.unconfirmed} timing findings that did not reproduce (not failures; listed above)` : ""}`
    )
  }
}

// CI asks for a machine-readable report as well (see .ci/run).
const jsonReport = process.env["GATEWAY_FUZZ_REPORT"]

export default defineConfig({
  test: {
    include: ["test/fuzz.test.ts"],
    env: { FUZZ_RUNS: process.env["FUZZ_RUNS"] ?? "10000" },
    testTimeout: 900_000,
    hookTimeout: 120_000,
    pool: "forks",
    reporters: jsonReport ? ["default", new FuzzSummary(), "json"] : ["default", new FuzzSummary()],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
