/**
 * Replay (docs/replay.md): the requests of a recorded inspector session, of usage rows whose
 * bodies the inspector kept, or of a JSONL text, sent again to candidate models through the
 * gateway's own routes, within a concurrency and a budget; each candidate's answer is compared
 * with the recorded one (or, none recorded, the first model's) and stored as a pair under the
 * scope `replay:<id>`, so the report is shadow traffic's (`Shadow.report`).
 *
 * A job runs in this process; its state is kept (KeyValue `replay.jobs`) as it goes, so any
 * gateway on the same database answers `GET /api/replay/{id}`, and a job whose process stopped
 * says `interrupted`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as crypto from "node:crypto"
import { BadRequest, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { ReplayJob, StartReplay } from "../../domain/replay.js"
import { bindOwnRoutes, type OwnRoutesShape, type TakesOwnRoutes } from "../../kernel/internalCall.js"
import { Settings } from "../../platform/settings/Settings.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { type KeptJob, readKept, startKept } from "../../platform/store/keptJob.js"
import { Inspector } from "../inspector/Inspector.js"
import { type Baseline, baselineOf, callOwn, type ExchangeOptions, exchange, type RecordedRequest, retarget } from "./exchange.js"
import { Shadow } from "./Shadow.js"
import { fromEntry, fromJsonl, JsonlError, type SourceItem } from "./sources.js"

const JOBS_NS = "replay.jobs"
/** The reasons kept to read, per job. */
const MAX_NOTES = 20

/** The job as kept: the report is read when asked. */
type Stored = Omit<ReplayJob, "report"> & { readonly savedAt: number }

export interface ReplayShape extends TakesOwnRoutes {
  /** Reads the source, answers the job (running), and runs it in the background. */
  readonly start: (request: StartReplay) => Effect.Effect<ReplayJob, BadRequest | NotFound | ServiceUnavailable>
  readonly get: (id: string) => Effect.Effect<ReplayJob, NotFound>
}

export class Replay extends Context.Tag("gateway/Replay")<Replay, ReplayShape>() {
  static readonly layer = Layer.scoped(
    Replay,
    Effect.gen(function* () {
      const shadow = yield* Shadow
      const inspector = yield* Inspector
      const kv = yield* KeyValue
      const sql = yield* SqlClient.SqlClient
      const settings = yield* Settings
      const scope = yield* Effect.scope
      let own: OwnRoutesShape | undefined
      const running = new Map<string, KeptJob<Stored>>()

      const withReport = (job: Stored): Effect.Effect<ReplayJob> =>
        Effect.map(shadow.report(`replay:${job.id}`, undefined, { skipped: job.skipped, spentUsd: job.spentUsd, budgetUsd: job.budgetUsd }), (report) => {
          const { savedAt: _s, ...rest } = job
          return { ...rest, report }
        })

      /** The requests of the source, or a 4xx naming what is wrong with it. */
      const itemsOf = (source: StartReplay["source"]): Effect.Effect<{ readonly label: string; readonly items: ReadonlyArray<SourceItem> }, BadRequest | NotFound> =>
        Effect.gen(function* () {
          if (source.sessionId !== undefined) {
            const id = source.sessionId
            const session = yield* Effect.mapError(inspector.sessions.get(id), () => new NotFound({ message: `no inspector session ${id}` }))
            return { label: `session:${id}`, items: session.entries.map((e, i) => fromEntry(e, `request ${i + 1} (${e.requestId ?? e.id})`)) }
          }
          if (source.usageIds !== undefined) {
            const ids = [...new Set(source.usageIds)]
            // The inspector knows a request by its request id at once (its usage row is written a moment later).
            const seen = yield* inspector.byRequestIds(ids)
            const unseen = ids.filter((i) => !seen.has(i))
            const requestIdOf = new Map<string, string>()
            if (unseen.length > 0) {
              const numeric = unseen.filter((i) => /^\d+$/.test(i)).map(Number)
              const rows = yield* sql<{ id: number; request_id: string }>`SELECT id, request_id FROM usage WHERE ${sql.or([
                sql.in("request_id", unseen),
                ...(numeric.length > 0 ? [sql.in("id", numeric)] : [])
              ])}`.pipe(Effect.orDie)
              for (const r of rows) {
                requestIdOf.set(r.request_id, r.request_id)
                requestIdOf.set(String(r.id), r.request_id)
              }
            }
            const byRowId = yield* inspector.byRequestIds([...new Set(requestIdOf.values())].filter((r) => !seen.has(r)))
            const items = ids.map((id): SourceItem => {
              const requestId = seen.has(id) ? id : requestIdOf.get(id)
              if (requestId === undefined) return { ok: false, reason: "not_found", note: `usage ${id}: no such request in the usage log` }
              const entry = seen.get(requestId) ?? byRowId.get(requestId)
              if (entry === undefined)
                return {
                  ok: false,
                  reason: "body_not_kept",
                  note: `usage ${id}: its body was not kept (the inspector keeps bodies while a session records or someone looks)`
                }
              return fromEntry(entry, `usage ${id}`)
            })
            return { label: `usage:${ids.length}`, items }
          }
          const text = source.jsonl ?? ""
          try {
            const items = fromJsonl(text)
            return { label: `jsonl:${items.length}`, items }
          } catch (e) {
            if (e instanceof JsonlError) return yield* Effect.fail(new BadRequest({ message: e.message }))
            throw e
          }
        })

      const start: ReplayShape["start"] = (request) =>
        Effect.gen(function* () {
          const routes = own
          if (routes === undefined) return yield* Effect.fail(new ServiceUnavailable({ message: "replay is available once the gateway's server is listening" }))
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
          running.set(id, kept)
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
                const { pair, ok } = yield* exchange(options, recorded, model, { call: `replay_${id}_${n}_${m}`, judge: `replay_${id}_${n}_${m}_judge` }, baseline)
                yield* shadow.record(pair)
                update((j) => ({ ...j, calls: { ...j.calls, done: j.calls.done + 1, failed: j.calls.failed + (ok ? 0 : 1) } }))
              }
            })

          yield* kept.launch(
            Effect.forEach(replayable, (item, n) => one(item, n), { concurrency: request.concurrency, discard: true }),
            scope,
            () => running.delete(id)
          )
          return yield* withReport(kept.current())
        })

      const get: ReplayShape["get"] = (id) =>
        Effect.gen(function* () {
          const live = running.get(id)
          if (live) return yield* withReport(live.current())
          const stored = yield* readKept<Stored>(kv, JOBS_NS, id)
          if (Option.isNone(stored)) return yield* Effect.fail(new NotFound({ message: `no replay ${id}` }))
          return yield* withReport(stored.value)
        })

      return {
        start,
        get,
        setOwnRoutes: (o) => {
          own = o
        }
      } satisfies ReplayShape
    })
  )

  /** Gives it the gateway's own routes once the server listens. */
  static readonly ownRoutesLayer = bindOwnRoutes(Replay)
}
