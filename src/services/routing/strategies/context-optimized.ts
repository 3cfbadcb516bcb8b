import type { Candidate, Strategy } from "../types.js"
import { ascendingUnknownLast, stableSort } from "./common.js"

/** The catalog context window, when known (a missing spec or a non-positive window is unknown). */
const windowOf = (c: Candidate): number | undefined => {
  const w = c.spec?.contextWindow
  return w !== undefined && Number.isFinite(w) && w > 0 ? w : undefined
}

/**
 * `context-optimized`: need = estimated prompt tokens + requested max output tokens (0 when the
 * client did not say). Candidates whose known window is smaller than need are dropped; the rest
 * best fit first (smallest sufficient window), unknown windows after known ones. When nothing
 * fits and no window is unknown, every candidate is returned largest window first.
 */
export const contextOptimized: Strategy = {
  name: "context-optimized",
  order: (candidates, ctx) => {
    const need = ctx.request.tokenEstimate + (ctx.request.maxOutputTokens ?? 0)
    const usable = candidates.filter((c) => {
      const w = windowOf(c)
      return w === undefined || w >= need
    })
    if (usable.length > 0) return stableSort(usable, ascendingUnknownLast(windowOf))
    return stableSort(
      candidates,
      ascendingUnknownLast((c) => -(windowOf(c) ?? 0))
    )
  }
}
