/**
 * The shadow report (GET /api/shadow/report, and a replay's): per shadow target, how often its
 * answers agreed with the primary's, the judge's verdicts, the cost, latency and TTFT deltas,
 * schema validity, and the pairs that differed most.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { ShadowTargetReport } from "../../domain/shadow.js"
import type { SettingsShape } from "../../platform/settings/Settings.js"
import { meanInterval } from "./compare.js"
import type { ShadowShape } from "./Shadow.js"
import type { Row } from "./shadowPairs.js"

const excerpt = (s: string | null) => (s === null ? "" : s.length > 600 ? `${s.slice(0, 600)}…` : s)

/** One shadow target's part of the report, from its pairs. */
const targetReport = (shadowModel: string, rows: ReadonlyArray<Row>): ShadowTargetReport => {
  const answered = rows.filter((r) => r.shadow_error === null)
  const n = answered.length
  const share = (k: (r: Row) => boolean) => (n === 0 ? 0 : answered.filter(k).length / n)
  const withTools = answered.filter((r) => r.tools_match !== null)
  const judged = answered.filter((r) => r.judge_verdict !== null)
  const both = <K extends keyof Row>(a: K, b: K) =>
    answered.flatMap((r) => (typeof r[a] === "number" && typeof r[b] === "number" ? [(r[b] as number) - (r[a] as number)] : []))
  const ttft = both("primary_ttft_ms", "shadow_ttft_ms")
  const schema = answered.filter((r) => r.primary_schema_valid !== null && r.shadow_schema_valid !== null)
  return {
    shadowModel,
    pairs: n,
    failed: rows.length - n,
    exactAgreement: share((r) => r.exact_match === 1),
    normalizedAgreement: share((r) => r.normalized_match === 1),
    toolAgreement: withTools.length === 0 ? null : withTools.filter((r) => r.tools_match === 1).length / withTools.length,
    judge: {
      judged: judged.length,
      wins: judged.filter((r) => r.judge_verdict === "win").length,
      ties: judged.filter((r) => r.judge_verdict === "tie").length,
      losses: judged.filter((r) => r.judge_verdict === "loss").length
    },
    costDeltaUsd: meanInterval(both("primary_cost_usd", "shadow_cost_usd")),
    latencyDeltaMs: meanInterval(both("primary_latency_ms", "shadow_latency_ms")),
    ttftDeltaMs: ttft.length === 0 ? null : meanInterval(ttft),
    schemaValid:
      schema.length === 0
        ? null
        : {
            primary: schema.filter((r) => r.primary_schema_valid === 1).length / schema.length,
            shadow: schema.filter((r) => r.shadow_schema_valid === 1).length / schema.length,
            n: schema.length
          },
    worst: [...answered]
      .filter((r) => r.normalized_match !== 1)
      .sort((a, b) => a.similarity - b.similarity || b.created_at - a.created_at)
      .slice(0, 5)
      .map((r) => ({
        id: r.id,
        requestId: r.request_id,
        createdAt: new Date(r.created_at).toISOString(),
        request: excerpt(r.request_excerpt),
        primary: excerpt(r.primary_answer),
        shadow: excerpt(r.shadow_answer),
        similarity: r.similarity,
        judge: r.judge_verdict
      }))
  }
}

export interface ShadowReportDeps {
  readonly sql: SqlClient.SqlClient
  readonly settings: SettingsShape
  /** Why sampled requests were not shadowed, by reason (shadow traffic's own). */
  readonly skipped: Readonly<Record<string, number>>
  readonly spentToday: () => number
}

/** The report of a scope's pairs (over the last `days`, else all), with shadow traffic's skips and spend unless `own` gives the scope's. */
export const makeShadowReport =
  ({ sql, settings, skipped, spentToday }: ShadowReportDeps): ShadowShape["report"] =>
  (scope, days, own) =>
    Effect.gen(function* () {
      const since = days === undefined ? null : Date.now() - days * 86_400_000
      const rows = yield* (
        since === null
          ? sql<Row>`SELECT * FROM shadow_pairs WHERE lower(scope) = ${scope.toLowerCase()} ORDER BY created_at`
          : sql<Row>`SELECT * FROM shadow_pairs WHERE lower(scope) = ${scope.toLowerCase()} AND created_at >= ${since} ORDER BY created_at`
      ).pipe(Effect.orDie)
      const byTarget = new Map<string, Array<Row>>()
      for (const r of rows) byTarget.set(r.shadow_model, [...(byTarget.get(r.shadow_model) ?? []), r])
      return {
        scope,
        since: since === null ? null : new Date(since).toISOString(),
        targets: [...byTarget].map(([m, rs]) => targetReport(m, rs)),
        skipped: { ...(own?.skipped ?? skipped) },
        spentTodayUsd: own?.spentUsd ?? spentToday(),
        budgetUsdPerDay: own?.budgetUsd ?? settings.current().shadowOptions.budgetUsdPerDay
      }
    })
