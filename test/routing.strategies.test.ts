import { describe, expect, it } from "vitest"
import type { ModelSpec } from "../src/domain/catalog/catalog.js"
import type { Connection } from "../src/upstream/providers/Connections.js"
import { seededRandom } from "../src/services/routing/random.js"
import { COMBO_STRATEGIES, quotaShare } from "../src/services/routing/strategies/index.js"
import type {
  Candidate,
  ObservedStats,
  QuotaInfo,
  RandomSource,
  RoutingState,
  Strategy,
  StrategyContext
} from "../src/services/routing/types.js"

// ---------------------------------------------------------------- fixtures

interface CandOpts {
  readonly model?: string
  readonly weight?: number
  readonly spec?: { input?: number; output?: number; contextWindow?: number }
  readonly maxConcurrent?: number | null
  readonly targetIndex?: number
}

const cand = (name: string, opts: CandOpts = {}): Candidate => {
  const model = opts.model ?? "m"
  const connection = {
    id: `id-${name}`,
    name,
    provider: { id: "openai" },
    maxConcurrent: opts.maxConcurrent ?? null,
    priority: 0
  } as unknown as Connection
  const spec =
    opts.spec === undefined
      ? undefined
      : ({
          id: model,
          name: model,
          kind: "chat",
          contextWindow: opts.spec.contextWindow ?? 128_000,
          maxOutput: 8192,
          pricing: { input: opts.spec.input ?? 1, output: opts.spec.output ?? 1 }
        } as unknown as ModelSpec)
  return { connection, model, spec, key: `${name}/${model}`, weight: opts.weight ?? 1, targetIndex: opts.targetIndex ?? 0 }
}

/** A RoutingState backed by Maps keyed by candidate key. */
class FakeState {
  readonly inFlight = new Map<string, number>()
  readonly used = new Map<string, number>()
  readonly quota = new Map<string, QuotaInfo>()
  readonly stats = new Map<string, Partial<ObservedStats>>()
  readonly turns = new Map<string, number>()
  readonly lastGood = new Map<string, string>()
  readonly legs = new Map<string, string>()
  readonly groups = new Map<string, Map<string, number>>()

  get state(): RoutingState {
    return {
      breaker: () => "CLOSED",
      quota: (c) => this.quota.get(c.key),
      stats: (c) => ({ samples: 0, p95LatencyMs: undefined, latencyStdDevMs: undefined, errorRate: 0, ...this.stats.get(c.key) }),
      inFlight: (c) => this.inFlight.get(c.key) ?? 0,
      used: (c) => this.used.get(c.key) ?? 0,
      nextTurn: (key) => {
        const t = this.turns.get(key) ?? 0
        this.turns.set(key, t + 1)
        return t
      },
      lastGood: (scope) => this.lastGood.get(scope),
      relayLeg: (scope, session) => this.legs.get(`${scope}|${session}`),
      deficits: (group) => {
        let m = this.groups.get(group)
        if (m === undefined) {
          m = new Map()
          this.groups.set(group, m)
        }
        return m
      }
    }
  }
}

interface CtxOpts {
  readonly state?: FakeState
  readonly random?: RandomSource
  readonly scope?: string
  readonly tokenEstimate?: number
  readonly maxOutputTokens?: number
  readonly sessionId?: string
}

const ctxOf = (o: CtxOpts = {}): StrategyContext => ({
  scope: o.scope ?? "combo",
  request: {
    tokenEstimate: o.tokenEstimate ?? 100,
    maxOutputTokens: o.maxOutputTokens,
    hasTools: false,
    hasImages: false,
    wantsReasoning: false,
    taskType: "chat",
    specificity: 0,
    sessionId: o.sessionId
  },
  random: o.random ?? seededRandom(1),
  now: 1_700_000_000_000,
  state: (o.state ?? new FakeState()).state
})

/** A random source that returns the given values in turn (then fails: the test scripted too few). */
const scripted = (...values: ReadonlyArray<number>): RandomSource => {
  let i = 0
  return {
    next: () => {
      if (i >= values.length) throw new Error("scripted random source exhausted")
      return values[i++] as number
    }
  }
}

const names = (cs: ReadonlyArray<Candidate>): Array<string> => cs.map((c) => c.connection.name)

const [A, B, C, D, E, F, G] = ["A", "B", "C", "D", "E", "F", "G"].map((n) => cand(n)) as [
  Candidate,
  Candidate,
  Candidate,
  Candidate,
  Candidate,
  Candidate,
  Candidate
]

const ALL: ReadonlyArray<Strategy> = [...Object.values(COMBO_STRATEGIES), quotaShare]

/** Counts how often each name is first over `n` orderings. */
const firstCounts = (n: number, order: () => ReadonlyArray<Candidate>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (let i = 0; i < n; i++) {
    const first = order()[0]
    if (first === undefined) throw new Error("empty order")
    const k = first.connection.name
    counts.set(k, (counts.get(k) ?? 0) + 1)
  }
  return counts
}

const share = (counts: Map<string, number>, name: string, n: number): number => (counts.get(name) ?? 0) / n

// ---------------------------------------------------------------- contract

describe("strategy contract", () => {
  it("registers the 15 combo strategies under their own names", () => {
    expect(Object.keys(COMBO_STRATEGIES).sort()).toEqual(
      [
        "context-optimized",
        "context-relay",
        "cost-optimized",
        "fill-first",
        "headroom",
        "least-used",
        "lkgp",
        "p2c",
        "priority",
        "random",
        "reset-aware",
        "reset-window",
        "round-robin",
        "strict-random",
        "weighted"
      ].sort()
    )
    for (const [name, s] of Object.entries(COMBO_STRATEGIES)) expect(s.name).toBe(name)
    expect(quotaShare.name).toBe("quota-share")
  })

  it("returns an empty list for an empty list", () => {
    for (const s of ALL) expect(s.order([], ctxOf())).toEqual([])
  })

  it("returns every candidate exactly once (distinct keys, nothing dropped)", () => {
    const cs = [
      cand("A", { weight: 2, spec: { input: 3, output: 1, contextWindow: 64_000 } }),
      cand("B", { weight: 0 }),
      cand("C", { spec: { input: 1, output: 1, contextWindow: 200_000 }, maxConcurrent: 1 }),
      cand("D", { weight: 5 }),
      cand("E", { weight: 1, spec: { input: 0, output: 0, contextWindow: 32_000 } })
    ]
    const fs = new FakeState()
    fs.inFlight.set("C/m", 3)
    fs.quota.set("A/m", { remaining: 0, exhausted: true, resetAt: 1, windowMs: 10 })
    fs.quota.set("D/m", { remaining: 0.4, windowMs: 1000, resetAt: 5 })
    fs.used.set("B/m", 7)
    fs.lastGood.set("combo", "D/m")
    fs.legs.set("combo|s1", "E/m")
    const random = seededRandom(42)
    for (let i = 0; i < 200; i++) {
      for (const s of ALL) {
        const out = s.order(cs, ctxOf({ state: fs, random, sessionId: "s1" }))
        expect(out).toHaveLength(cs.length)
        expect(new Set(out).size).toBe(cs.length)
        for (const c of cs) expect(out).toContain(c)
      }
    }
  })

  it("uses neither Math.random nor Date.now", () => {
    const realRandom = Math.random
    const realNow = Date.now
    Math.random = () => {
      throw new Error("Math.random called")
    }
    Date.now = () => {
      throw new Error("Date.now called")
    }
    try {
      const cs = [cand("A", { spec: {} }), cand("B"), cand("C", { maxConcurrent: 2 })]
      for (const s of ALL) expect(s.order(cs, ctxOf({ sessionId: "s" })).length).toBeGreaterThan(0)
    } finally {
      Math.random = realRandom
      Date.now = realNow
    }
  })

  it("does not mutate the given list", () => {
    const cs = [A, B, C, D]
    const frozen = Object.freeze(cs.slice())
    for (const s of ALL) s.order(frozen, ctxOf())
    expect(frozen).toEqual(cs)
  })
})

// ---------------------------------------------------------------- one rule each

describe("priority", () => {
  it("keeps the given order", () => {
    expect(names(COMBO_STRATEGIES.priority.order([C, A, B], ctxOf()))).toEqual(["C", "A", "B"])
  })
})

describe("weighted", () => {
  const s = COMBO_STRATEGIES.weighted
  it("draws each position by weight among the remaining ones", () => {
    const cs = [cand("A", { weight: 1 }), cand("B", { weight: 2 }), cand("C", { weight: 3 })]
    // sum 6: 0.5*6 = 3 falls in C's band [3,6); then A,B sum 3: 0.1*3 = 0.3 falls in A's band [0,1)
    expect(names(s.order(cs, ctxOf({ random: scripted(0.5, 0.1, 0) })))).toEqual(["C", "A", "B"])
    // 0.1*6 = 0.6 -> A; then B,C sum 5: 0.45*5 = 2.25 -> B's band is [0,2) so C
    expect(names(s.order(cs, ctxOf({ random: scripted(0.1, 0.45, 0) })))).toEqual(["A", "C", "B"])
  })

  it("puts weight <= 0 last in given order", () => {
    const cs = [cand("Z", { weight: 0 }), cand("A", { weight: 1 }), cand("N", { weight: -2 }), cand("B", { weight: 4 })]
    const random = seededRandom(7)
    for (let i = 0; i < 500; i++) {
      const out = names(s.order(cs, ctxOf({ random })))
      expect(out.slice(2)).toEqual(["Z", "N"])
      expect(out.slice(0, 2).sort()).toEqual(["A", "B"])
    }
  })

  it("is uniform when all weights are <= 0", () => {
    const cs = [cand("A", { weight: 0 }), cand("B", { weight: 0 }), cand("C", { weight: -1 })]
    const random = seededRandom(3)
    const n = 20_000
    const counts = firstCounts(n, () => s.order(cs, ctxOf({ random })))
    for (const k of ["A", "B", "C"]) expect(Math.abs(share(counts, k, n) - 1 / 3)).toBeLessThan(0.02)
  })

  it("picks first with frequency weight/sum over 20,000 requests, and weights the fallbacks", () => {
    const cs = [cand("A", { weight: 1 }), cand("B", { weight: 2 }), cand("C", { weight: 3 })]
    const random = seededRandom(2024)
    const n = 20_000
    const counts = new Map<string, number>()
    let cFirst = 0
    let cFirstThenB = 0
    for (let i = 0; i < n; i++) {
      const out = names(s.order(cs, ctxOf({ random })))
      counts.set(out[0]!, (counts.get(out[0]!) ?? 0) + 1)
      if (out[0] === "C") {
        cFirst++
        if (out[1] === "B") cFirstThenB++
      }
    }
    expect(Math.abs(share(counts, "A", n) - 1 / 6)).toBeLessThan(0.02)
    expect(Math.abs(share(counts, "B", n) - 2 / 6)).toBeLessThan(0.02)
    expect(Math.abs(share(counts, "C", n) - 3 / 6)).toBeLessThan(0.02)
    // after C, B (2) vs A (1): B second 2/3 of the time
    expect(Math.abs(cFirstThenB / cFirst - 2 / 3)).toBeLessThan(0.03)
  })
})

describe("round-robin", () => {
  const s = COMBO_STRATEGIES["round-robin"]
  it("rotates the start through the list, per scope", () => {
    const fs = new FakeState()
    const seq = Array.from({ length: 6 }, () => names(s.order([A, B, C], ctxOf({ state: fs }))).join(""))
    expect(seq).toEqual(["ABC", "BCA", "CAB", "ABC", "BCA", "CAB"])
    // another combo has its own counter
    expect(names(s.order([A, B, C], ctxOf({ state: fs, scope: "other" })))).toEqual(["A", "B", "C"])
    // an empty list does not advance the counter
    s.order([], ctxOf({ state: fs }))
    expect(names(s.order([A, B, C], ctxOf({ state: fs })))).toEqual(["A", "B", "C"])
  })

  it("gives exactly equal first-pick counts", () => {
    const fs = new FakeState()
    const n = 21_000
    const counts = firstCounts(n, () => s.order([A, B, C], ctxOf({ state: fs })))
    expect([counts.get("A"), counts.get("B"), counts.get("C")]).toEqual([7000, 7000, 7000])
  })
})

describe("context-relay", () => {
  const s = COMBO_STRATEGIES["context-relay"]
  it("starts at the session's leg, then the following targets cyclically", () => {
    const fs = new FakeState()
    fs.legs.set("combo|s1", "C/m")
    fs.legs.set("combo|s2", "gone/m")
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs, sessionId: "s1" })))).toEqual(["C", "D", "A", "B"])
    // leg not among the candidates, no leg yet, no session: given order
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs, sessionId: "s2" })))).toEqual(["A", "B", "C", "D"])
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs, sessionId: "s3" })))).toEqual(["A", "B", "C", "D"])
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs })))).toEqual(["A", "B", "C", "D"])
    // the leg is per combo
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs, sessionId: "s1", scope: "other" })))).toEqual(["A", "B", "C", "D"])
  })
})

describe("fill-first", () => {
  it("moves exhausted targets to the end, keeping their relative order", () => {
    const fs = new FakeState()
    fs.quota.set("A/m", { remaining: 0.7, exhausted: true })
    fs.quota.set("B/m", { remaining: 0 })
    fs.quota.set("C/m", { remaining: 0.01 })
    fs.quota.set("E/m", { remaining: 1 })
    // D: unknown quota, not exhausted
    expect(names(COMBO_STRATEGIES["fill-first"].order([A, B, C, D, E], ctxOf({ state: fs })))).toEqual(["C", "D", "E", "A", "B"])
  })
})

describe("p2c", () => {
  const s = COMBO_STRATEGIES.p2c
  const setup = (): FakeState => {
    const fs = new FakeState()
    fs.inFlight.set("A/m", 3)
    for (const k of ["B/m", "C/m", "D/m", "E/m"]) fs.inFlight.set(k, 1)
    fs.stats.set("B/m", { errorRate: 0.2, p95LatencyMs: 50 })
    fs.stats.set("C/m", { errorRate: 0.1, p95LatencyMs: undefined })
    fs.stats.set("D/m", { errorRate: 0.1, p95LatencyMs: 200 })
    fs.stats.set("E/m", { errorRate: 0.1, p95LatencyMs: 200 })
    return fs
  }

  it("puts the less loaded of the two drawn first, the rest by load, error rate, p95 (unknown worst), given order", () => {
    // draws index 0 (A) then index 0 of the remaining four (B)
    expect(names(s.order([A, B, C, D, E], ctxOf({ state: setup(), random: scripted(0, 0) })))).toEqual(["B", "D", "E", "C", "A"])
    // draws E (0.8*5 = 4) then D (0.75*4 = 3): a full tie goes to the earlier one, D
    expect(names(s.order([A, B, C, D, E], ctxOf({ state: setup(), random: scripted(0.8, 0.75) })))).toEqual(["D", "E", "C", "B", "A"])
  })

  it("returns a single candidate as is", () => {
    expect(s.order([A], ctxOf())).toEqual([A])
  })

  it("never puts the load-10 candidate first with two less-loaded peers; load 0 first ~2/3", () => {
    const fs = new FakeState()
    fs.inFlight.set("A/m", 0)
    fs.inFlight.set("B/m", 5)
    fs.inFlight.set("C/m", 10)
    const random = seededRandom(99)
    const n = 20_000
    const counts = new Map<string, number>()
    for (let i = 0; i < n; i++) {
      const out = names(s.order([C, B, A], ctxOf({ state: fs, random })))
      counts.set(out[0]!, (counts.get(out[0]!) ?? 0) + 1)
      // the fallbacks follow by load
      if (out[0] === "A") expect(out).toEqual(["A", "B", "C"])
      else expect(out).toEqual(["B", "A", "C"])
    }
    expect(counts.get("C") ?? 0).toBe(0)
    expect(Math.abs(share(counts, "A", n) - 2 / 3)).toBeLessThan(0.03)
  })
})

describe("random", () => {
  const s = COMBO_STRATEGIES.random
  it("collapses repeated keys to their first listing", () => {
    const A2 = cand("A", { targetIndex: 1 })
    const random = seededRandom(5)
    for (let i = 0; i < 100; i++) {
      const out = s.order([A, A2, B], ctxOf({ random }))
      expect(out).toHaveLength(2)
      expect(out).toContain(A)
      expect(out).toContain(B)
      expect(out).not.toContain(A2)
    }
  })

  it("picks each of 4 first ~25% over 20,000 requests", () => {
    const random = seededRandom(11)
    const n = 20_000
    const counts = firstCounts(n, () => s.order([A, B, C, D], ctxOf({ random })))
    for (const k of ["A", "B", "C", "D"]) expect(Math.abs(share(counts, k, n) - 0.25)).toBeLessThan(0.02)
  })
})

describe("strict-random", () => {
  const s = COMBO_STRATEGIES["strict-random"]
  const A1 = cand("A", { targetIndex: 0 })
  const A2 = cand("A", { targetIndex: 1 })
  const B3 = cand("B", { targetIndex: 2 })

  it("draws the first over the raw list; fallbacks are the other distinct keys", () => {
    // 0.5*3 = 1.5 -> the second listing of A; the fallback is B only (no A again)
    expect(s.order([A1, A2, B3], ctxOf({ random: scripted(0.5) }))).toEqual([A2, B3])
    // 0.9*3 -> B; fallback: the first listing of A
    expect(s.order([A1, A2, B3], ctxOf({ random: scripted(0.9) }))).toEqual([B3, A1])
  })

  it("over [A, A, B] picks A first ~2/3 and B ~1/3", () => {
    const random = seededRandom(17)
    const n = 20_000
    const counts = firstCounts(n, () => s.order([A1, A2, B3], ctxOf({ random })))
    expect(Math.abs(share(counts, "A", n) - 2 / 3)).toBeLessThan(0.02)
    expect(Math.abs(share(counts, "B", n) - 1 / 3)).toBeLessThan(0.02)
  })

  it("orders the fallbacks uniformly, one entry per key", () => {
    const list = [cand("A"), cand("A"), cand("A"), cand("B"), cand("C")]
    const random = seededRandom(23)
    const n = 20_000
    let aFirst = 0
    let bSecond = 0
    for (let i = 0; i < n; i++) {
      const out = names(s.order(list, ctxOf({ random })))
      expect(out.slice().sort()).toEqual(["A", "B", "C"])
      if (out[0] === "A") {
        aFirst++
        if (out[1] === "B") bSecond++
      }
    }
    expect(Math.abs(aFirst / n - 0.6)).toBeLessThan(0.02)
    expect(Math.abs(bSecond / aFirst - 0.5)).toBeLessThan(0.03)
  })
})

describe("least-used", () => {
  it("orders ascending by use, ties in given order", () => {
    const fs = new FakeState()
    fs.used.set("A/m", 5)
    fs.used.set("B/m", 2)
    fs.used.set("C/m", 2)
    // D never used
    expect(names(COMBO_STRATEGIES["least-used"].order([A, B, C, D], ctxOf({ state: fs })))).toEqual(["D", "B", "C", "A"])
  })
})

describe("cost-optimized", () => {
  it("orders by 0.6 input + 0.4 output, unpriced last, ties in given order", () => {
    const cs = [
      cand("A", { spec: { input: 0.6, output: 10 } }), // 0.36 + 4 = 4.36 (cheapest input, not cheapest blend)
      cand("N"), // no spec: unknown price
      cand("X", { spec: { input: 5, output: 0 } }), // 3.0
      cand("B", { spec: { input: 2, output: 2 } }), // 2.0
      cand("D", { spec: { input: 2, output: 2 } }), // 2.0, after B (given order)
      cand("Z", { spec: { input: 0, output: 0 } }) // free
    ]
    expect(names(COMBO_STRATEGIES["cost-optimized"].order(cs, ctxOf()))).toEqual(["Z", "B", "D", "X", "A", "N"])
  })
})

describe("reset-aware", () => {
  it("short windows first, unknown windows after, exhausted last", () => {
    const fs = new FakeState()
    const h = 3_600_000
    fs.quota.set("A/m", { remaining: 0.5, windowMs: 5 * h })
    fs.quota.set("B/m", { remaining: 0.5, windowMs: h })
    // C: no quota info at all
    fs.quota.set("D/m", { remaining: 0.5 }) // known quota, unknown window
    fs.quota.set("G/m", { remaining: 0, windowMs: 24 * h }) // exhausted
    fs.quota.set("E/m", { remaining: 0.9, windowMs: 60_000, exhausted: true }) // exhausted, shortest window
    fs.quota.set("F/m", { remaining: 0.1, windowMs: h }) // ties with B
    expect(names(COMBO_STRATEGIES["reset-aware"].order([A, B, C, D, G, E, F], ctxOf({ state: fs })))).toEqual([
      "B",
      "F",
      "A",
      "C",
      "D",
      "E",
      "G"
    ])
  })
})

describe("reset-window", () => {
  it("soonest reset first, unknown after, exhausted last", () => {
    const fs = new FakeState()
    const now = ctxOf().now
    fs.quota.set("A/m", { remaining: 0.5, resetAt: now + 10_000 })
    fs.quota.set("B/m", { remaining: 0.5, resetAt: now + 1_000 })
    fs.quota.set("C/m", { remaining: 0.5 }) // unknown reset
    fs.quota.set("D/m", { remaining: 0, resetAt: now + 50 }) // exhausted, soonest reset of all
    fs.quota.set("F/m", { remaining: 0.2, resetAt: now + 1_000 }) // ties with B
    // E: no quota info
    expect(names(COMBO_STRATEGIES["reset-window"].order([A, C, D, E, B, F], ctxOf({ state: fs })))).toEqual(["B", "F", "A", "C", "E", "D"])
  })
})

describe("headroom", () => {
  it("most remaining first, unknown counts as 1.0, exhausted last", () => {
    const fs = new FakeState()
    fs.quota.set("A/m", { remaining: 0.3 })
    // B: unknown -> 1.0
    fs.quota.set("C/m", { remaining: 1 }) // ties with B, listed after it
    fs.quota.set("D/m", { remaining: 0.9, exhausted: true })
    fs.quota.set("E/m", { remaining: 0 })
    fs.quota.set("F/m", { remaining: 0.6 })
    expect(names(COMBO_STRATEGIES.headroom.order([A, E, B, C, D, F], ctxOf({ state: fs })))).toEqual(["B", "C", "F", "A", "D", "E"])
  })
})

describe("lkgp", () => {
  const s = COMBO_STRATEGIES.lkgp
  it("puts the last good target of this combo first, then the given order", () => {
    const fs = new FakeState()
    fs.lastGood.set("combo", "C/m")
    fs.lastGood.set("gone", "X/m")
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs })))).toEqual(["C", "A", "B", "D"])
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs, scope: "gone" })))).toEqual(["A", "B", "C", "D"])
    expect(names(s.order([A, B, C, D], ctxOf({ state: fs, scope: "fresh" })))).toEqual(["A", "B", "C", "D"])
  })
})

describe("context-optimized", () => {
  const s = COMBO_STRATEGIES["context-optimized"]
  const small = cand("S", { spec: { contextWindow: 8_000 } })
  const huge = cand("H", { spec: { contextWindow: 200_000 } })
  const mid = cand("M", { spec: { contextWindow: 32_000 } })
  const exact = cand("X", { spec: { contextWindow: 12_000 } })
  const unknown = cand("U")

  it("drops windows that are too small; best fit first; unknown windows after known", () => {
    // need = 10,000 + 2,000
    expect(names(s.order([small, unknown, huge, mid, exact], ctxOf({ tokenEstimate: 10_000, maxOutputTokens: 2_000 })))).toEqual([
      "X",
      "M",
      "H",
      "U"
    ])
    // without max output tokens, need = 10,000: small still too small
    expect(names(s.order([small, huge], ctxOf({ tokenEstimate: 10_000 })))).toEqual(["H"])
  })

  it("falls back to all candidates largest first when none fits", () => {
    expect(names(s.order([small, huge, mid], ctxOf({ tokenEstimate: 500_000 })))).toEqual(["H", "M", "S"])
  })

  it("keeps only unknown windows when no known window fits", () => {
    expect(names(s.order([small, unknown, huge], ctxOf({ tokenEstimate: 500_000 })))).toEqual(["U"])
  })
})

// ---------------------------------------------------------------- quota-share

describe("quota-share", () => {
  const deficitsOf = (fs: FakeState, group = "combo") => Object.fromEntries(fs.groups.get(group) ?? new Map())

  it("deficit round robin: credits whole rounds, picks the largest deficit, charges the cost", () => {
    const fs = new FakeState()
    const a = cand("A", { weight: 1 })
    const b = cand("B", { weight: 1 })
    const c = cand("C", { weight: 2 })
    // none can pay 1500: one round (C reaches 2000); C pays
    expect(names(quotaShare.order([a, b, c], ctxOf({ state: fs, tokenEstimate: 1500 })))).toEqual(["C", "A", "B"])
    expect(deficitsOf(fs)).toEqual({ "A/m": 1000, "B/m": 1000, "C/m": 500 })
    // still none can pay: one more round; C (2500) pays again
    expect(names(quotaShare.order([a, b, c], ctxOf({ state: fs, tokenEstimate: 1500 })))).toEqual(["C", "A", "B"])
    expect(deficitsOf(fs)).toEqual({ "A/m": 2000, "B/m": 2000, "C/m": 1000 })
    // A and B can pay without a round; tie goes to the given order
    expect(names(quotaShare.order([a, b, c], ctxOf({ state: fs, tokenEstimate: 1500 })))).toEqual(["A", "B", "C"])
    expect(deficitsOf(fs)).toEqual({ "A/m": 500, "B/m": 2000, "C/m": 1000 })
  })

  it("adds as many rounds as the cheapest-to-reach candidate needs, and charges at least 1 token", () => {
    const fs = new FakeState()
    const a = cand("A", { weight: 1 })
    const b = cand("B", { weight: 0 }) // counts as 1
    expect(names(quotaShare.order([a, b], ctxOf({ state: fs, tokenEstimate: 3500 })))).toEqual(["A", "B"])
    expect(deficitsOf(fs)).toEqual({ "A/m": 500, "B/m": 4000 })
    expect(names(quotaShare.order([a, b], ctxOf({ state: fs, tokenEstimate: 0 })))).toEqual(["B", "A"])
    expect(deficitsOf(fs)).toEqual({ "A/m": 500, "B/m": 3999 })
  })

  it("caps banked credit at 10 x (quantum + cost)", () => {
    const fs = new FakeState()
    const a = cand("A", { weight: 1 })
    const b = cand("B", { weight: 2 })
    const d = fs.state.deficits("combo")
    d.set("A/m", 1e9)
    d.set("B/m", 5e8)
    expect(names(quotaShare.order([a, b], ctxOf({ state: fs, tokenEstimate: 100 })))).toEqual(["B", "A"])
    // B: min(5e8, 10 x (2000 + 100)) - 100 = 20,900; A: 10 x (1000 + 100) = 11,000
    expect(deficitsOf(fs)).toEqual({ "A/m": 11_000, "B/m": 20_900 })
  })

  it("serves tokens in proportion to weight (1:3) with mixed request sizes, deficits within the cap", () => {
    const fs = new FakeState()
    const a = cand("A", { weight: 1 })
    const b = cand("B", { weight: 3 })
    const costs = [500, 1500, 3000]
    const served = new Map<string, number>()
    let total = 0
    for (let i = 0; i < 4000; i++) {
      const cost = costs[i % 3]!
      const out = quotaShare.order([a, b], ctxOf({ state: fs, tokenEstimate: cost }))
      const first = out[0]!
      served.set(first.key, (served.get(first.key) ?? 0) + cost)
      total += cost
      const d = fs.groups.get("combo")!
      for (const c of [a, b]) {
        const v = d.get(c.key) ?? 0
        expect(v).toBeGreaterThanOrEqual(0)
        expect(v).toBeLessThanOrEqual(10 * (1000 * c.weight + cost))
      }
    }
    expect(Math.abs((served.get("A/m") ?? 0) / total - 0.25)).toBeLessThan(0.03)
    expect(Math.abs((served.get("B/m") ?? 0) / total - 0.75)).toBeLessThan(0.03)
  })

  it("never puts a saturated candidate first while a non-saturated one exists", () => {
    const fs = new FakeState()
    const a = cand("A", { weight: 10, maxConcurrent: 2 })
    const b = cand("B", { weight: 1, maxConcurrent: 5 })
    const c = cand("C", { weight: 1 })
    const random = seededRandom(8)
    for (let i = 0; i < 2000; i++) {
      const aLoad = Math.floor(random.next() * 4) // 0..3: saturated at >= 2
      const bLoad = Math.floor(random.next() * 7) // 0..6: saturated at >= 5
      fs.inFlight.set("A/m", aLoad)
      fs.inFlight.set("B/m", bLoad)
      if (i % 7 === 0) fs.quota.set("C/m", { remaining: 0, exhausted: true })
      else fs.quota.delete("C/m")
      const cExhausted = i % 7 === 0
      const satA = aLoad >= 2
      const satB = bLoad >= 5
      const out = names(quotaShare.order([a, b, c], ctxOf({ state: fs, tokenEstimate: 800 })))
      const saturated = new Set([...(satA ? ["A"] : []), ...(satB ? ["B"] : []), ...(cExhausted ? ["C"] : [])])
      if (saturated.size < 3) {
        expect(saturated.has(out[0]!)).toBe(false)
        // saturated ones are all after the non-saturated ones
        const firstSat = out.findIndex((n) => saturated.has(n))
        if (firstSat >= 0) expect(out.slice(firstSat).every((n) => saturated.has(n))).toBe(true)
      }
    }
  })

  it("orders saturated candidates by in-flight ascending, and leaves deficits alone when all are saturated", () => {
    const fs = new FakeState()
    const a = cand("A", { maxConcurrent: 5 })
    const b = cand("B", { maxConcurrent: 1 })
    const c = cand("C")
    const d = cand("D", { maxConcurrent: 3 })
    fs.inFlight.set("A/m", 5)
    fs.inFlight.set("B/m", 1)
    fs.inFlight.set("D/m", 3)
    fs.quota.set("C/m", { remaining: 0.5, exhausted: true })
    fs.inFlight.set("C/m", 0)
    const group = fs.state.deficits("combo")
    group.set("A/m", 123)
    group.set("D/m", 7)
    expect(names(quotaShare.order([a, b, c, d], ctxOf({ state: fs, tokenEstimate: 5000 })))).toEqual(["C", "B", "D", "A"])
    expect(deficitsOf(fs)).toEqual({ "A/m": 123, "D/m": 7 })
    // one becomes free: it goes first, the saturated follow by in-flight
    fs.inFlight.set("A/m", 0)
    expect(names(quotaShare.order([a, b, c, d], ctxOf({ state: fs, tokenEstimate: 5000 })))).toEqual(["A", "C", "B", "D"])
  })

  it("keeps the deficits of each group apart", () => {
    const fs = new FakeState()
    quotaShare.order([A, B], ctxOf({ state: fs, scope: "g1", tokenEstimate: 1000 }))
    expect(deficitsOf(fs, "g1")).toEqual({ "A/m": 0, "B/m": 1000 })
    expect(fs.groups.get("g2")).toBeUndefined()
  })
})
