/**
 * A compatibility run: the cases against the models in the background within a budget, kept as it
 * goes (KeyValue `compat`/`last`) with each cell's exchange (`compat.exchanges`), so any gateway on
 * the database shows its progress and a failing cell's request and answer are one call away.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import type { CompatCell, CompatExchange, CompatMatrix } from "../../domain/compat.js"
import { BadRequest, Conflict, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { OwnRoutesShape } from "../../kernel/internalCall.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import { type KeptJob, type KeptState, readKept, startKept } from "../../platform/store/keptJob.js"
import { callOwn } from "../shadow/exchange.js"
import type { CompatShape } from "./Compat.js"
import { type Case, targetOf, verdict } from "./compatCases.js"

/** An answer kept to read, at most. */
const ANSWER_KEEP = 64 * 1024
const LAST_NS = "compat"
const EXCHANGES_NS = "compat.exchanges"

/** A run as kept (KeyValue `compat`/`last`): written as it goes, so any gateway on the database shows its progress. */
export interface Stored extends KeptState {
  readonly id: string
  readonly startedAt: string
  readonly budgetUsd: number
  readonly spentUsd: number
  readonly models: ReadonlyArray<string>
  readonly cases: ReadonlyArray<string>
  /** The cells answered or skipped so far. */
  readonly cells: ReadonlyArray<CompatCell>
}

interface StoredExchange {
  readonly id: string
  readonly case: string
  readonly model: string
  readonly status: "pass" | "fail"
  readonly reason: string | null
  readonly answer: CompatExchange["answer"]
}

/** What the service holds while the gateway runs. */
export interface CompatState {
  /** The gateway's own routes, once the server listens. */
  own: OwnRoutesShape | undefined
  /** The run under way in this process. */
  current: KeptJob<Stored> | undefined
}

/** The run under way here, else the last one any gateway on the database wrote. */
export const makeLastRun = ({
  kv,
  state
}: {
  readonly kv: KeyValueShape
  readonly state: CompatState
}): Effect.Effect<Stored | undefined> =>
  Effect.suspend(() =>
    state.current !== undefined
      ? Effect.succeed(state.current.current())
      : Effect.map(readKept<Stored>(kv, LAST_NS, "last"), (o) => (Option.isSome(o) && typeof o.value.id === "string" ? o.value : undefined))
  )

export interface CompatRunDeps {
  readonly kv: KeyValueShape
  /** The service's scope: a run goes on in it after the request that started it. */
  readonly scope: Scope.Scope
  readonly state: CompatState
  readonly cases: Effect.Effect<ReadonlyArray<Case>>
  readonly lastRun: Effect.Effect<Stored | undefined>
  readonly modelsOr: (given: ReadonlyArray<string> | undefined, last: Stored | undefined) => Effect.Effect<Array<string>>
  readonly matrixFor: (models: ReadonlyArray<string>, last: Stored | undefined) => Effect.Effect<CompatMatrix>
}

/** Starts a run (one at a time across the gateways on the database), the previous run's exchanges removed; answers its matrix. */
export const makeCompatRun =
  ({ kv, scope, state, cases, lastRun, modelsOr, matrixFor }: CompatRunDeps): CompatShape["run"] =>
  (request) =>
    Effect.gen(function* () {
      const routes = state.own
      if (routes === undefined)
        return yield* Effect.fail(
          new ServiceUnavailable({ message: "the compatibility matrix runs once the gateway's server is listening" })
        )
      const all = yield* cases
      const unknown = (request.cases ?? []).filter((id) => !all.some((c) => c.id === id))
      if (unknown.length > 0)
        return yield* Effect.fail(new BadRequest({ message: `no such case: ${unknown.join(", ")} (GET /api/compat lists them)` }))
      const chosen = request.cases ? all.filter((c) => request.cases!.includes(c.id)) : all
      const models = yield* modelsOr(request.models, undefined)
      if (models.length === 0)
        return yield* Effect.fail(new BadRequest({ message: "no model to run against: add a connection with models, or name models" }))
      const previous = yield* lastRun
      if (previous?.state === "running")
        return yield* Effect.fail(
          new Conflict({
            message: `a compatibility run is under way (${previous.id}, ${previous.cells.length} cells done): try again when it has finished`
          })
        )
      // The previous run's exchanges go; this run's are kept as they come.
      for (const cell of previous?.cells ?? []) if (cell.exchangeId) yield* kv.remove(EXCHANGES_NS, cell.exchangeId)
      const runId = crypto.randomBytes(4).toString("hex")
      const kept = yield* startKept<Stored>(kv, LAST_NS, "last", {
        id: runId,
        state: "running",
        startedAt: new Date().toISOString(),
        finishedAt: null,
        savedAt: Date.now(),
        budgetUsd: request.budgetUsd,
        spentUsd: 0,
        models,
        cases: chosen.map((c) => c.id),
        cells: []
      })
      state.current = kept
      const settle = (cell: CompatCell, usd: number) =>
        kept.update((r) => ({ ...r, spentUsd: r.spentUsd + usd, cells: [...r.cells, cell] }))
      const work = chosen.flatMap((c) => models.map((model) => ({ c, model })))
      const one = ({ c, model }: (typeof work)[number], n: number) =>
        Effect.gen(function* () {
          const base: Omit<CompatCell, "status" | "reason"> = {
            case: c.id,
            model,
            exchangeId: null,
            latencyMs: null,
            costUsd: null,
            estimatedUsd: null
          }
          if (kept.current().spentUsd >= request.budgetUsd)
            return settle({ ...base, status: "skipped", reason: "budget: the run had spent its budget" }, 0)
          const target = targetOf(c, model)
          const res = yield* callOwn(routes, target.path, target.body, `compat_${runId}_${n}`, c.headers)
          const judged = yield* Effect.promise(() => verdict(c, target.body, res))
          const id = `cx_${runId}_${n}`
          const status = judged.pass ? ("pass" as const) : ("fail" as const)
          const stored: StoredExchange = {
            id,
            case: c.id,
            model,
            status,
            reason: judged.reason,
            answer: {
              status: res.status,
              contentType: res.contentType,
              body: res.text.slice(0, ANSWER_KEEP),
              truncated: res.text.length > ANSWER_KEEP
            }
          }
          yield* kv.set(EXCHANGES_NS, id, JSON.stringify(stored))
          settle({ ...base, status, reason: judged.reason, exchangeId: id, latencyMs: res.latencyMs, costUsd: res.costUsd }, res.costUsd)
        })
      yield* kept.launch(Effect.forEach(work, one, { concurrency: request.concurrency, discard: true }), scope, () => {
        if (state.current === kept) state.current = undefined
      })
      return yield* matrixFor(models, kept.current())
    })

/** A cell's exchange: what it was sent (the case aimed at its model) and what it answered. */
export const makeCompatExchange =
  ({ kv, cases }: { readonly kv: KeyValueShape; readonly cases: Effect.Effect<ReadonlyArray<Case>> }): CompatShape["exchange"] =>
  (id) =>
    Effect.gen(function* () {
      const raw = yield* kv.get(EXCHANGES_NS, id)
      if (Option.isNone(raw)) return yield* Effect.fail(new NotFound({ message: `no exchange ${id} (only the last run's are kept)` }))
      const x = JSON.parse(raw.value) as StoredExchange
      const c = (yield* cases).find((k) => k.id === x.case)
      if (c === undefined) return yield* Effect.fail(new NotFound({ message: `exchange ${id} is of a case this version no longer has` }))
      const target = targetOf(c, x.model)
      return {
        ...x,
        request: { method: "POST", path: target.path, headers: { ...c.headers, "content-type": "application/json" }, body: target.body }
      }
    })
