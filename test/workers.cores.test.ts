import { describe, expect, it } from "vitest"
import { crowdedCores, parseWorkers } from "../src/server/workers.js"

describe("--workers and the cores this process may use", () => {
  it("says nothing while every worker can have a core of its own", () => {
    expect(crowdedCores(2, 2)).toBeUndefined()
    expect(crowdedCores(2, 8)).toBeUndefined()
    expect(crowdedCores(1, 1)).toBeUndefined()
    // `auto` is one worker per core this process may use: never crowded.
    expect(crowdedCores(parseWorkers("auto", 3) as number, 3)).toBeUndefined()
  })

  it("warns when the workers would take turns on fewer cores (a gateway started under taskset or in a cpuset)", () => {
    expect(crowdedCores(2, 1)).toBe(
      "workers: 2 workers may use 1 core only (this process's CPU affinity, which they inherit): they take turns there and serve no more than one process would"
    )
    expect(crowdedCores(4, 2)).toBe(
      "workers: 4 workers may use 2 cores only (this process's CPU affinity, which they inherit): they take turns there and serve no more than 2 processes would"
    )
  })
})
