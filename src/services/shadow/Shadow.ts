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
import * as crypto from "node:crypto"
import type { ShadowReport, ShadowTargetReport } from "../../domain/shadow.js"
import { Settings } from "../../platform/settings/Settings.js"
import { periodic } from "../../platform/system/periodic.js"
import { meanInterval } from "./compare.js"

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

export class Shadow extends Context.Tag("gateway/Shadow")<Shadow, ShadowShape>() {
  static readonly layer = Layer.scoped(
    Shadow,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const settings = yield* Settings
      const skipped: Record<string, number> = {}
      const day = () => new Date().toISOString().slice(0, 10)
      // Today's spend starts from the pairs already stored today (a restart keeps the cap).
      const startOfDay = Date.parse(`${day()}T00:00:00Z`)
      const [row] = yield* sql<{
        spent: number | null
      }>`SELECT SUM(COALESCE(shadow_cost_usd, 0) + COALESCE(judge_cost_usd, 0)) AS spent FROM shadow_pairs WHERE created_at >= ${startOfDay}`.pipe(Effect.orDie)
      let spent = { day: day(), usd: Number(row?.spent ?? 0) }

      // Retention: pairs older than the settings' days go, hourly.
      yield* periodic(
        "shadow-retention",
        3600,
        Effect.suspend(() => {
          const cutoff = Date.now() - settings.current().shadowOptions.retentionDays * 86_400_000
          return sql`DELETE FROM shadow_pairs WHERE created_at < ${cutoff}`.pipe(Effect.asVoid, Effect.orDie)
        }),
        { immediately: true }
      )

      const record: ShadowShape["record"] = (p) =>
        sql`INSERT INTO shadow_pairs ${sql.insert({
          id: `shp_${crypto.randomBytes(8).toString("hex")}`,
          created_at: Date.now(),
          request_id: p.requestId,
          scope: p.scope,
          format: p.format,
          request_excerpt: p.requestExcerpt,
          primary_model: p.primaryModel,
          shadow_model: p.shadowModel,
          primary_answer: p.primaryAnswer,
          shadow_answer: p.shadowAnswer,
          shadow_error: p.shadowError,
          primary_latency_ms: p.primaryLatencyMs,
          shadow_latency_ms: p.shadowLatencyMs,
          primary_ttft_ms: p.primaryTtftMs,
          shadow_ttft_ms: p.shadowTtftMs,
          primary_tokens_in: p.primaryTokens?.input ?? null,
          primary_tokens_out: p.primaryTokens?.output ?? null,
          shadow_tokens_in: p.shadowTokens?.input ?? null,
          shadow_tokens_out: p.shadowTokens?.output ?? null,
          primary_cost_usd: p.primaryCostUsd,
          shadow_cost_usd: p.shadowCostUsd,
          primary_finish: p.primaryFinish,
          shadow_finish: p.shadowFinish,
          primary_tools: p.primaryTools,
          shadow_tools: p.shadowTools,
          primary_schema_valid: p.primarySchemaValid === null ? null : p.primarySchemaValid ? 1 : 0,
          shadow_schema_valid: p.shadowSchemaValid === null ? null : p.shadowSchemaValid ? 1 : 0,
          exact_match: p.exact ? 1 : 0,
          normalized_match: p.normalized ? 1 : 0,
          tools_match: p.toolsMatch === null ? null : p.toolsMatch ? 1 : 0,
          similarity: p.similarity,
          judge_model: p.judgeModel,
          judge_verdict: p.judgeVerdict,
          judge_cost_usd: p.judgeCostUsd
        })}`.pipe(
          Effect.asVoid,
          Effect.catchAllCause((cause) => Effect.logWarning("a shadow pair could not be stored", cause))
        )

      interface Row {
        readonly id: string
        readonly created_at: number
        readonly request_id: string
        readonly request_excerpt: string
        readonly shadow_model: string
        readonly primary_answer: string
        readonly shadow_answer: string | null
        readonly shadow_error: string | null
        readonly primary_latency_ms: number | null
        readonly shadow_latency_ms: number | null
        readonly primary_ttft_ms: number | null
        readonly shadow_ttft_ms: number | null
        readonly primary_cost_usd: number | null
        readonly shadow_cost_usd: number | null
        readonly primary_schema_valid: number | null
        readonly shadow_schema_valid: number | null
        readonly exact_match: number
        readonly normalized_match: number
        readonly tools_match: number | null
        readonly similarity: number
        readonly judge_verdict: string | null
      }

      const excerpt = (s: string | null) => (s === null ? "" : s.length > 600 ? `${s.slice(0, 600)}…` : s)

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

      const report: ShadowShape["report"] = (scope, days, own) =>
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

      const spentToday = () => {
        if (spent.day !== day()) spent = { day: day(), usd: 0 }
        return spent.usd
      }

      return {
        record,
        report,
        skip: (reason) => void (skipped[reason] = (skipped[reason] ?? 0) + 1),
        spend: (usd) => {
          spentToday()
          spent.usd += usd
        },
        spentToday
      } satisfies ShadowShape
    })
  )
}
