import { describe, expect, it } from "vitest"
import { crowdedCores, parseWorkers, servingWorkers, standbyWanted } from "../src/server/workers.js"

describe("--workers and the cores this process may use", () => {
  it("every worker serves while each can have a core of its own, and nothing is said", () => {
    expect(servingWorkers(2, 2)).toBe(2)
    expect(servingWorkers(2, 8)).toBe(2)
    expect(servingWorkers(1, 1)).toBe(1)
    expect(crowdedCores(2, 2)).toBeUndefined()
    expect(crowdedCores(2, 8)).toBeUndefined()
    expect(crowdedCores(1, 1)).toBeUndefined()
    // `auto` is one worker per core this process may use: never crowded.
    expect(crowdedCores(parseWorkers("auto", 3) as number, 3)).toBeUndefined()
  })

  it("with more workers than cores (a gateway started under taskset or in a cpuset), one serves per core and the others stand by", () => {
    expect(servingWorkers(2, 1)).toBe(1)
    expect(servingWorkers(4, 2)).toBe(2)
    expect(servingWorkers(5, 2)).toBe(2)
    expect(crowdedCores(2, 1)).toBe(
      "workers: 2 workers may use 1 core only (this process's CPU affinity, which they inherit): 1 serves and 1 stands by, to take a serving worker's place at once if it stops"
    )
    expect(crowdedCores(5, 2)).toBe(
      "workers: 5 workers may use 2 cores only (this process's CPU affinity, which they inherit): 2 serve and 3 stand by, to take a serving worker's place at once if it stops"
    )
  })

  it("GATEWAY_WORKERS_STANDBY=false makes every worker serve, and the primary warns that they take turns", () => {
    expect(servingWorkers(2, 1, false)).toBe(2)
    expect(servingWorkers(4, 2, false)).toBe(4)
    expect(crowdedCores(2, 1, false)).toBe(
      "workers: 2 workers may use 1 core only (this process's CPU affinity, which they inherit), and every one serves (GATEWAY_WORKERS_STANDBY=false): they take turns there and serve no more than one process would"
    )
    expect(crowdedCores(2, 2, false)).toBeUndefined()
  })

  it("reads GATEWAY_WORKERS_STANDBY as true (unset) or false, and names anything else", () => {
    expect(standbyWanted({})).toBe(true)
    expect(standbyWanted({ GATEWAY_WORKERS_STANDBY: "true" })).toBe(true)
    expect(standbyWanted({ GATEWAY_WORKERS_STANDBY: " FALSE " })).toBe(false)
    expect(String(standbyWanted({ GATEWAY_WORKERS_STANDBY: "sometimes" }))).toBe(
      'Error: GATEWAY_WORKERS_STANDBY must be true or false, got "sometimes"'
    )
  })
})
