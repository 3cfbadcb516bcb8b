import { describe, expect, it } from "vitest"
import { TurnBudget, turnsDeferred } from "../src/platform/http/turnBudget.js"

/**
 * The check phase's next callback: queued behind the budget's own (a turn's one batch), and a
 * batch's next turn is queued while the check phase runs, so node runs it in the loop's next turn.
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("new requests bounded per turn of the event loop", () => {
  it("starts requests at once while the turn has time, then those waiting in arrival order, a budget a turn", async () => {
    let clock = 0
    const started: Array<number> = []
    const turns = new TurnBudget<number, string>(
      10,
      (n) => {
        started.push(n)
        clock += 4 // each request's start takes 4 ms
      },
      () => false,
      () => clock
    )
    const deferredBefore = turnsDeferred.count
    for (let n = 0; n < 10; n++) turns.admit(n, "req")
    // 0 at 0 ms, 1 at 4, 2 at 8; at 12 ms the turn's budget is spent.
    expect(started).toEqual([0, 1, 2])
    expect(turns.pending).toBe(7)
    expect(turns.deferred).toBe(7)
    expect(turnsDeferred.count - deferredBefore).toBe(7)

    await nextTurn()
    // The check phase started the next budget's worth (3: at 0, 4 and 8 ms of its own).
    expect(started).toEqual([0, 1, 2, 3, 4, 5])
    // A request arriving while others wait goes behind them.
    turns.admit(10, "req")
    expect(started).toEqual([0, 1, 2, 3, 4, 5])
    await nextTurn()
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    await nextTurn()
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    expect(turns.pending).toBe(0)

    // Nobody waiting and a new turn: the next request starts at once again.
    await nextTurn()
    turns.admit(11, "req")
    expect(started.at(-1)).toBe(11)
  })

  it("skips a request whose client went away while it waited", async () => {
    const started: Array<string> = []
    const gone = new Set(["b"])
    // Budget 0: one request a turn.
    const turns = new TurnBudget<string, null>(
      0,
      (id) => started.push(id),
      (id) => gone.has(id)
    )
    for (const id of ["a", "b", "c"]) turns.admit(id, null)
    expect(started).toEqual(["a"])
    await nextTurn()
    // "b" was skipped without spending the turn's one request: "c" started in the same check phase.
    expect(started).toEqual(["a", "c"])
    expect(turns.pending).toBe(0)
  })

  it("with a budget of 0 starts one request a turn", async () => {
    const started: Array<number> = []
    const turns = new TurnBudget<number, null>(
      0,
      (n) => started.push(n),
      () => false
    )
    for (let n = 0; n < 4; n++) turns.admit(n, null)
    expect(started).toEqual([0])
    await nextTurn()
    expect(started).toEqual([0, 1])
    await nextTurn()
    expect(started).toEqual([0, 1, 2])
    await nextTurn()
    expect(started).toEqual([0, 1, 2, 3])
  })
})
