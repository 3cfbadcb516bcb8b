/**
 * Shadow traffic (docs/shadow.md): the pairs' store and the report. `Shadow` keeps the pairs
 * (`shadow_pairs`), what shadow calls spent today and why sampled requests were skipped, and
 * answers the report per shadow target; `ShadowRunner` (src/services/shadow/runner.ts, which
 * needs the server's own address) samples requests and makes the shadow calls.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ShadowReport } from "../../domain/shadow.js"
import { Settings } from "../../platform/settings/Settings.js"
import { periodic } from "../../platform/system/periodic.js"
import { makeRecordPair, pruneOldPairs } from "./shadowPairs.js"
import { makeShadowReport } from "./shadowReport.js"
import { loadShadowSpend } from "./shadowSpend.js"

/** One compared pair, as the runner hands it over. */
export interface ShadowPair {
  readonly requestId: string
  readonly scope: string
  readonly format: string
  readonly requestExcerpt: string
  readonly primaryModel: string | null
  readonly shadowModel: string
  readonly primaryAnswer: string
  readonly shadowAnswer: string | null
  readonly shadowError: string | null
  readonly primaryLatencyMs: number | null
  readonly shadowLatencyMs: number | null
  readonly primaryTtftMs: number | null
  readonly shadowTtftMs: number | null
  readonly primaryTokens: { readonly input: number; readonly output: number } | null
  readonly shadowTokens: { readonly input: number; readonly output: number } | null
  readonly primaryCostUsd: number | null
  readonly shadowCostUsd: number | null
  readonly primaryFinish: string | null
  readonly shadowFinish: string | null
  readonly primaryTools: string
  readonly shadowTools: string
  readonly primarySchemaValid: boolean | null
  readonly shadowSchemaValid: boolean | null
  readonly exact: boolean
  readonly normalized: boolean
  readonly toolsMatch: boolean | null
  readonly similarity: number
  readonly judgeModel: string | null
  /** From the shadow target's side: `win`, `tie`, `loss`; null when not judged. */
  readonly judgeVerdict: "win" | "tie" | "loss" | null
  readonly judgeCostUsd: number | null
}

export interface ShadowShape {
  readonly record: (pair: ShadowPair) => Effect.Effect<void>
  /** `own`: the skip counts and spend of the report's own scope (a replay's), instead of shadow traffic's. */
  readonly report: (
    scope: string,
    days?: number,
    own?: { readonly skipped: Readonly<Record<string, number>>; readonly spentUsd: number; readonly budgetUsd: number }
  ) => Effect.Effect<ShadowReport>
  /** A sampled request that was not shadowed, and why (`budget`, `concurrency`, `incident`, `primary_failed`...). */
  readonly skip: (reason: string) => void
  /** Adds what a shadow (or judge) call cost to today's spend. */
  readonly spend: (usd: number) => void
  /** What shadow calls cost today (UTC). */
  readonly spentToday: () => number
}

/**
 * Shadow traffic's pairs and report: the pairs' store and retention (shadowPairs.ts), today's
 * spend (shadowSpend.ts), the skip counts, and the report (shadowReport.ts).
 */
export class Shadow extends Context.Tag("gateway/Shadow")<Shadow, ShadowShape>() {
  static readonly layer = Layer.scoped(
    Shadow,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const settings = yield* Settings
      const skipped: Record<string, number> = {}
      const { spentToday, spend } = yield* loadShadowSpend({ sql })

      // Retention: pairs older than the settings' days go, hourly.
      yield* periodic("shadow-retention", 3600, pruneOldPairs({ sql, settings }), { immediately: true })

      return {
        record: makeRecordPair({ sql }),
        report: makeShadowReport({ sql, settings, skipped, spentToday }),
        skip: (reason) => void (skipped[reason] = (skipped[reason] ?? 0) + 1),
        spend,
        spentToday
      } satisfies ShadowShape
    })
  )
}
