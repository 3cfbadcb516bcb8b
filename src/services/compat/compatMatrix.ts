/**
 * The compatibility matrix as GET /api/compat shows it: the cases against the models, what running
 * them would cost at most (each answer at its output cap), and the last run's cells.
 */
import * as Effect from "effect/Effect"
import type { CompatCell, CompatMatrix } from "../../domain/compat.js"
import { BadRequest } from "../../domain/errors.js"
import type { ConnectionsShape } from "../../upstream/providers/Connections.js"
import type { AccountingShape } from "../accounting/Accounting.js"
import type { PricingShape } from "../accounting/Pricing.js"
import type { CompatShape } from "./Compat.js"
import { type Case, capped, inputTokensOf } from "./compatCases.js"
import type { Stored } from "./compatRun.js"

export interface CompatMatrixDeps {
  readonly connections: ConnectionsShape
  readonly accounting: AccountingShape
  readonly pricing: PricingShape
  readonly cases: Effect.Effect<ReadonlyArray<Case>>
  /** The run under way here, else the last one any gateway on the database wrote. */
  readonly lastRun: Effect.Effect<Stored | undefined>
}

/** The matrix: `matrix` (of the given models, else the last run's, else the configured ones), `matrixFor` and `modelsOr`, which a run uses.
 * */
export const makeCompatMatrix = ({ connections, accounting, pricing, cases, lastRun }: CompatMatrixDeps) => {
  /** Each enabled connection's configured models (its default model when it lists none). */
  const configuredModels = Effect.map(connections.list, (list) =>
    list
      .filter((c) => c.enabled)
      .flatMap((c) => (c.models.length > 0 ? c.models : c.defaultModel ? [c.defaultModel] : []).map((m) => `${c.name}/${m}`))
      .slice(0, 24)
  )

  /** What a case costs a model at most; undefined when the model has no price. */
  const priceOf = (model: string) =>
    Effect.map(Effect.either(connections.targets(model)), (targets) => {
      const first = targets._tag === "Right" ? targets.right[0] : undefined
      if (first === undefined || pricing.priceOf(first.connection.provider.id, first.model) === undefined) return undefined
      return (inputTokens: number, outputTokens: number) =>
        accounting.cost(first.connection.provider.id, first.model, { inputTokens, outputTokens })
    })

  /** The matrix of `models`: each cell's estimate, and what `last` (a run) answered of it. */
  const matrixFor = (models: ReadonlyArray<string>, last: Stored | undefined): Effect.Effect<CompatMatrix> =>
    Effect.gen(function* () {
      const all = yield* cases
      const sized = all.map((c) => {
        const { body, maxOutputTokens } = capped(c)
        return { c, inputTokens: inputTokensOf(body), maxOutputTokens }
      })
      const perModel: Record<string, number | null> = {}
      const unpriced: Array<string> = []
      const estimates = new Map<string, number | null>()
      for (const model of models) {
        const price = yield* priceOf(model)
        if (price === undefined) unpriced.push(model)
        let total = 0
        for (const s of sized) {
          const usd = price ? price(s.inputTokens, s.maxOutputTokens) : null
          estimates.set(`${s.c.id}\u0000${model}`, usd)
          total += usd ?? 0
        }
        perModel[model] = price ? total : null
      }
      const ran = new Map((last?.cells ?? []).map((cell) => [`${cell.case}\u0000${cell.model}`, cell]))
      const underWay = last?.state === "running" ? { models: new Set(last.models), cases: new Set(last.cases) } : undefined
      const cells: Array<CompatCell> = []
      for (const s of sized)
        for (const model of models) {
          const key = `${s.c.id}\u0000${model}`
          const estimatedUsd = estimates.get(key) ?? null
          const done = ran.get(key)
          const status = underWay?.models.has(model) && underWay.cases.has(s.c.id) ? ("pending" as const) : ("not-run" as const)
          cells.push(
            done
              ? { ...done, estimatedUsd }
              : { case: s.c.id, model, status, reason: null, exchangeId: null, latencyMs: null, costUsd: null, estimatedUsd }
          )
        }
      const count = (status: CompatCell["status"]) => (last?.cells ?? []).filter((c) => c.status === status).length
      return {
        cases: sized.map((s) => ({
          id: s.c.id,
          client: s.c.client,
          capability: s.c.capability,
          source: s.c.source,
          path: s.c.path,
          stream: s.c.stream,
          inputTokens: s.inputTokens,
          maxOutputTokens: s.maxOutputTokens
        })),
        models: [...models],
        estimate: { totalUsd: Object.values(perModel).reduce<number>((a, b) => a + (b ?? 0), 0), perModel, unpriced },
        run:
          last === undefined
            ? null
            : {
                id: last.id,
                state: last.state,
                startedAt: last.startedAt,
                finishedAt: last.finishedAt,
                budgetUsd: last.budgetUsd,
                spentUsd: last.spentUsd,
                total: last.cases.length * last.models.length,
                done: last.cells.length,
                passed: count("pass"),
                failed: count("fail"),
                skipped: count("skipped")
              },
        cells
      }
    })

  /** The models given, else the last run's, else the configured ones. */
  const modelsOr = (given: ReadonlyArray<string> | undefined, last: Stored | undefined) =>
    Effect.gen(function* () {
      if (given !== undefined && given.length > 0) return [...new Set(given)]
      if (last !== undefined && last.models.length > 0) return [...last.models]
      return yield* configuredModels
    })

  const matrix: CompatShape["matrix"] = (given) =>
    Effect.gen(function* () {
      if (given !== undefined && given.length > 24) return yield* Effect.fail(new BadRequest({ message: "models holds at most 24 models" }))
      const last = yield* lastRun
      return yield* matrixFor(yield* modelsOr(given, last), last)
    })

  return { matrix, matrixFor, modelsOr }
}
