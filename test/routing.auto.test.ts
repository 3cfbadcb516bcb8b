import { describe, expect, it } from "vitest"
import type { CanonicalRequest, Message } from "../src/domain/canonical.js"
import type { Connection } from "../src/upstream/providers/Connections.js"
import type { ModelSpec } from "../src/domain/catalog/catalog.js"
import {
  ADVERTISED_AUTO_IDS,
  AUTO_VARIANT_IDS,
  budgetFromHeader,
  costStrategy,
  DEFAULT_WEIGHTS,
  estimateCostUsd,
  factorScores,
  filterPool,
  latencyStrategy,
  lkgpStrategy,
  MODE_PACKS,
  modeFromHeader,
  normalizeWeights,
  orderAuto,
  parseAutoId,
  probeTimeoutMs,
  recommendedTier,
  requestFeatures,
  resolveWeights,
  RouterRegistry,
  rulesStrategy,
  scoreEntry,
  SelfHealing,
  slaEvaluate,
  slaStrategy,
  taskFit
} from "../src/services/routing/auto/index.js"
import { seededRandom } from "../src/services/routing/random.js"
import {
  FACTORS,
  type PoolEntry,
  type RequestFeatures,
  type RouterStrategy,
  type RoutingContext,
  type Weights
} from "../src/services/routing/types.js"

// ---------------------------------------------------------------- helpers

const MIN = 60_000

const spec = (input: number, output: number): ModelSpec => ({
  id: "m",
  name: "m",
  kind: "chat",
  contextWindow: 128_000,
  maxOutput: 8192,
  capabilities: { tools: true, vision: false, reasoning: false, json: true },
  pricing: { input, output },
  tier: "standard"
})

type EntryOpts = Partial<Omit<PoolEntry, "candidate">> & { readonly pricing?: { input: number; output: number } }

const entry = (key: string, o: EntryOpts = {}): PoolEntry => {
  const [conn, ...rest] = key.split("/")
  const model = o.model ?? (rest.join("/") || "some-model")
  return {
    candidate: {
      connection: {} as Connection,
      model,
      spec: o.pricing ? spec(o.pricing.input, o.pricing.output) : undefined,
      key,
      weight: 1,
      targetIndex: 0
    },
    provider: o.provider ?? conn ?? "p",
    model,
    breaker: o.breaker ?? "CLOSED",
    costPer1MTokens: o.costPer1MTokens ?? 1,
    p95LatencyMs: "p95LatencyMs" in o ? o.p95LatencyMs : 1000,
    latencyStdDevMs: "latencyStdDevMs" in o ? o.latencyStdDevMs : 100,
    errorRate: o.errorRate ?? 0,
    quotaRemaining: o.quotaRemaining ?? 1,
    resetInMs: o.resetInMs,
    accountTier: o.accountTier ?? "standard",
    modelTier: o.modelTier ?? "standard",
    contextWindow: "contextWindow" in o ? o.contextWindow : 128_000,
    capabilities: o.capabilities ?? { tools: true, vision: false, reasoning: false },
    inFlight: o.inFlight ?? 0,
    providerInFlight: o.providerInFlight ?? o.inFlight ?? 0,
    providerConnections: o.providerConnections ?? 1
  }
}

const features = (o: Partial<RequestFeatures> = {}): RequestFeatures => ({
  tokenEstimate: 100,
  maxOutputTokens: undefined,
  hasTools: false,
  hasImages: false,
  wantsReasoning: false,
  taskType: "chat",
  specificity: 0.2,
  sessionId: undefined,
  ...o
})

const ctx = (o: Partial<RoutingContext> = {}): RoutingContext => ({
  request: features(),
  weights: DEFAULT_WEIGHTS,
  lkgpEnabled: true,
  now: 0,
  random: seededRandom(1),
  ...o
})

const sum = (w: Weights): number => Object.values(w).reduce((a, b) => a + (b ?? 0), 0)

const req = (messages: ReadonlyArray<Message>, o: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: "auto",
  system: [],
  messages,
  tools: [],
  stream: false,
  ...o
})
const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] })

// ---------------------------------------------------------------- weights

describe("weights", () => {
  it("default weights equal the spec table and sum to 1", () => {
    expect(DEFAULT_WEIGHTS).toEqual({
      health: 0.2,
      quota: 0.15,
      costInv: 0.15,
      latencyInv: 0.12,
      taskFit: 0.08,
      stability: 0.05,
      tierPriority: 0.05,
      tierAffinity: 0.05,
      specificityMatch: 0.05,
      contextAffinity: 0.05,
      connectionDensity: 0.05,
      resetWindowAffinity: 0
    })
    expect(Object.keys(DEFAULT_WEIGHTS).sort()).toEqual([...FACTORS].sort())
    expect(sum(DEFAULT_WEIGHTS)).toBeCloseTo(1, 10)
  })

  it("each mode pack equals its column of the spec table", () => {
    expect(MODE_PACKS["ship-fast"]).toEqual({
      quota: 0.14,
      health: 0.28,
      costInv: 0.05,
      latencyInv: 0.32,
      taskFit: 0.1,
      stability: 0,
      tierPriority: 0.05
    })
    expect(MODE_PACKS["cost-saver"]).toEqual({
      quota: 0.14,
      health: 0.19,
      costInv: 0.37,
      latencyInv: 0.05,
      taskFit: 0.1,
      stability: 0.05,
      tierPriority: 0.05
    })
    expect(MODE_PACKS["quality-first"]).toEqual({
      quota: 0.1,
      health: 0.18,
      costInv: 0.05,
      latencyInv: 0.05,
      taskFit: 0.37,
      stability: 0.15,
      tierPriority: 0.05
    })
    expect(MODE_PACKS["offline-friendly"]).toEqual({
      quota: 0.37,
      health: 0.28,
      costInv: 0.1,
      latencyInv: 0.05,
      taskFit: 0,
      stability: 0.1,
      tierPriority: 0.05
    })
    expect(MODE_PACKS["reliability-first"]).toEqual({
      health: 0.3,
      stability: 0.25,
      latencyInv: 0.15,
      quota: 0.15,
      costInv: 0.05,
      taskFit: 0.05,
      tierPriority: 0.05
    })
  })

  it("packs sum to 1 once normalised (the spec's columns as printed sum to 0.94 / 0.95); reliability-first sums to 1 as is", () => {
    expect(sum(MODE_PACKS["reliability-first"])).toBeCloseTo(1, 10)
    expect(sum(MODE_PACKS["ship-fast"])).toBeCloseTo(0.94, 10)
    for (const name of ["cost-saver", "quality-first", "offline-friendly"] as const) expect(sum(MODE_PACKS[name])).toBeCloseTo(0.95, 10)
    for (const w of Object.values(MODE_PACKS)) expect(sum(normalizeWeights(w))).toBeCloseTo(1, 10)
    // the score divides by the weight sum, so a pack and its normalised form rank identically
    const pool = [entry("a/x", { costPer1MTokens: 1 }), entry("b/y", { costPer1MTokens: 9, p95LatencyMs: 300 })]
    for (const w of Object.values(MODE_PACKS))
      for (const e of pool)
        expect(scoreEntry(e, pool, ctx({ weights: w }))).toBeCloseTo(scoreEntry(e, pool, ctx({ weights: normalizeWeights(w) })), 12)
  })

  it("X-Gateway-Mode aliases and pack names, case-insensitive and trimmed; unknown ignored", () => {
    expect(modeFromHeader("fast")).toBe(MODE_PACKS["ship-fast"])
    expect(modeFromHeader("cheap")).toBe(MODE_PACKS["cost-saver"])
    expect(modeFromHeader("quality")).toBe(MODE_PACKS["quality-first"])
    expect(modeFromHeader("reliable")).toBe(MODE_PACKS["reliability-first"])
    expect(modeFromHeader("offline")).toBe(MODE_PACKS["offline-friendly"])
    for (const p of ["ship-fast", "cost-saver", "quality-first", "offline-friendly", "reliability-first"] as const)
      expect(modeFromHeader(p)).toBe(MODE_PACKS[p])
    expect(modeFromHeader("balanced")).toBe(DEFAULT_WEIGHTS)
    expect(modeFromHeader("default")).toBe(DEFAULT_WEIGHTS)
    expect(modeFromHeader("  Quality-First ")).toBe(MODE_PACKS["quality-first"])
    expect(modeFromHeader("FAST")).toBe(MODE_PACKS["ship-fast"])
    expect(modeFromHeader("turbo")).toBeUndefined()
    expect(modeFromHeader("")).toBeUndefined()
    expect(modeFromHeader(undefined)).toBeUndefined()
    expect(modeFromHeader("constructor")).toBeUndefined()
  })

  it("weight precedence: header > combo overrides > saved pack > base", () => {
    const base: Weights = { health: 1 }
    expect(resolveWeights({ base })).toBe(base)
    expect(resolveWeights({ base, modePack: "cost-saver" })).toEqual(MODE_PACKS["cost-saver"])
    expect(resolveWeights({ base, modePack: "nonsense" })).toBe(base)
    expect(resolveWeights({ base, modePack: "cost-saver", comboWeights: { costInv: 0.9, quota: 0 } })).toEqual({
      ...MODE_PACKS["cost-saver"],
      costInv: 0.9,
      quota: 0
    })
    expect(resolveWeights({ base, comboWeights: { latencyInv: 0.5 } })).toEqual({ health: 1, latencyInv: 0.5 })
    // unknown factor names and invalid values are ignored
    const odd = { bogus: 3, health: -1, quota: Number.NaN, costInv: Infinity, taskFit: 0.4 } as unknown as Weights
    expect(resolveWeights({ base, comboWeights: odd })).toEqual({ health: 1, taskFit: 0.4 })
    // a valid header replaces everything; balanced forces the defaults; an unknown header is ignored
    expect(resolveWeights({ base, modePack: "cost-saver", comboWeights: { costInv: 0.9 }, header: "reliable" })).toBe(
      MODE_PACKS["reliability-first"]
    )
    expect(resolveWeights({ base, modePack: "cost-saver", comboWeights: { costInv: 0.9 }, header: "balanced" })).toBe(DEFAULT_WEIGHTS)
    expect(resolveWeights({ base, modePack: "cost-saver", header: "warp" })).toEqual(MODE_PACKS["cost-saver"])
  })

  it("X-Gateway-Budget accepts only positive finite numbers", () => {
    expect(budgetFromHeader("0.05")).toBe(0.05)
    expect(budgetFromHeader(" 2 ")).toBe(2)
    expect(budgetFromHeader("1e-3")).toBe(0.001)
    for (const bad of ["0", "-1", "abc", "", "Infinity", "NaN", "1,5", "0x10", undefined]) expect(budgetFromHeader(bad)).toBeUndefined()
    expect(budgetFromHeader(3)).toBe(3)
    expect(budgetFromHeader(-3)).toBeUndefined()
  })
})

// ---------------------------------------------------------------- features

describe("request features", () => {
  it("estimates tokens from every text part plus 85 per image", () => {
    const tools = [{ name: "read", description: "reads a file", parameters: { type: "object" } }]
    const r = req(
      [
        {
          role: "user",
          content: [
            { type: "text", text: "12345678" },
            { type: "image", source: { kind: "url", url: "http://x" } }
          ]
        },
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "read", input: { a: 1 } }] },
        { role: "tool", content: [{ type: "tool_result", toolUseId: "t1", content: [{ type: "text", text: "abcd" }] }] }
      ],
      { system: [{ type: "text", text: "sys!" }], tools, maxTokens: 500 }
    )
    const f = requestFeatures(r, "s1")
    const chars = 4 + 8 + JSON.stringify({ a: 1 }).length + 4 + JSON.stringify(tools).length
    expect(f.tokenEstimate).toBe(Math.ceil(chars / 4) + 85)
    expect(f.hasImages).toBe(true)
    expect(f.hasTools).toBe(true)
    expect(f.maxOutputTokens).toBe(500)
    expect(f.sessionId).toBe("s1")
  })

  it("hasTools from tool_use in history without definitions; wantsReasoning only when enabled", () => {
    const r = req([user("hi"), { role: "assistant", content: [{ type: "tool_use", id: "1", name: "x", input: {} }] }])
    expect(requestFeatures(r, undefined).hasTools).toBe(true)
    expect(requestFeatures(req([user("hi")]), undefined).hasTools).toBe(false)
    expect(requestFeatures(req([user("hi")], { reasoning: { enabled: true } }), undefined).wantsReasoning).toBe(true)
    expect(requestFeatures(req([user("hi")], { reasoning: { enabled: false } }), undefined).wantsReasoning).toBe(false)
  })

  it("classifies the task type of the last user message", () => {
    const t = (text: string, o: Partial<CanonicalRequest> = {}) =>
      requestFeatures(req([user("earlier: review"), user(text)], o), undefined).taskType
    expect(t("I get a TypeError exception in my function")).toBe("debugging")
    expect(t("please fix the failing test")).toBe("debugging")
    expect(t("Can you review this PR?")).toBe("review")
    expect(t("plan the architecture for a new service")).toBe("planning")
    expect(t("write a README for the project")).toBe("documentation")
    expect(t("compare these two approaches")).toBe("analysis")
    expect(t("implement a function that sorts in TypeScript")).toBe("coding")
    expect(t("what does this do?\n```\nx = 1\n```")).toBe("coding")
    expect(t("hello there", { tools: [{ name: "x", parameters: {} }] })).toBe("coding")
    expect(t("hello, how are you?")).toBe("chat")
    expect(t("a proposal")).toBe("chat") // lower-case "pr" inside words is not a PR
  })

  it("specificity grows with length, tools, code blocks and reasoning", () => {
    const short = requestFeatures(req([user("hi")]), undefined).specificity
    expect(short).toBeLessThan(0.01)
    const long = requestFeatures(req([user("x".repeat(16_000))]), undefined).specificity
    expect(long).toBeCloseTo(0.4, 5)
    const all = requestFeatures(
      req([user("x".repeat(16_000) + "\n```js\n```")], { tools: [{ name: "t", parameters: {} }], reasoning: { enabled: true } }),
      undefined
    ).specificity
    expect(all).toBe(1)
  })
})

// ---------------------------------------------------------------- task fitness

describe("task fitness map", () => {
  it("matches wildcard patterns against the model id and provider/model, most specific first", () => {
    expect(taskFit("claude-opus-4-1", "anthropic", "coding")).toBeGreaterThan(taskFit("claude-haiku-4-5", "anthropic", "coding"))
    expect(taskFit("anthropic/claude-sonnet-4.5", "openrouter", "coding")).toBe(taskFit("claude-sonnet-4-5", "anthropic", "coding"))
    expect(taskFit("gpt-5-mini", "openai", "coding")).toBeLessThan(taskFit("gpt-5", "openai", "coding"))
    expect(taskFit("qwen2.5-coder", "ollama", "coding")).toBeGreaterThan(taskFit("qwen2.5-coder", "ollama", "chat"))
    expect(taskFit("o3", "openai", "analysis")).toBeGreaterThan(0.9)
    expect(taskFit("GEMINI-2.5-PRO", "gemini", "analysis")).toBe(taskFit("gemini-2.5-pro", "gemini", "analysis"))
  })

  it("falls back to 0.5 for unknown models; other Ollama models are not taken for llama", () => {
    for (const task of ["coding", "review", "planning", "analysis", "debugging", "documentation", "chat"] as const)
      expect(taskFit("totally-unknown", "custom", task)).toBe(0.5)
    expect(taskFit("phi3", "ollama", "coding")).toBe(0.5)
    expect(taskFit("llama3.2", "ollama", "chat")).not.toBe(0.5)
  })
})

// ---------------------------------------------------------------- factors

describe("scoring factors", () => {
  it("health per breaker state", () => {
    const states = { CLOSED: 1, DEGRADED: 0.75, HALF_OPEN: 0.5, OPEN: 0 } as const
    for (const [state, v] of Object.entries(states)) {
      const e = entry("a/x", { breaker: state as PoolEntry["breaker"] })
      expect(factorScores(e, [e], ctx()).health).toBe(v)
    }
  })

  it("costInv: cheapest 1, dearest 0, linear between, all equal 1", () => {
    const pool = [entry("a/x", { costPer1MTokens: 1 }), entry("b/x", { costPer1MTokens: 3 }), entry("c/x", { costPer1MTokens: 5 })]
    expect(pool.map((e) => factorScores(e, pool, ctx()).costInv)).toEqual([1, 0.5, 0])
    const same = [entry("a/x", { costPer1MTokens: 2 }), entry("b/x", { costPer1MTokens: 2 })]
    expect(same.map((e) => factorScores(e, same, ctx()).costInv)).toEqual([1, 1])
  })

  it("latencyInv: fastest 1, slowest 0, unknown p95 0.5", () => {
    const pool = [entry("a/x", { p95LatencyMs: 100 }), entry("b/x", { p95LatencyMs: 300 }), entry("c/x", { p95LatencyMs: undefined })]
    expect(pool.map((e) => factorScores(e, pool, ctx()).latencyInv)).toEqual([1, 0, 0.5])
  })

  it("quota, tierPriority, resetWindowAffinity", () => {
    const e = entry("a/x", { quotaRemaining: 0.3 })
    expect(factorScores(e, [e], ctx()).quota).toBe(0.3)
    const tiers = { ultra: 1, pro: 0.67, standard: 0.33, free: 0 } as const
    for (const [tier, v] of Object.entries(tiers)) {
      const t = entry("a/x", { accountTier: tier as PoolEntry["accountTier"] })
      expect(factorScores(t, [t], ctx()).tierPriority).toBe(v)
    }
    const soon = entry("a/x", { resetInMs: 6 * 3600_000 })
    expect(factorScores(soon, [soon], ctx()).resetWindowAffinity).toBeCloseTo(0.75, 10)
    const far = entry("a/x", { resetInMs: 48 * 3600_000 })
    expect(factorScores(far, [far], ctx()).resetWindowAffinity).toBe(0)
    const unknown = entry("a/x")
    expect(factorScores(unknown, [unknown], ctx()).resetWindowAffinity).toBe(0.5)
  })

  it("stability from deviation and error rate; unknown latency", () => {
    const e = entry("a/x", { p95LatencyMs: 1000, latencyStdDevMs: 200, errorRate: 0.1 })
    expect(factorScores(e, [e], ctx()).stability).toBeCloseTo(1 - 0.1 - 0.05, 10)
    const u = entry("a/x", { p95LatencyMs: undefined, latencyStdDevMs: undefined, errorRate: 0.2 })
    expect(factorScores(u, [u], ctx()).stability).toBeCloseTo(1 - 0.1 - 0.25, 10)
    const worst = entry("a/x", { p95LatencyMs: 100, latencyStdDevMs: 500, errorRate: 1 })
    expect(factorScores(worst, [worst], ctx()).stability).toBe(0)
  })

  it("contextAffinity: 1 up to half the window, 0.5 at the window, 0 when too small, 0.5 unknown", () => {
    const at = (tokens: number, out: number | undefined, window: number | undefined) => {
      const e = entry("a/x", { contextWindow: window })
      return factorScores(e, [e], ctx({ request: features({ tokenEstimate: tokens, maxOutputTokens: out }) })).contextAffinity
    }
    expect(at(400, 100, 1000)).toBe(1)
    expect(at(700, 50, 1000)).toBeCloseTo(0.75, 10)
    expect(at(900, 100, 1000)).toBe(0.5)
    expect(at(900, 101, 1000)).toBe(0)
    expect(at(5000, undefined, 1000)).toBe(0)
    expect(at(10, undefined, undefined)).toBe(0.5)
  })

  it("tierAffinity and specificityMatch against the request", () => {
    const heavy = features({ taskType: "coding", specificity: 0.6 })
    const light = features({ taskType: "chat", specificity: 0.1 })
    expect(recommendedTier(heavy)).toBe("premium")
    expect(recommendedTier(light)).toBe("free")
    expect(recommendedTier(features({ taskType: "analysis", specificity: 0.9 }))).toBe("standard")
    const f = (tier: PoolEntry["modelTier"], r: RequestFeatures) => {
      const e = entry("a/x", { modelTier: tier })
      return factorScores(e, [e], ctx({ request: r }))
    }
    expect(f("premium", heavy).tierAffinity).toBe(1)
    expect(f("standard", heavy).tierAffinity).toBe(0.5)
    expect(f("free", heavy).tierAffinity).toBe(0)
    expect(f("premium", heavy).specificityMatch).toBeCloseTo(0.6, 10)
    expect(f("free", light).specificityMatch).toBeCloseTo(0.9, 10)
    expect(f("standard", light).specificityMatch).toBeCloseTo(0.6, 10)
  })

  it("connectionDensity prefers the less loaded connection of one provider", () => {
    const a = entry("c1/x", { provider: "openai", inFlight: 5, providerConnections: 2 })
    const b = entry("c2/x", { provider: "openai", inFlight: 1, providerConnections: 2 })
    const pool = [a, b]
    expect(factorScores(b, pool, ctx()).connectionDensity).toBeGreaterThan(factorScores(a, pool, ctx()).connectionDensity)
    expect(factorScores(b, pool, ctx()).connectionDensity).toBe(0.5)
    const lone = entry("c3/x", { inFlight: 0 })
    expect(factorScores(lone, [lone], ctx()).connectionDensity).toBe(1)
  })

  it("every factor stays in [0, 1]", () => {
    const pool = [
      entry("a/x", { breaker: "OPEN", quotaRemaining: 7, errorRate: 3, resetInMs: -5, inFlight: 1000 }),
      entry("b/y", { costPer1MTokens: 0, p95LatencyMs: 0, latencyStdDevMs: 0, quotaRemaining: -1 })
    ]
    for (const e of pool) for (const v of Object.values(factorScores(e, pool, ctx()))) expect(v >= 0 && v <= 1).toBe(true)
  })

  it("score = Σ weight × factor / Σ weight; absent weights count 0; all-zero weights give 0", () => {
    const e = entry("a/x", { breaker: "HALF_OPEN", quotaRemaining: 0.2 })
    expect(scoreEntry(e, [e], ctx({ weights: { health: 1 } }))).toBe(0.5)
    expect(scoreEntry(e, [e], ctx({ weights: { health: 1, quota: 3 } }))).toBeCloseTo((0.5 + 3 * 0.2) / 4, 10)
    expect(scoreEntry(e, [e], ctx({ weights: {} }))).toBe(0)
    expect(scoreEntry(e, [e], ctx({ weights: { health: 0, quota: 0 } }))).toBe(0)
  })
})

// ---------------------------------------------------------------- router strategies

describe("router strategies", () => {
  const good = entry("a/x", { costPer1MTokens: 1, p95LatencyMs: 200, quotaRemaining: 1 })
  const poor = entry("b/y", { costPer1MTokens: 20, p95LatencyMs: 3000, quotaRemaining: 0.1, errorRate: 0.3 })
  const openBest = entry("c/z", { breaker: "OPEN", costPer1MTokens: 0.1, p95LatencyMs: 50 })

  it("rules takes the highest weighted score and drops OPEN candidates", () => {
    const d = rulesStrategy.select([poor, openBest, good], ctx())
    expect(d.key).toBe("a/x")
    expect(d.strategy).toBe("rules")
    expect(d.candidatesConsidered).toBe(2)
    expect(d.score).toBeCloseTo(scoreEntry(good, [poor, good], ctx()), 12)
    expect(d.provider).toBe("a")
    expect(d.model).toBe("x")
  })

  it("rules uses the whole pool when every candidate is OPEN; ties go to pool order", () => {
    const o1 = entry("a/x", { breaker: "OPEN", costPer1MTokens: 9 })
    const o2 = entry("b/y", { breaker: "OPEN", costPer1MTokens: 1 })
    const d = rulesStrategy.select([o1, o2], ctx())
    expect(d.key).toBe("b/y")
    expect(d.candidatesConsidered).toBe(2)
    const t1 = entry("a/x")
    const t2 = entry("b/x")
    expect(rulesStrategy.select([t1, t2], ctx()).key).toBe("a/x")
    expect(rulesStrategy.select([t2, t1], ctx()).key).toBe("b/x")
  })

  it("cost (eco) takes the lowest costPer1MTokens among non-OPEN", () => {
    const pool = [
      entry("a/x", { costPer1MTokens: 5 }),
      entry("b/y", { costPer1MTokens: 1, breaker: "OPEN" }),
      entry("c/z", { costPer1MTokens: 2 })
    ]
    const d = costStrategy.select(pool, ctx())
    expect(d.key).toBe("c/z")
    expect(d.strategy).toBe("cost")
    expect(new RouterRegistry().get("eco")).toBe(costStrategy)
    expect(new RouterRegistry().get("ECO")!.select(pool, ctx()).key).toBe("c/z")
  })

  it("latency (fast) sorts by p95 + errorRate × 1000; unknown p95 last but eligible", () => {
    const a = entry("a/x", { p95LatencyMs: 1000, errorRate: 0.5 }) // 1500
    const b = entry("b/y", { p95LatencyMs: 1200, errorRate: 0 }) // 1200
    const c = entry("c/z", { p95LatencyMs: undefined })
    const o = entry("d/w", { p95LatencyMs: 10, breaker: "OPEN" })
    expect(latencyStrategy.select([c, a, b, o], ctx()).key).toBe("b/y")
    expect(latencyStrategy.select([a, entry("e/v", { p95LatencyMs: 1499, errorRate: 0.001 })], ctx()).key).toBe("a/x") // 1500 vs 1500: pool order
    expect(latencyStrategy.select([c, o], ctx()).key).toBe("c/z")
    expect(new RouterRegistry().get("fast")).toBe(latencyStrategy)
  })

  it("sla-aware composite: latency 35%, error 35%, health 15%, cost 10%, stability 5%", () => {
    const e = entry("a/x", { p95LatencyMs: 2500, latencyStdDevMs: 500, errorRate: 0.1, costPer1MTokens: 20 })
    const ev = slaEvaluate(e, undefined)
    expect(ev.latency).toBe(1)
    expect(ev.error).toBeCloseTo(0.5, 10)
    expect(ev.cost).toBeCloseTo(0.5, 10)
    expect(ev.composite).toBeCloseTo(0.35 * 1 + 0.35 * 0.5 + 0.15 * 1 + 0.1 * 0.5 + 0.05 * 0.85, 10)
    expect(ev.violations).toBe(2)
    const slow = slaEvaluate(entry("a/x", { p95LatencyMs: 4000, errorRate: 0, costPer1MTokens: 0 }), { targetP95Ms: 1000 })
    expect(slow.latency).toBeCloseTo(0.25, 10)
    expect(slow.error).toBe(1)
    expect(slow.cost).toBe(1)
    expect(slow.violations).toBe(1)
    expect(slaStrategy.select([e], ctx()).score).toBeCloseTo(ev.composite, 12)
  })

  it("sla-aware with hard constraints sorts by violations first, then composite", () => {
    const a = entry("a/x", { p95LatencyMs: 100, latencyStdDevMs: undefined, errorRate: 0, costPer1MTokens: 20 }) // 1 violation, composite 0.9375
    const b = entry("b/y", { p95LatencyMs: 4000, latencyStdDevMs: undefined, errorRate: 0.04, costPer1MTokens: 9, breaker: "HALF_OPEN" }) // 0 violations, 0.9115
    expect(slaEvaluate(a, undefined).composite).toBeCloseTo(0.9375, 10)
    expect(slaEvaluate(b, undefined).composite).toBeCloseTo(0.9115, 10)
    expect(slaStrategy.select([a, b], ctx()).key).toBe("a/x")
    const hard = slaStrategy.select([a, b], ctx({ sla: { hardConstraints: true } }))
    expect(hard.key).toBe("b/y")
    expect(hard.strategy).toBe("sla-aware")
    expect(new RouterRegistry().get("sla")).toBe(slaStrategy)
  })

  it("lkgp: disabled → rules; last known good non-OPEN → it; otherwise rules", () => {
    const pool = [good, poor]
    const off = lkgpStrategy.select(pool, ctx({ lkgpEnabled: false, lastKnownGood: "b/y" }))
    expect(off.key).toBe("a/x")
    expect(off.reason).toMatch(/disabled/)
    const on = lkgpStrategy.select(pool, ctx({ lastKnownGood: "b/y" }))
    expect(on.key).toBe("b/y")
    expect(on.strategy).toBe("lkgp")
    const openLkg = lkgpStrategy.select([good, { ...poor, breaker: "OPEN" }], ctx({ lastKnownGood: "b/y" }))
    expect(openLkg.key).toBe("a/x")
    expect(lkgpStrategy.select(pool, ctx({ lastKnownGood: "gone/model" })).key).toBe("a/x")
    expect(lkgpStrategy.select(pool, ctx({ lastKnownGood: undefined })).key).toBe("a/x")
  })
})

// ---------------------------------------------------------------- registry

describe("router registry", () => {
  const lastOne: RouterStrategy = {
    name: "Last-One",
    description: "always the last entry",
    select: (pool) => {
      const e = pool[pool.length - 1]!
      return {
        provider: e.provider,
        model: e.model,
        key: e.candidate.key,
        strategy: "Last-One",
        reason: "last",
        candidatesConsidered: pool.length,
        score: 1
      }
    }
  }

  it("has the built-ins under their names and aliases, case-insensitive", () => {
    const r = new RouterRegistry()
    expect(r.get("rules")).toBe(rulesStrategy)
    expect(r.get("SLA-Aware")).toBe(slaStrategy)
    expect(r.get("lkgp")).toBe(lkgpStrategy)
    expect(r.get("nope")).toBeUndefined()
    const names = r.list().map((l) => l.name)
    expect(names).toEqual(["rules", "cost", "latency", "sla-aware", "lkgp"])
    expect(r.list().find((l) => l.name === "cost")!.aliases).toEqual(["eco"])
  })

  it("registers a valid custom strategy and selects through it", () => {
    const r = new RouterRegistry()
    r.register(lastOne)
    expect(r.get("last-one")).toBe(lastOne)
    expect(r.list().at(-1)).toEqual({ name: "Last-One", description: "always the last entry", aliases: [], builtIn: false })
    const pool = [entry("a/x"), entry("b/y"), entry("c/z")]
    const out = orderAuto(pool, { strategy: r.get("LAST-ONE")!, context: ctx(), explorationRate: 0, healing: new SelfHealing() })
    expect(out.order.map((e) => e.candidate.key)).toEqual(["c/z", "b/y", "a/x"])
    expect(out.decision.strategy).toBe("Last-One")
  })

  it("rejects invalid names, missing parts and built-in names or aliases", () => {
    const r = new RouterRegistry()
    for (const name of ["", " ", "bad name", "-dash", "slash/x", "émoji"]) expect(() => r.register({ ...lastOne, name })).toThrow(/name/)
    expect(() => r.register({ ...lastOne, name: "rules" })).toThrow(/built in/)
    expect(() => r.register({ ...lastOne, name: "ECO" })).toThrow(/built in/)
    expect(() => r.register({ ...lastOne, description: "" })).toThrow(/description/)
    expect(() => r.register({ ...lastOne, select: undefined as unknown as RouterStrategy["select"] })).toThrow(/select/)
    expect(r.get("rules")).toBe(rulesStrategy)
  })
})

// ---------------------------------------------------------------- auto ids

describe("auto ids", () => {
  it("parses the 7 invokable ids", () => {
    expect(AUTO_VARIANT_IDS).toEqual(["auto", "auto/coding", "auto/fast", "auto/cheap", "auto/offline", "auto/smart", "auto/lkgp"])
    const s = (id: string) => parseAutoId(id)!
    expect(s("auto")).toMatchObject({ id: "auto", routerStrategy: "lkgp", weightsName: "balanced", explorationRate: 0.05 })
    expect(s("auto").weights).toBe(DEFAULT_WEIGHTS)
    expect(s("auto/lkgp")).toMatchObject({ routerStrategy: "lkgp", weightsName: "balanced", explorationRate: 0.05 })
    expect(s("auto/coding")).toMatchObject({ kind: "variant", routerStrategy: "rules", weightsName: "quality-first" })
    expect(s("auto/coding").weights).toBe(MODE_PACKS["quality-first"])
    expect(s("auto/fast")).toMatchObject({ routerStrategy: "rules", weightsName: "ship-fast" })
    expect(s("auto/cheap")).toMatchObject({ routerStrategy: "cost" })
    expect(s("auto/offline")).toMatchObject({ routerStrategy: "rules", weightsName: "offline-friendly" })
    expect(s("auto/smart")).toMatchObject({ routerStrategy: "rules", weightsName: "quality-first", explorationRate: 0.1 })
    for (const id of AUTO_VARIANT_IDS) expect(parseAutoId(id.toUpperCase())?.id).toBe(id)
    for (const id of ADVERTISED_AUTO_IDS) expect(parseAutoId(id)).toBeDefined()
  })

  it("parses categories and category:tier compositions, floor as cheap", () => {
    expect(parseAutoId("auto/chat")).toMatchObject({ kind: "category", category: "chat", routerStrategy: "rules", weightsName: "balanced" })
    for (const c of ["vision", "reasoning", "multimodal"]) expect(parseAutoId(`auto/${c}`)).toMatchObject({ kind: "category", category: c })
    expect(parseAutoId("auto/coding:fast")).toMatchObject({ kind: "category", category: "coding", tier: "fast", weightsName: "ship-fast" })
    expect(parseAutoId("auto/coding:cheap")).toMatchObject({ tier: "cheap", weightsName: "cost-saver" })
    expect(parseAutoId("Auto/Chat:FLOOR")).toMatchObject({ id: "auto/chat:cheap", tier: "cheap", weights: MODE_PACKS["cost-saver"] })
    expect(parseAutoId("auto/vision:reliable")).toMatchObject({ weightsName: "reliability-first" })
    expect(parseAutoId("auto/reasoning:free")).toMatchObject({ tier: "free", weightsName: "balanced" })
    expect(parseAutoId("auto/multimodal:pro")).toMatchObject({ tier: "pro", weightsName: "balanced" })
  })

  it("rejects anything else", () => {
    for (const id of [
      "auto/foo",
      "auto/coding:bar",
      "auto/fast:cheap",
      "auto/smart:fast",
      "auto/",
      "auto/coding:",
      "autox",
      "gpt-4o",
      "auto/chat:free:pro",
      "openai/auto"
    ])
      expect(parseAutoId(id)).toBeUndefined()
  })

  it("filters the pool by category and tier, fail-open", () => {
    const v = entry("a/v", { capabilities: { tools: true, vision: true, reasoning: false }, modelTier: "premium" })
    const r = entry("b/r", { capabilities: { tools: false, vision: false, reasoning: true }, modelTier: "free" })
    const t = entry("c/t", { capabilities: { tools: true, vision: false, reasoning: false }, accountTier: "ultra" })
    const pool = [v, r, t]
    const keys = (id: string, p: ReadonlyArray<PoolEntry> = pool) => filterPool(p, parseAutoId(id)!).map((e) => e.candidate.key)
    expect(keys("auto/vision")).toEqual(["a/v"])
    expect(keys("auto/multimodal")).toEqual(["a/v"])
    expect(keys("auto/reasoning")).toEqual(["b/r"])
    expect(keys("auto/coding:fast")).toEqual(["a/v", "c/t"])
    expect(keys("auto/chat")).toEqual(["a/v", "b/r", "c/t"])
    expect(keys("auto/chat:free")).toEqual(["b/r"])
    expect(keys("auto/chat:pro")).toEqual(["a/v", "c/t"])
    // fail-open: nothing vision-capable, nothing free after the category filter
    expect(keys("auto/vision", [r, t])).toEqual(["b/r", "c/t"])
    expect(keys("auto/vision:free")).toEqual(["a/v"])
  })
})

// ---------------------------------------------------------------- selection

describe("orderAuto", () => {
  const request = features({ tokenEstimate: 1000, maxOutputTokens: 1000 })
  const cheap = entry("a/x", { pricing: { input: 1, output: 2 }, costPer1MTokens: 1.4 }) // 0.003 USD
  const dear = entry("b/y", { pricing: { input: 10, output: 30 }, costPer1MTokens: 18 }) // 0.04 USD
  const unpriced = entry("c/z", { costPer1MTokens: 0 })

  it("estimates cost from catalog prices (1024 output tokens when unknown)", () => {
    expect(estimateCostUsd(cheap, request)).toBeCloseTo(0.003, 12)
    expect(estimateCostUsd(dear, features({ tokenEstimate: 1000 }))).toBeCloseTo((1000 * 10 + 1024 * 30) / 1e6, 12)
    expect(estimateCostUsd(unpriced, request)).toBe(0)
  })

  it("drops candidates above the budget", () => {
    const out = orderAuto([dear, cheap, unpriced], {
      strategy: rulesStrategy,
      context: ctx({ request }),
      explorationRate: 0,
      budgetUsd: 0.01,
      healing: new SelfHealing()
    })
    expect(out.order.map((e) => e.candidate.key).sort()).toEqual(["a/x", "c/z"])
  })

  it("keeps only the cheapest non-OPEN candidate when all exceed the budget", () => {
    const openCheaper = entry("d/w", { pricing: { input: 0.1, output: 0.1 }, breaker: "OPEN" })
    const out = orderAuto([dear, openCheaper, cheap], {
      strategy: rulesStrategy,
      context: ctx({ request }),
      explorationRate: 0,
      budgetUsd: 0.0001,
      healing: new SelfHealing()
    })
    expect(out.order.map((e) => e.candidate.key)).toEqual(["a/x"])
    expect(out.decision.key).toBe("a/x")
  })

  it("drops OPEN candidates unless all are OPEN, and orders the rest by repeated selection", () => {
    const a = entry("a/x", { costPer1MTokens: 3 })
    const b = entry("b/y", { costPer1MTokens: 1, breaker: "OPEN" })
    const c = entry("c/z", { costPer1MTokens: 2 })
    const d = entry("d/w", { costPer1MTokens: 1 })
    const out = orderAuto([a, b, c, d], { strategy: costStrategy, context: ctx(), explorationRate: 0, healing: new SelfHealing() })
    expect(out.order.map((e) => e.candidate.key)).toEqual(["d/w", "c/z", "a/x"])
    const allOpen = [
      { ...a, breaker: "OPEN" as const },
      { ...c, breaker: "OPEN" as const }
    ]
    expect(
      orderAuto(allOpen, { strategy: costStrategy, context: ctx(), explorationRate: 0, healing: new SelfHealing() }).order
    ).toHaveLength(2)
    expect(() => orderAuto([], { strategy: costStrategy, context: ctx(), explorationRate: 0, healing: new SelfHealing() })).toThrow(/empty/)
  })

  it("drops self-healing exclusions (fail-open), reports probes, and observes scores", () => {
    const healing = new SelfHealing()
    const a = entry("a/x")
    const b = entry("b/y")
    healing.observe("b/y", 0.1, 0)
    const out = orderAuto([a, b], { strategy: rulesStrategy, context: ctx({ now: 1000 }), explorationRate: 0, healing })
    expect(out.order.map((e) => e.candidate.key)).toEqual(["a/x"])
    expect(out.excluded).toEqual(["b/y"])
    healing.observe("a/x", 0.1, 1000)
    const all = orderAuto([a, b], { strategy: rulesStrategy, context: ctx({ now: 2000 }), explorationRate: 0, healing })
    expect(all.order).toHaveLength(2)
    expect(all.excluded).toEqual([])
    const later = orderAuto([a, b], { strategy: rulesStrategy, context: ctx({ now: 5 * MIN }), explorationRate: 0, healing })
    expect(later.probes).toEqual(["b/y"])

    // a candidate scoring below 0.2 is excluded by the observation
    const fresh = new SelfHealing()
    const bad = entry("z/bad", {
      breaker: "HALF_OPEN",
      quotaRemaining: 0,
      costPer1MTokens: 50,
      p95LatencyMs: 9000,
      latencyStdDevMs: 9000,
      errorRate: 1,
      accountTier: "free",
      modelTier: "premium",
      contextWindow: undefined,
      inFlight: 32
    })
    const ok = entry("a/ok", { costPer1MTokens: 1, p95LatencyMs: 100 })
    expect(scoreEntry(bad, [ok, bad], ctx())).toBeLessThan(0.2)
    orderAuto([ok, bad], { strategy: rulesStrategy, context: ctx(), explorationRate: 0, healing: fresh })
    expect(fresh.isExcluded("z/bad", 1)).toBe(true)
    expect(fresh.isExcluded("a/ok", 1)).toBe(false)
  })
})

// ---------------------------------------------------------------- self-healing

describe("self-healing", () => {
  it("excludes a candidate scoring below 0.2 for exactly 5 minutes", () => {
    const h = new SelfHealing()
    h.observe("k", 0.2, 0)
    expect(h.isExcluded("k", 0)).toBe(false)
    h.observe("k", 0.19, 1000)
    expect(h.isExcluded("k", 1000)).toBe(true)
    expect(h.isExcluded("k", 1000 + 5 * MIN - 1)).toBe(true)
    expect(h.isExcluded("k", 1000 + 5 * MIN)).toBe(false)
    expect(h.snapshot(1000)).toEqual([{ key: "k", until: 1000 + 5 * MIN, level: 1, remainingMs: 5 * MIN }])
  })

  it("backs off 5 → 10 → 20 → 30 → 30 minutes", () => {
    const h = new SelfHealing()
    let now = 0
    const durations: number[] = []
    for (let i = 0; i < 5; i++) {
      h.observe("k", 0, now)
      const until = h.snapshot(now)[0]!.until
      durations.push((until - now) / MIN)
      now = until
    }
    expect(durations).toEqual([5, 10, 20, 30, 30])
  })

  it("observations while excluded do not extend the exclusion", () => {
    const h = new SelfHealing()
    h.observe("k", 0, 0)
    h.observe("k", 0, 4 * MIN)
    expect(h.isExcluded("k", 5 * MIN)).toBe(false)
    expect(h.level("k")).toBe(1)
  })

  it("probes after expiry: success resets the level, failure excludes at the next level", () => {
    const h = new SelfHealing()
    h.observe("k", 0.1, 0)
    expect(h.needsProbe("k", 5 * MIN - 1)).toBe(false)
    expect(h.needsProbe("k", 5 * MIN)).toBe(true)
    // a good score after expiry keeps the level until a probe succeeds
    h.observe("k", 0.9, 5 * MIN)
    expect(h.needsProbe("k", 5 * MIN + 1)).toBe(true)
    expect(h.level("k")).toBe(1)
    h.probeDone("k", false, 6 * MIN)
    expect(h.isExcluded("k", 6 * MIN + 10 * MIN - 1)).toBe(true)
    expect(h.isExcluded("k", 16 * MIN)).toBe(false)
    expect(h.needsProbe("k", 16 * MIN)).toBe(true)
    h.probeDone("k", true, 16 * MIN)
    expect(h.needsProbe("k", 16 * MIN)).toBe(false)
    expect(h.level("k")).toBe(0)
    h.observe("k", 0.1, 20 * MIN)
    expect(h.snapshot(20 * MIN)[0]!.until).toBe(25 * MIN)
    expect(h.pendingProbes(25 * MIN)).toEqual(["k"])
  })

  it("probe timeout is max(2 s, normal / 4), never above normal", () => {
    expect(probeTimeoutMs(30_000)).toBe(7500)
    expect(probeTimeoutMs(4000)).toBe(2000)
    expect(probeTimeoutMs(1000)).toBe(1000)
  })

  it("incident mode when more than 50% of the distinct providers are OPEN", () => {
    const h = new SelfHealing()
    const p = (prov: string, breaker: PoolEntry["breaker"]) => entry(`${prov}-c/m`, { provider: prov, breaker })
    expect(h.isIncident([p("a", "OPEN"), p("b", "OPEN"), p("c", "CLOSED")])).toBe(true)
    expect(h.isIncident([p("a", "OPEN"), p("b", "OPEN"), p("c", "CLOSED"), p("d", "HALF_OPEN")])).toBe(false)
    // distinct providers: two connections of one OPEN provider count once
    expect(h.isIncident([p("a", "OPEN"), p("a", "OPEN"), p("b", "CLOSED"), p("c", "CLOSED")])).toBe(false)
    expect(h.isIncident([])).toBe(false)
  })
})

// ---------------------------------------------------------------- exploration

describe("exploration", () => {
  const pool = [
    entry("a/x", { provider: "a", costPer1MTokens: 1 }),
    entry("b/y", { provider: "b", costPer1MTokens: 2 }),
    entry("c/z", { provider: "c", costPer1MTokens: 3 })
  ]

  it("rate 1.0 puts another candidate first outside incident mode, the router's choice second", () => {
    const out = orderAuto(pool, {
      strategy: costStrategy,
      context: ctx({ random: seededRandom(7) }),
      explorationRate: 1,
      healing: new SelfHealing()
    })
    expect(out.incident).toBe(false)
    expect(out.decision.reason).toBe("exploration")
    expect(out.order[0]!.candidate.key).not.toBe("a/x")
    expect(out.decision.key).toBe(out.order[0]!.candidate.key)
    expect(out.order[1]!.candidate.key).toBe("a/x")
    expect(out.order).toHaveLength(3)
  })

  it("incident mode disables exploration and uses reliability-first weights", () => {
    const incidentPool = [
      ...pool,
      entry("d/o", { provider: "d", breaker: "OPEN" }),
      entry("e/o", { provider: "e", breaker: "OPEN" }),
      entry("f/o", { provider: "f", breaker: "OPEN" }),
      entry("g/o", { provider: "g", breaker: "OPEN" })
    ]
    const out = orderAuto(incidentPool, {
      strategy: costStrategy,
      context: ctx({ random: seededRandom(7) }),
      explorationRate: 1,
      healing: new SelfHealing()
    })
    expect(out.incident).toBe(true)
    expect(out.order[0]!.candidate.key).toBe("a/x")
    expect(out.decision.reason).not.toBe("exploration")

    // rules under reliability-first: the stable candidate beats the cheap, flaky one
    const flakyCheap = entry("a/x", {
      provider: "a",
      costPer1MTokens: 0.1,
      p95LatencyMs: 1000,
      latencyStdDevMs: 900,
      errorRate: 0.4,
      accountTier: "ultra"
    })
    const stable = entry("b/y", { provider: "b", costPer1MTokens: 20, p95LatencyMs: 900, latencyStdDevMs: 10, errorRate: 0 })
    const opens = ["c", "d", "e"].map((p) => entry(`${p}/o`, { provider: p, breaker: "OPEN" }))
    const cheapWeights = ctx({ weights: MODE_PACKS["cost-saver"] })
    expect(
      orderAuto([flakyCheap, stable], { strategy: rulesStrategy, context: cheapWeights, explorationRate: 0, healing: new SelfHealing() })
        .decision.key
    ).toBe("a/x")
    expect(
      orderAuto([flakyCheap, stable, ...opens], {
        strategy: rulesStrategy,
        context: cheapWeights,
        explorationRate: 0,
        healing: new SelfHealing()
      }).decision.key
    ).toBe("b/y")
  })

  it("no exploration with fewer than 2 candidates", () => {
    const out = orderAuto([pool[0]!], { strategy: costStrategy, context: ctx(), explorationRate: 1, healing: new SelfHealing() })
    expect(out.decision.reason).not.toBe("exploration")
  })

  for (const rate of [0.05, 0.1]) {
    it(`explores ${rate * 100}% of 20,000 seeded requests (±1 point), uniformly over the others`, () => {
      const random = seededRandom(rate === 0.05 ? 12345 : 67890)
      const healing = new SelfHealing()
      let explored = 0
      const firsts = new Map<string, number>()
      for (let i = 0; i < 20_000; i++) {
        const out = orderAuto(pool, { strategy: costStrategy, context: ctx({ random, now: i }), explorationRate: rate, healing })
        if (out.decision.reason === "exploration") {
          explored++
          const k = out.order[0]!.candidate.key
          firsts.set(k, (firsts.get(k) ?? 0) + 1)
        }
      }
      expect(Math.abs(explored / 20_000 - rate)).toBeLessThanOrEqual(0.01)
      expect(firsts.has("a/x")).toBe(false)
      const b = firsts.get("b/y") ?? 0
      const c = firsts.get("c/z") ?? 0
      expect(Math.abs(b - c) / explored).toBeLessThan(0.1)
    })
  }
})
