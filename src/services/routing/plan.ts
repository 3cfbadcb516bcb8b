import type { ResolvedTarget } from "../../upstream/providers/Connections.js"
import type { Candidate, RouterDecision } from "./types.js"

/** Fusion (spec document 1, "Fusion strategy behavior"): a parallel panel, then a judge. */
export interface FusionPlan {
  /** One member per combo target: its first admissible candidate. */
  readonly panel: ReadonlyArray<Candidate>
  /**
   * Each member's admissible candidates in order (`panel[i]` first): a member whose target is
   * served by several connections falls back to the next one.
   */
  readonly members?: ReadonlyArray<ReadonlyArray<Candidate>>
  readonly judge: Candidate
  readonly minPanel: number
  readonly stragglerGraceMs: number
  readonly panelHardTimeoutMs: number
}

/** A candidate the router left out, and why (all of them blocked gives the client's error). */
export interface Blocked {
  readonly candidate: Candidate
  /** `circuit_open`, `cooldown`, `banned`, `expired`, `credits_exhausted`, `model_locked`. */
  readonly reason: string
  /** When it may be tried again (ms from now), when known. */
  readonly retryAfterMs: number | null
  /** More about the reason (which token limit), for the client's error message. */
  readonly detail?: string
}

/** What the router decided for one request: where to try, in which order. */
export interface RoutePlan {
  readonly kind: "direct" | "combo" | "auto" | "quota-share"
  /** The combo name, auto id, quota-share group, or the model id: scope of per-route state. */
  readonly scope: string
  /** Strategy that ordered the candidates (`direct`, a combo strategy, an auto router strategy). */
  readonly strategy: string
  /** Admissible candidates, in the order to try them. */
  readonly candidates: ReadonlyArray<Candidate>
  readonly blocked: ReadonlyArray<Blocked>
  /** Candidate keys whose attempt is a probe after an exclusion (reduced timeout). */
  readonly probes: ReadonlySet<string>
  readonly fusion?: FusionPlan
  readonly sessionId?: string
  /** The API key id of the session's request (kept with the sticky session). */
  readonly sessionKey?: string
  readonly decision?: RouterDecision
}

/** A candidate from a resolved connection target. */
export const candidateOf = (t: ResolvedTarget, weight = 1, targetIndex = 0): Candidate => ({
  connection: t.connection,
  model: t.model,
  spec: t.connection.provider.models.find((m) => m.id === t.model),
  key: `${t.connection.name}/${t.model}`,
  weight,
  targetIndex
})
