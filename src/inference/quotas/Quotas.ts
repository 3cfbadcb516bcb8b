/**
 * Quota checks: whether a provider account can serve, by the upstream's own view and the gateway's. `ok` is false when any says no,
 * `reason` names the first (docs/files-batches.md, "Quota checks and issue reports").
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Accounting, type AccountingShape } from "../../services/accounting/Accounting.js"
import { Budgets, type BudgetsShape } from "../../services/accounting/Budgets.js"
import { limitApplies, type LimitTarget, TokenLimits, type TokenLimitsShape } from "../../services/accounting/TokenLimits.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import type { InferenceShape } from "../call.js"
import { Inference } from "../Inference.js"
import { type Connection, Connections, type ConnectionsShape } from "../../upstream/providers/Connections.js"
import { findProvider } from "../../domain/catalog/catalog.js"
import { Cooldowns, type CooldownsShape } from "../../services/resilience/Cooldowns.js"
import { Resilience, type ResilienceShape } from "../../services/resilience/Resilience.js"
import type { Candidate } from "../../services/routing/types.js"
import { askUpstream, iso, probeModel, readerFor, type UpstreamView } from "./upstreamView.js"

export { nextReset, rateLimitWindows, readerFor, type UpstreamView } from "./upstreamView.js"

export interface QuotaQuery {
  readonly provider?: string | undefined
  readonly connection?: string | undefined
  /** Optional: the model the key will be used for (model-scoped token limits, model lockouts). */
  readonly model?: string | undefined
}

export interface QuotaAnswer {
  readonly ok: boolean
  readonly remaining: number | null
  readonly resetsAt: string | null
  readonly source: string
  readonly provider: string
  readonly connection: string
  readonly reason: string | null
  readonly details: Record<string, unknown>
}

export interface QuotasShape {
  /** `GET /v1/quotas/check`: `apiKeyId` is the caller's gateway key (its budget and token limits). */
  readonly check: (query: QuotaQuery, apiKeyId: string | null) => Effect.Effect<QuotaAnswer, InferenceError>
  /**
   * Asks the upstream of every enabled connection (its probe model) and keeps each view for
   * `maxAgeMs`: `check` answers from it while it is that fresh (`details.upstream.refreshedAt`)
   * instead of calling the upstream. The periodic quota refresh (GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS).
   */
  readonly refresh: (maxAgeMs: number) => Effect.Effect<number>
}

const notFound = (message: string, param: string) =>
  new InferenceError({ status: 404, kind: "not_found", code: "not_found", message, param })

/** The connection a query names: by name (checked against `provider` when both are given), else the provider's first enabled one. */
const pick = (connections: ConnectionsShape, query: QuotaQuery): Effect.Effect<Connection, InferenceError> =>
  Effect.gen(function* () {
    const providerId = query.provider?.trim() || undefined
    const name = query.connection?.trim() || undefined
    if (!providerId && !name)
      return yield* Effect.fail(badRequest("provider or connection is required (?provider=<id>&connection=<name>)", "provider"))
    const spec = providerId ? findProvider(providerId) : undefined
    if (providerId && !spec) return yield* Effect.fail(badRequest(`unknown provider: ${providerId}`, "provider", "unknown_provider"))
    if (name) {
      const found = yield* Effect.mapError(connections.get(name), () => notFound(`no connection named ${name}`, "connection"))
      if (spec && found.provider.id !== spec.id) {
        return yield* Effect.fail(
          badRequest(`connection ${found.name} is a ${found.provider.id} connection, not ${spec.id}`, "connection", "provider_mismatch")
        )
      }
      return found
    }
    const all = (yield* connections.list).filter((c) => c.provider.id === spec!.id)
    const chosen = [...all].sort((a, b) => Number(b.enabled) - Number(a.enabled) || a.priority - b.priority)[0]
    if (!chosen) return yield* Effect.fail(notFound(`no connection of provider ${spec!.id}`, "provider"))
    return chosen
  })

type RefreshedViews = Map<string, { readonly view: UpstreamView; readonly at: number; readonly until: number }>

interface CheckDeps {
  readonly connections: ConnectionsShape
  readonly inference: InferenceShape
  readonly accounting: AccountingShape
  readonly budgets: BudgetsShape
  readonly limits: TokenLimitsShape
  readonly resilience: ResilienceShape
  readonly cooldowns: CooldownsShape
  readonly refreshed: RefreshedViews
}

/** `check`: the gateway's view first (it costs no upstream call), then the upstream's (kept by `refresh` while fresh), then the answer. */
const makeCheck =
  ({ connections, inference, accounting, budgets, limits, resilience, cooldowns, refreshed }: CheckDeps) =>
  (query: QuotaQuery, apiKeyId: string | null) =>
    Effect.gen(function* () {
      const connection = yield* pick(connections, query)
      const now = yield* Clock.currentTimeMillis
      const model = probeModel(connection, query.model?.trim() || undefined)
      const refusals: Array<{ readonly by: string; readonly reason: string; readonly resetsAt: number | null }> = []

      // The gateway's view first: it costs no upstream call.
      if (!connection.enabled) refusals.push({ by: "connection", reason: `connection ${connection.name} is disabled`, resetsAt: null })
      const candidate: Candidate = {
        connection,
        model,
        spec: connection.provider.models.find((m) => m.id === model),
        key: `${connection.name}/${model}`,
        weight: 1,
        targetIndex: 0
      }
      const admission = resilience.admission(candidate, now)
      if (!admission.ok)
        refusals.push({
          by: "resilience",
          reason: admission.reason,
          resetsAt: admission.retryAfterMs === null ? null : now + admission.retryAfterMs
        })
      const availability = cooldowns.availability(connection.id, now)

      const budget = accounting.budget(apiKeyId)
      const budgetStatus = apiKeyId === null ? undefined : (yield* budgets.status(apiKeyId))[0]
      // The window's own end when known: `now + retryAfterMs` mixes two clocks' readings (off by a millisecond or so).
      if (!budget.ok) {
        const resetsAt = budgetStatus ? Date.parse(budgetStatus.resetsAt) : now + budget.retryAfterMs
        refusals.push({
          by: "budget",
          reason: `the key's ${budget.window} budget is spent ($${budget.spentUsd} of $${budget.limitUsd})`,
          resetsAt
        })
      }

      const target: LimitTarget = {
        provider: connection.provider.id,
        model,
        requestedModel: query.model?.trim() || `${connection.name}/${model}`,
        connection: connection.name
      }
      const tokenCheck = accounting.tokenLimit(apiKeyId, target)
      if (!tokenCheck.ok) {
        refusals.push({
          by: "token_limit",
          reason: `token limit ${tokenCheck.limit.id} reached (${tokenCheck.limit.usedTokens} of ${tokenCheck.limit.maxTokens} tokens per ${tokenCheck.limit.window})`,
          resetsAt: now + tokenCheck.retryAfterMs
        })
      }
      const applicable = apiKeyId === null ? [] : (yield* limits.list(apiKeyId)).filter((l) => limitApplies(l, target))

      const kept = refreshed.get(`${connection.id}\u0000${model}`)
      const fresh = kept !== undefined && now < kept.until ? kept : undefined
      const upstream = fresh
        ? { ...fresh.view, details: { ...fresh.view.details, refreshedAt: iso(fresh.at) } }
        : yield* askUpstream(inference, connection, model, now)
      if (!upstream.ok) refusals.unshift({ by: "upstream", reason: upstream.reason ?? "the upstream says no", resetsAt: upstream.resetsAt })

      const ok = refusals.length === 0
      // Refused: when every refusal has passed (unknown if one never passes by itself); else when the upstream's figures renew.
      const resetsAt = ok
        ? upstream.resetsAt
        : refusals.some((r) => r.resetsAt === null)
          ? null
          : Math.max(...refusals.map((r) => r.resetsAt!))
      const remaining = upstream.remaining ?? budgetStatus?.remainingUsd ?? null
      const answer: QuotaAnswer = {
        ok,
        remaining,
        resetsAt: iso(resetsAt),
        source: upstream.source,
        provider: connection.provider.id,
        connection: connection.name,
        reason: refusals[0]?.reason ?? null,
        details: {
          unit: upstream.remaining !== null ? upstream.unit : budgetStatus ? "usd" : null,
          model,
          refusedBy: refusals.map((r) => ({ by: r.by, reason: r.reason, resetsAt: iso(r.resetsAt) })),
          upstream: {
            ok: upstream.ok,
            status: upstream.status,
            remaining: upstream.remaining,
            unit: upstream.unit,
            resetsAt: iso(upstream.resetsAt),
            reason: upstream.reason,
            ...upstream.details
          },
          budget: budgetStatus
            ? {
                ok: budget.ok,
                limitUsd: budgetStatus.limitUsd,
                spentUsd: budgetStatus.spentUsd,
                remainingUsd: budgetStatus.remainingUsd,
                resetsAt: budgetStatus.resetsAt,
                window: budgetStatus.resetInterval
              }
            : null,
          tokenLimits: applicable.map((l) => ({
            id: l.id,
            scope: l.scope,
            window: l.window,
            maxTokens: l.maxTokens,
            usedTokens: l.usedTokens,
            remaining: Math.max(0, l.maxTokens - l.usedTokens),
            resetsAt: l.resetsAt
          })),
          resilience: {
            enabled: connection.enabled,
            admission: admission.ok ? "ok" : admission.reason,
            breaker: resilience.breakerState(candidate, now),
            state: availability.state,
            cooldownUntil: iso(availability.until)
          }
        }
      }
      return answer
    })

interface RefreshDeps {
  readonly connections: ConnectionsShape
  readonly inference: InferenceShape
  readonly refreshed: RefreshedViews
}

/** `refresh`: every enabled connection's upstream view, asked 4 at a time and kept for `maxAgeMs`. */
const makeRefresh =
  ({ connections, inference, refreshed }: RefreshDeps) =>
  (maxAgeMs: number) =>
    Effect.gen(function* () {
      const all = (yield* connections.list).filter((c) => c.enabled && readerFor(c) !== undefined)
      yield* Effect.forEach(
        all,
        (c) =>
          Effect.gen(function* () {
            const model = probeModel(c, undefined)
            const at = yield* Clock.currentTimeMillis
            const view = yield* askUpstream(inference, c, model, at)
            refreshed.set(`${c.id}\u0000${model}`, { view, at, until: at + maxAgeMs })
          }),
        { concurrency: 4, discard: true }
      )
      return all.length
    })

export class Quotas extends Context.Tag("gateway/Quotas")<Quotas, QuotasShape>() {
  static readonly layer = Layer.effect(
    Quotas,
    Effect.gen(function* () {
      const connections = yield* Connections
      const inference = yield* Inference
      const accounting = yield* Accounting
      const budgets = yield* Budgets
      const limits = yield* TokenLimits
      const resilience = yield* Resilience
      const cooldowns = yield* Cooldowns
      /** The periodic refresh's views, per connection id and probe model. */
      const refreshed: RefreshedViews = new Map()

      const check = makeCheck({ connections, inference, accounting, budgets, limits, resilience, cooldowns, refreshed })
      const refresh = makeRefresh({ connections, inference, refreshed })

      return { check, refresh } satisfies QuotasShape
    })
  )
}
