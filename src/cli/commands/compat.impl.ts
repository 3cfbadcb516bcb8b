import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { CompatRun } from "../../domain/compat.js"
import type { CompatMatrix } from "../../domain/compat.js"
import { Conflict, ServiceUnavailable } from "../../domain/errors.js"
import type { Parsed } from "../handler.js"
import { exitWith, printJson, table } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import { decodeInput } from "../schema.js"
import type { doctorOptions } from "./doctor.js"

/** How often a run's progress is read. */
const POLL = "1 second"

const usd = (v: number | null) => (v === null ? "unpriced" : `$${v.toFixed(6)}`)

/** The matrix: one row per case, one column per model. */
const printMatrix = (m: CompatMatrix, cases: ReadonlySet<string> | undefined) =>
  Effect.gen(function* () {
    const shown = m.cases.filter((c) => cases === undefined || cases.has(c.id))
    const cell = (id: string, model: string) => m.cells.find((c) => c.case === id && c.model === model)
    const mark = (s: string | undefined) => (s === "pass" ? "PASS" : s === "fail" ? "FAIL" : s === "skipped" ? "SKIP" : "-")
    yield* Console.log(
      table(
        ["CASE", ...m.models, "CLIENT", "CAPABILITY"],
        shown.map((c) => [c.id, ...m.models.map((model) => mark(cell(c.id, model)?.status)), c.client, c.capability])
      )
    )
    const failed = m.cells.filter((c) => c.status === "fail" && (cases === undefined || cases.has(c.case)))
    if (failed.length > 0) {
      yield* Console.log("\nfailing cells:")
      for (const f of failed)
        yield* Console.log(`- ${f.case} on ${f.model}: ${f.reason}\n  read it: GET /api/compat/exchanges/${f.exchangeId}`)
    }
    return failed.length
  })

/** `gateway doctor --clients`: the live compatibility matrix of the running server (docs/compat.md). */
export const clients = (opts: Parsed<typeof doctorOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const models = opts.model.length > 0 ? opts.model : undefined
    const cases = opts.case.length > 0 ? new Set(opts.case) : undefined
    const plan = yield* client.compat.matrix({ urlParams: models ? { models: models.join(",") } : {} }).pipe(Effect.mapError(explain(url)))
    const budget = Option.getOrElse(opts.budget, () => 0.25)
    // What the chosen cells would cost at most.
    const chosen = plan.cells.filter((c) => cases === undefined || cases.has(c.case))
    const estimate = chosen.reduce((s, c) => s + (c.estimatedUsd ?? 0), 0)
    const unpriced = [...new Set(chosen.filter((c) => c.estimatedUsd === null).map((c) => c.model))]
    if (!opts.yes) {
      if (opts.json) return yield* printJson(plan)
      const cells = `${chosen.length} cells (${new Set(chosen.map((c) => c.case)).size} client requests × ${plan.models.length} models)`
      const allUnpriced = chosen.length > 0 && chosen.every((c) => c.estimatedUsd === null)
      yield* Console.log(
        allUnpriced
          ? `${cells}: no price is known for ${unpriced.join(", ")}, so what they cost is not known before running, and their calls count $0 against the budget ($${budget}).`
          : `${cells} would cost at most ${usd(estimate)}${unpriced.length > 0 ? `, plus what the unpriced models cost (${unpriced.join(", ")}: their calls count $0 against the budget)` : ""}; the run stops starting calls at $${budget}.`
      )
      for (const [model, v] of Object.entries(plan.estimate.perModel)) yield* Console.log(`  ${model}: ${usd(v)} for every case`)
      if (plan.run) {
        yield* Console.log(
          `\nthe last run (${plan.run.finishedAt}): ${plan.run.passed} passed, ${plan.run.failed} failed, ${plan.run.skipped} skipped, $${plan.run.spentUsd.toFixed(6)}`
        )
        yield* printMatrix(plan, cases)
      }
      return yield* Console.log("\nrun it with --yes (and --budget <usd> to change the cap)")
    }
    const payload = yield* decodeInput(CompatRun, { models: "--model", cases: "--case", budgetUsd: "--budget" })({
      ...(models ? { models } : {}),
      ...(cases ? { cases: [...cases] } : {}),
      budgetUsd: budget
    })
    const started = yield* client.compat.run({ payload }).pipe(Effect.mapError(explain(url)))
    const runId = started.run!.id
    // The run goes on in the server; its progress is read until it ends (a second at a time, a line every 5 s).
    let told = Date.now()
    let m = started
    while (m.run?.id === runId && m.run.state === "running") {
      yield* Effect.sleep(POLL)
      m = yield* client.compat.matrix({ urlParams: { models: started.models.join(",") } }).pipe(Effect.mapError(explain(url)))
      if (!opts.json && m.run?.state === "running" && Date.now() - told >= 5_000) {
        told = Date.now()
        yield* Console.error(`running: ${m.run.done} of ${m.run.total} cells, $${m.run.spentUsd.toFixed(6)} spent`)
      }
    }
    const r = m.run
    if (r?.id !== runId)
      return yield* Effect.fail(new Conflict({ message: `the run ${runId} was replaced by another (${r?.id ?? "none"}) before it ended` }))
    const failed = m.cells.filter((c) => c.status === "fail").length
    if (opts.json) yield* printJson(m)
    else {
      yield* Console.log(
        `compatibility: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped (budget), spent $${r.spentUsd.toFixed(6)} of $${r.budgetUsd}`
      )
      yield* printMatrix(m, cases)
    }
    if (r.state === "interrupted")
      return yield* Effect.fail(new ServiceUnavailable({ message: `the run stopped with the gateway after ${r.done} of ${r.total} cells` }))
    if (failed > 0) yield* exitWith(1)
  }).pipe(withHttp)
