import * as Data from "effect/Data"
import type { ResolvedTarget } from "../../upstream/providers/Connections.js"
import type { Candidate, RequestFeatures, RouterDecision } from "./types.js"

/** A model id the router cannot route: 404 (unknown) or 400 (malformed) in the client's format. */
export class RouteError extends Data.TaggedError("RouteError")<{
  readonly status: 400 | 404
  readonly message: string
  readonly code: string
}> {}

export const routeError = (status: 400 | 404, message: string, code: string) => new RouteError({ status, message, code })
export const notFound = (message: string) => routeError(404, message, "model_not_found")

/** What a plan is built for besides the model id. */
export interface PlanInput {
  /** Request features, computed only when a strategy needs them. */
  readonly features: () => RequestFeatures
  /** `X-Gateway-Mode`, `X-Gateway-Budget`, `X-Session-Id` / `x_session_id`. */
  readonly mode?: string | undefined
  readonly budget?: string | undefined
  readonly sessionId?: string | undefined
  /** The caller's API key id, kept with a sticky session (GET /api/sessions). */
  readonly apiKeyId?: string | null | undefined
  /**
   * Without a session id: the conversation's key, a hash of its stable prefix (src/inference/session.ts),
   * which keeps it where its prompt cache is warm (docs/routing.md, "Prompt-cache affinity").
   */
  readonly conversation?: string | undefined
}

/** The plan's session fields: nothing for a request without X-Session-Id. */
export const sessionOf = (input: PlanInput): { sessionId?: string; sessionKey?: string } =>
  input.sessionId ? (input.apiKeyId ? { sessionId: input.sessionId, sessionKey: input.apiKeyId } : { sessionId: input.sessionId }) : {}

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
  /** The conversation kept where its prompt cache is warm (set when the plan has a choice to make). */
  readonly conversation?: string
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

/** Splits candidates into admissible and blocked at `now`. */
export const admit = (
  candidates: ReadonlyArray<Candidate>,
  admission: (
    c: Candidate,
    now: number
  ) => { readonly ok: true } | { readonly ok: false; readonly reason: string; readonly retryAfterMs: number | null },
  now: number
): { ok: Array<Candidate>; blocked: Array<Blocked> } => {
  const ok: Array<Candidate> = []
  const blocked: Array<Blocked> = []
  for (const c of candidates) {
    const a = admission(c, now)
    if (a.ok) ok.push(c)
    else blocked.push({ candidate: c, reason: a.reason, retryAfterMs: a.retryAfterMs })
  }
  return { ok, blocked }
}

/** A resilience admission check (`Resilience.admission`). */
export type Admission = Parameters<typeof admit>[1]

/** Moves the candidate with `key` to the front, if present. */
export const toFront = (list: ReadonlyArray<Candidate>, key: string | undefined): ReadonlyArray<Candidate> => {
  if (key === undefined) return list
  const i = list.findIndex((c) => c.key === key)
  return i <= 0 ? list : [list[i]!, ...list.slice(0, i), ...list.slice(i + 1)]
}
