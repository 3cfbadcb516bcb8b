/**
 * New requests bounded per turn of the event loop (docs/ARCHITECTURE.md, "New requests per turn").
 *
 * Node's poll phase hands the server every request that arrived since the last turn, and each is
 * started at once: a burst of new requests (a thousand streams opened together) held the loop for
 * the whole burst, 0.3–1 ms a request, while the streams already running waited for their next
 * chunk (the bench's 1000-stream row: gaps of 400–770 ms). Here a turn starts requests until its
 * budget of time is spent; the rest wait, in arrival order, for the check phase, which starts
 * another budget's worth and leaves the others to the next turn's. Between two such turns the poll
 * phase relays what the upstreams sent. A request the client gave up while it waited is skipped.
 *
 * Under an ordinary load nothing waits: a turn's requests are started within the budget. The cost
 * is a clock read a request and one `setImmediate` a turn that started any.
 */

/** New requests that waited for a later turn, in this process (`gateway_requests_deferred_total` on /metrics). */
export const turnsDeferred = { count: 0 }

/** The clock the budget is read from (milliseconds). */
const monotonic = (): number => performance.now()

export class TurnBudget<A, B> {
  /** When the turn's first request started (the clock's ms); -1 before any this turn. */
  private turnStart = -1
  /** Requests waiting for a later turn, as pairs (a, b) in arrival order, from `head` on. */
  private readonly waiting: Array<A | B | undefined> = []
  private head = 0
  private endScheduled = false
  /** Requests that waited for a later turn, since the start. */
  deferred = 0

  constructor(
    /** A turn's time for starting new requests; 0 starts them one at a time (one in the poll phase, one in the check phase). */
    private readonly budgetMs: number,
    private readonly start: (a: A, b: B) => void,
    /** A request nobody waits for any more (the client went away): not started. */
    private readonly gone: (a: A, b: B) => boolean,
    private readonly now: () => number = monotonic
  ) {}

  /** Requests waiting now. */
  get pending(): number {
    return (this.waiting.length - this.head) / 2
  }

  /** Starts the request now when the turn has time left and nobody waits before it; else it waits its turn. */
  admit(a: A, b: B): void {
    if (this.head === this.waiting.length) {
      const t = this.now()
      if (this.turnStart < 0) {
        this.turnStart = t
        this.scheduleEnd()
        return this.start(a, b)
      }
      if (t - this.turnStart < this.budgetMs) return this.start(a, b)
    }
    this.waiting.push(a, b)
    this.deferred++
    turnsDeferred.count++
    this.scheduleEnd()
  }

  private scheduleEnd(): void {
    if (this.endScheduled) return
    this.endScheduled = true
    setImmediate(this.endTurn)
  }

  /** The check phase: the turn is over; those waiting get a budget of their own, the rest the next turn's. */
  private readonly endTurn = (): void => {
    this.endScheduled = false
    this.turnStart = -1
    const waiting = this.waiting
    if (this.head === waiting.length) return
    const t0 = this.now()
    try {
      // At least one started a turn; a request skipped spends nothing.
      while (this.head < waiting.length) {
        const a = waiting[this.head] as A
        const b = waiting[this.head + 1] as B
        waiting[this.head] = undefined
        waiting[this.head + 1] = undefined
        this.head += 2
        if (this.gone(a, b)) continue
        this.start(a, b)
        if (this.now() - t0 >= this.budgetMs) break
      }
    } finally {
      // Even when a start threw (its caller reports it): the others still get their turns.
      if (this.head === waiting.length) {
        waiting.length = 0
        this.head = 0
      } else {
        // A queue that never empties (sustained overload) drops the places already taken.
        if (this.head >= 2048 && this.head * 2 >= waiting.length) {
          waiting.splice(0, this.head)
          this.head = 0
        }
        this.scheduleEnd()
      }
    }
  }
}
