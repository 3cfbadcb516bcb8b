/**
 * The shadow_pairs table: a compared pair stored (a failure to store is a warning, never the
 * request's), and the pairs older than the settings' retention deleted.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import type { SettingsShape } from "../../platform/settings/Settings.js"
import type { ShadowShape } from "./Shadow.js"

/** A stored pair, as the report reads it. */
export interface Row {
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

/** Stores a pair under its scope. */
export const makeRecordPair =
  ({ sql }: { readonly sql: SqlClient.SqlClient }): ShadowShape["record"] =>
  (p) =>
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

/** Deletes the pairs older than the settings' retention days (run hourly). */
export const pruneOldPairs = ({ sql, settings }: { readonly sql: SqlClient.SqlClient; readonly settings: SettingsShape }) =>
  Effect.suspend(() => {
    const cutoff = Date.now() - settings.current().shadowOptions.retentionDays * 86_400_000
    return sql`DELETE FROM shadow_pairs WHERE created_at < ${cutoff}`.pipe(Effect.asVoid, Effect.orDie)
  })
