import type { Candidate, Strategy } from "../types.js"
import { distinctByKey, isExhausted, positiveWeight, stableSort } from "./common.js"

/** Tokens of credit one round gives a candidate of weight 1. */
export const QUOTA_SHARE_QUANTUM = 1000
/** A deficit is capped at this many × (quantum + cost of the current request). */
export const QUOTA_SHARE_CAP_FACTOR = 10

/** The candidate's quantum: 1000 tokens × weight (a weight that is not a finite positive number counts as 1). */
const quantumOf = (c: Candidate): number => QUOTA_SHARE_QUANTUM * (positiveWeight(c) ?? 1)

/**
 * The internal `quota-share` mode (`qtSd/<group>/<provider>/<model>`; `ctx.scope` is the group): deficit round robin so
 * each candidate serves tokens in proportion to its weight (the rules: docs/routing.md#combo-strategies-the-17-values).
 */
export const quotaShare: Strategy = {
  name: "quota-share",
  order: (given, ctx) => {
    const candidates = distinctByKey(given)
    if (candidates.length === 0) return []
    const inFlight = new Map(candidates.map((c) => [c, ctx.state.inFlight(c)] as const))
    const load = (c: Candidate) => inFlight.get(c) ?? 0
    const saturated = (c: Candidate): boolean => {
      const max = c.connection.maxConcurrent
      return (typeof max === "number" && max > 0 && load(c) >= max) || isExhausted(ctx.state.quota(c))
    }
    const busy: Array<Candidate> = []
    const open: Array<Candidate> = []
    for (const c of candidates) (saturated(c) ? busy : open).push(c)
    const byLoad = (a: Candidate, b: Candidate) => load(a) - load(b)
    if (open.length === 0) return stableSort(busy, byLoad)

    const estimate = ctx.request.tokenEstimate
    const cost = Math.max(1, Number.isFinite(estimate) ? estimate : 1)
    const deficits = ctx.state.deficits(ctx.scope)
    const deficit = (c: Candidate): number => {
      const d = deficits.get(c.key)
      return d !== undefined && Number.isFinite(d) ? d : 0
    }

    if (!open.some((c) => deficit(c) >= cost)) {
      let rounds = Infinity
      for (const c of open) rounds = Math.min(rounds, Math.max(1, Math.ceil((cost - deficit(c)) / quantumOf(c))))
      for (const c of open) deficits.set(c.key, deficit(c) + quantumOf(c) * rounds)
    }
    for (const c of candidates) {
      const cap = QUOTA_SHARE_CAP_FACTOR * (quantumOf(c) + cost)
      if (deficits.has(c.key) && deficit(c) > cap) deficits.set(c.key, cap)
    }

    let picked = open[0] as Candidate
    for (const c of open) if (deficit(c) > deficit(picked)) picked = c
    deficits.set(picked.key, deficit(picked) - cost)

    const others = stableSort(
      open.filter((c) => c !== picked),
      (a, b) => deficit(b) - deficit(a)
    )
    return [picked, ...others, ...stableSort(busy, byLoad)]
  }
}
