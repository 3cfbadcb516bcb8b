/**
 * The routing engine's shared vocabulary: candidates, the live state strategies read, and the
 * strategy contracts. Strategies are plain functions over these types (no Effect, no I/O) so
 * that they are small, deterministic under an injected random source, and testable alone.
 * docs/routing.md explains each strategy and each decision the specification leaves open.
 */
import type { Connection } from "../../upstream/providers/Connections.js"
import type { ModelSpec } from "../../domain/catalog/catalog.js"
import { FACTORS, type Factor, STRATEGY_NAMES, type StrategyName } from "../../domain/combos.js"

export { FACTORS, type Factor, STRATEGY_NAMES, type StrategyName }

// ---------------------------------------------------------------- candidates

/** One place a request can go: a connection and the model name its upstream knows. */
export interface Candidate {
  readonly connection: Connection
  /** The model id as the upstream knows it. */
  readonly model: string
  /** Catalog data for the model, when the catalog knows it. */
  readonly spec: ModelSpec | undefined
  /** `<connection name>/<model>`: the stable key of routing state (round robin, lkgp, windows). */
  readonly key: string
  /** The combo target's weight (`weighted`, `p2c`, quota share); 1 when none was given. */
  readonly weight: number
  /** Position of the combo target this candidate came from (0 for direct requests). */
  readonly targetIndex: number
}

// ---------------------------------------------------------------- live state

/** Provider circuit breaker states (spec document 1, "Provider circuit breaker"). */
export type BreakerState = "CLOSED" | "DEGRADED" | "OPEN" | "HALF_OPEN"

/** Remaining quota of a connection (and model), as the accounting layer or rate-limit headers report it. */
export interface QuotaInfo {
  /** Fraction of the window's quota left, in [0, 1]. */
  readonly remaining: number
  /** When the current quota window resets (epoch ms), when known. */
  readonly resetAt?: number
  /** Length of the quota window in ms (a 5-hour window, a daily one...), when known. */
  readonly windowMs?: number
  /** Quota is used up until resetAt (not a transient rate limit). */
  readonly exhausted?: boolean
}

/** Observed behaviour of one candidate over the rolling window (see Observations). */
export interface ObservedStats {
  /** Completed attempts in the window. */
  readonly samples: number
  /** p95 of latency in ms; undefined without samples. */
  readonly p95LatencyMs: number | undefined
  /** Standard deviation of latency in ms; undefined without samples. */
  readonly latencyStdDevMs: number | undefined
  /** Failed attempts / attempts, in [0, 1]; 0 without samples. */
  readonly errorRate: number
}

/**
 * What strategies may read of the world. All reads are synchronous and cheap; the dispatcher
 * builds one per request from the live services.
 */
export interface RoutingState {
  /** The breaker state of the candidate's provider. */
  readonly breaker: (c: Candidate) => BreakerState
  /** Quota left for the candidate's connection (and model); undefined when unknown. */
  readonly quota: (c: Candidate) => QuotaInfo | undefined
  readonly stats: (c: Candidate) => ObservedStats
  /** Requests in flight on the candidate's connection right now. */
  readonly inFlight: (c: Candidate) => number
  /** Requests sent to the candidate (its key) since start: `least-used`. */
  readonly used: (c: Candidate) => number
  /**
   * A rotating counter for `key` (round robin): returns the current value and advances it.
   * Kept per combo by the router, in memory.
   */
  readonly nextTurn: (key: string) => number
  /** The key of the last candidate that succeeded for `scope` (a combo name or an auto id). */
  readonly lastGood: (scope: string) => string | undefined
  /** The candidate key a session is on for `scope` (context-relay), if any. */
  readonly relayLeg: (scope: string, session: string) => string | undefined
  /** Deficit counters of quota-share groups: read and written by the quota-share mode. */
  readonly deficits: (group: string) => Counters
}

/** Numbers by key, as the routing state keeps them (a `Map` does; the router's are bounded). */
export interface Counters {
  readonly size: number
  readonly get: (key: string) => number | undefined
  readonly has: (key: string) => boolean
  readonly set: (key: string, value: number) => unknown
}

/** A source of uniform random numbers in [0, 1): injected so tests are deterministic. */
export interface RandomSource {
  readonly next: () => number
}

/** Task types of the `taskFit` factor (spec: coding, review, planning, analysis, debugging, documentation). */
export type TaskType = "coding" | "review" | "planning" | "analysis" | "debugging" | "documentation" | "chat"

/** What the router knows of the request itself. */
export interface RequestFeatures {
  /** Estimated prompt tokens (whole request). */
  readonly tokenEstimate: number
  /** Requested max output tokens, when the client said. */
  readonly maxOutputTokens: number | undefined
  readonly hasTools: boolean
  readonly hasImages: boolean
  readonly wantsReasoning: boolean
  readonly taskType: TaskType
  /** 0 (simple chit-chat) .. 1 (long, technical, tool-heavy): the `specificityMatch` hint. */
  readonly specificity: number
  /** The sticky session key (X-Session-Id), when the client sent one. */
  readonly sessionId: string | undefined
}

// ---------------------------------------------------------------- combos

/** Inputs of one ordering decision. */
export interface StrategyContext {
  /** The combo's name (or the auto id): scope of per-combo state. */
  readonly scope: string
  readonly request: RequestFeatures
  readonly random: RandomSource
  readonly now: number
  readonly state: RoutingState
}

/**
 * A combo strategy: orders the available candidates. The first is tried first; on a retryable
 * failure the dispatcher falls back to the next, in this order. A strategy may drop candidates
 * it must not use (for example a context that does not fit), but never returns an empty list
 * when it was given candidates unless none of them can serve the request at all.
 */
export interface Strategy {
  readonly name: StrategyName | "quota-share"
  readonly order: (candidates: ReadonlyArray<Candidate>, ctx: StrategyContext) => ReadonlyArray<Candidate>
}

// ---------------------------------------------------------------- auto routing

export type Weights = Readonly<Partial<Record<Factor, number>>>

/** Account tier of a connection (`tierPriority`): Ultra 1.0, Pro 0.67, Standard 0.33, Free 0.0. */
export type AccountTier = "free" | "standard" | "pro" | "ultra"

/** A routing policy for `sla-aware` (combo config `sla*` keys). */
export interface SlaPolicy {
  readonly targetP95Ms?: number
  readonly maxErrorRate?: number
  readonly maxCostPer1MTokens?: number
  readonly hardConstraints?: boolean
}

/**
 * The routing context of a router strategy (spec: task type, tool and vision hints, token
 * estimate, optional SLA policy and optional last-known-good provider), plus the weights the
 * request resolved to.
 */
export interface RoutingContext {
  readonly request: RequestFeatures
  readonly weights: Weights
  readonly sla?: SlaPolicy
  /** Key of the last known good candidate; undefined when lkgp is off or nothing succeeded yet. */
  readonly lastKnownGood?: string
  readonly lkgpEnabled: boolean
  readonly now: number
  readonly random: RandomSource
  /** Synced leaderboard fitness (0..1) of a model, overriding the built-in taskFit table; undefined: not listed. */
  readonly fitness?: (model: string, provider: string) => number | undefined
}

/** A candidate with the inputs the scorer and router strategies read. */
export interface PoolEntry {
  readonly candidate: Candidate
  /** `<provider>` id (router strategies answer provider + model). */
  readonly provider: string
  readonly model: string
  readonly breaker: BreakerState
  /** Blended USD per 1M tokens: 60% input price + 40% output price. */
  readonly costPer1MTokens: number
  readonly p95LatencyMs: number | undefined
  readonly latencyStdDevMs: number | undefined
  readonly errorRate: number
  /** Quota fraction left in [0, 1] (1 when unknown). */
  readonly quotaRemaining: number
  /** ms until the quota window resets, when known. */
  readonly resetInMs: number | undefined
  readonly accountTier: AccountTier
  readonly modelTier: "free" | "standard" | "premium"
  readonly contextWindow: number | undefined
  readonly capabilities: { readonly tools: boolean; readonly vision: boolean; readonly reasoning: boolean }
  /** Requests in flight on this connection, and on all connections of its provider in the pool. */
  readonly inFlight: number
  readonly providerInFlight: number
  /** Connections of the same provider in the pool. */
  readonly providerConnections: number
}

/** What a router strategy answers (spec: provider, model, strategy name, reason, candidates considered, final score). */
export interface RouterDecision {
  readonly provider: string
  readonly model: string
  /** The chosen entry's candidate key. */
  readonly key: string
  readonly strategy: string
  readonly reason: string
  readonly candidatesConsidered: number
  readonly score: number
}

/** A router strategy of the auto engine; custom ones register under their own name. */
export interface RouterStrategy {
  readonly name: string
  readonly description: string
  /** Picks one entry of a non-empty pool. */
  readonly select: (pool: ReadonlyArray<PoolEntry>, context: RoutingContext) => RouterDecision
}
