/**
 * A replay job: its requests sent again to the candidate models within a concurrency and a budget,
 * each answer compared with the recorded one (or the first model's) and stored as a shadow pair
 * under `replay:<id>`. Its state is kept as it goes (KeyValue `replay.jobs`), so any gateway on
 * the database reads it, with the report of its pairs.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import { BadRequest, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { ReplayJob, StartReplay } from "../../domain/replay.js"
import type { OwnRoutesShape } from "../../kernel/internalCall.js"
import type { SettingsShape } from "../../platform/settings/Settings.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import { type KeptJob, readKept, startKept } from "../../platform/store/keptJob.js"
import { type Baseline, baselineOf, callOwn, type ExchangeOptions, exchange, type RecordedRequest, retarget } from "./exchange.js"
import type { ReplayShape } from "./Replay.js"
import type { ShadowShape } from "./Shadow.js"
import type { SourceItem } from "./sources.js"

const JOBS_NS = "replay.jobs"
/** The reasons kept to read, per job. */
const MAX_NOTES = 20

/** The job as kept: the report is read when asked. */
type Stored = Omit<ReplayJob, "report"> & { readonly savedAt: number }

/** What the service holds while the gateway runs. */
export interface ReplayState {
  /** The gateway's own routes, once the server listens. */
  own: OwnRoutesShape | undefined
  /** The jobs running in this process, by id. */
  readonly running: Map<string, KeptJob<Stored>>
}

/** A job as answered: its kept state with the report of its pairs (skips and spend its own). */
export const makeWithReport =
  ({ shadow }: { readonly shadow: ShadowShape }) =>
  (job: Stored): Effect.Effect<ReplayJob> =>
    Effect.map(
      shadow.report(`replay:${job.id}`, undefined, { skipped: job.skipped, spentUsd: job.spentUsd, budgetUsd: job.budgetUsd }),
      (report) => {
        const { savedAt: _s, ...rest } = job
        return { ...rest, report }
      }
    )

export interface ReplayStartDeps {
  readonly kv: KeyValueShape
  readonly settings: SettingsShape
  readonly shadow: ShadowShape
  /** The service's scope: a job goes on in it after the request that started it. */
  readonly scope: Scope.Scope
  readonly state: ReplayState
  readonly itemsOf: (
    source: StartReplay["source"]
  ) => Effect.Effect<{ readonly label: string; readonly items: ReadonlyArray<SourceItem> }, BadRequest | NotFound>
  readonly withReport: (job: Stored) => Effect.Effect<ReplayJob>
}

/** Reads the source, answers the job (running), and runs it in the background. */
export const makeReplayStart =
  ({ kv, settings, shadow, scope, state, itemsOf, withReport }: ReplayStartDeps): ReplayShape["start"] =>
  (request) =>
    Effect.gen(function* () {
      const routes = state.own
      if (routes === undefined)
        return yield* Effect.fail(new ServiceUnavailable({ message: "replay is available once the gateway's server is listening" }))
      const { label, items } = yield* itemsOf(request.source)
      const replayable = items.flatMap((i) => (i.ok ? [i] : []))
      const models = [...new Set(request.models)]
      const needsBaseline = replayable.filter((i) => i.recorded === null).length
      if (replayable.length > 0 && needsBaseline > 0 && models.length < 2 && needsBaseline === replayable.length)
        return yield* Effect.fail(
          new BadRequest({
            message:
              "none of these requests has a recorded answer to compare with: name at least two models (the first answers as the baseline, the others are compared with it)"
          })
        )
      const skipped: Record<string, number> = {}
      const notes: Array<string> = []
      const leftOut = (reason: string, note?: string) => {
        skipped[reason] = (skipped[reason] ?? 0) + 1
        if (note !== undefined && notes.length < MAX_NOTES) notes.push(note)
      }
      for (const i of items) if (!i.ok) leftOut(i.reason, i.note)
      const judgeModel = request.judgeModel === undefined ? settings.current().shadowOptions.judgeModel : request.judgeModel
      const id = `rpl_${crypto.randomBytes(6).toString("hex")}`
      // Candidates per request: every model against a recorded answer; the others against the first model's.
      const total = replayable.reduce((n, i) => n + (i.recorded !== null ? models.length : models.length - 1), 0)
      const job: Stored = {
        id,
        state: "running",
        source: label,
        models,
        baseline: needsBaseline === 0 ? "recorded" : needsBaseline === replayable.length ? "first-model" : "mixed",
        concurrency: request.concurrency,
        budgetUsd: request.budgetUsd,
        spentUsd: 0,
        createdAt: new Date().toISOString(),
        finishedAt: null,
        requests: items.length,
        replayable: replayable.length,
        calls: { total, done: 0, failed: 0 },
        skipped,
        notes,
        savedAt: Date.now()
      }
      const kept = yield* startKept(kv, JOBS_NS, id, job)
      state.running.set(id, kept)
      const update = kept.update
      const spend = (usd: number) => update((j) => ({ ...j, spentUsd: j.spentUsd + usd }))
      const overBudget = () => kept.current().spentUsd >= kept.current().budgetUsd
      const options: ExchangeOptions = { own: routes, judgeModel, mayJudge: () => !overBudget(), spend }
      const skip = (reason: string, n = 1) => update((j) => ({ ...j, skipped: { ...j.skipped, [reason]: (j.skipped[reason] ?? 0) + n } }))
      const note = (text: string) => update((j) => (j.notes.length < MAX_NOTES ? { ...j, notes: [...j.notes, text] } : j))

      const one = (item: Extract<SourceItem, { ok: true }>, n: number) =>
        Effect.gen(function* () {
          const recorded: RecordedRequest = { ...item.request, requestId: `replay_${id}_${n}`, scope: `replay:${id}` }
          let baseline: Baseline | null = item.recorded
          let candidates = models
          if (baseline === null) {
            const [first, ...rest] = models
            candidates = rest
            if (overBudget()) return skip("budget", rest.length)
            const { path, body } = retarget(recorded, first!)
            const res = yield* callOwn(routes, path, body, `replay_${id}_${n}_b`)
            spend(res.costUsd)
            if (res.status !== 200) {
              update((j) => ({ ...j, calls: { ...j.calls, done: j.calls.done + rest.length, failed: j.calls.failed + rest.length } }))
              note(`${item.origin}: the baseline model ${first} answered ${res.status}: ${res.text.slice(0, 200)}`)
              return
            }
            baseline = baselineOf(recorded, res)
          }
          for (const [m, model] of candidates.entries()) {
            if (overBudget()) {
              skip("budget")
              continue
            }
            const { pair, ok } = yield* exchange(
              options,
              recorded,
              model,
              { call: `replay_${id}_${n}_${m}`, judge: `replay_${id}_${n}_${m}_judge` },
              baseline
            )
            yield* shadow.record(pair)
            update((j) => ({ ...j, calls: { ...j.calls, done: j.calls.done + 1, failed: j.calls.failed + (ok ? 0 : 1) } }))
          }
        })

      yield* kept.launch(
        Effect.forEach(replayable, (item, n) => one(item, n), { concurrency: request.concurrency, discard: true }),
        scope,
        () => state.running.delete(id)
      )
      return yield* withReport(kept.current())
    })

/** A job by id: the one running here, else as kept by whichever gateway ran it. */
export const makeReplayGet =
  ({
    kv,
    state,
    withReport
  }: {
    readonly kv: KeyValueShape
    readonly state: ReplayState
    readonly withReport: (job: Stored) => Effect.Effect<ReplayJob>
  }): ReplayShape["get"] =>
  (id) =>
    Effect.gen(function* () {
      const live = state.running.get(id)
      if (live) return yield* withReport(live.current())
      const stored = yield* readKept<Stored>(kv, JOBS_NS, id)
      if (Option.isNone(stored)) return yield* Effect.fail(new NotFound({ message: `no replay ${id}` }))
      return yield* withReport(stored.value)
    })
