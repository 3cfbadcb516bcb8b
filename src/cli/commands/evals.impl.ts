import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import { CreateEvalSet, type EvalRunView } from "../../domain/evals.js"
import type { Parsed } from "../handler.js"
import { printJson, table } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import { decodeInput, UsageError } from "../schema.js"
import type { createOptions, listOptions, runOptions, showOptions } from "./evals.js"

const usd = (n: number) => `$${n.toFixed(6)}`

const printRun = (run: EvalRunView) =>
  Effect.gen(function* () {
    yield* Console.log(`run ${run.id} of ${run.evalId}: ${run.status}${run.error ? ` (${run.error})` : ""}`)
    if (!run.results) return
    yield* Console.log(
      table(
        ["MODEL", "SCORE", "PASSED", "MEAN LATENCY", "COST"],
        run.results.map((r) => [r.model, r.score.toFixed(3), `${r.passed}/${r.total}`, `${r.meanLatencyMs} ms`, usd(r.costUsd)])
      )
    )
    yield* Console.log("")
    yield* Console.log(
      table(
        ["MODEL", "CASE", "SCORE", "LATENCY", "COST", "REASON"],
        run.results.flatMap((r) =>
          r.cases.map((c) => [r.model, c.caseId, c.score.toFixed(2), `${c.latencyMs} ms`, usd(c.costUsd), c.reason ?? "-"])
        )
      )
    )
  })

export const list = (opts: Parsed<typeof listOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const { evals } = yield* client.evals.list().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson({ evals })
    if (evals.length === 0) return yield* Console.log("no eval sets yet: create one with `gateway eval create <file.json>`")
    yield* Console.log(
      table(
        ["ID", "NAME", "CASES", "CREATED"],
        evals.map((e) => [e.id, e.name, String(e.cases.length), e.createdAt])
      )
    )
  }).pipe(withHttp)

export const create = (opts: Parsed<typeof createOptions>) =>
  Effect.gen(function* () {
    const raw = yield* Effect.try({
      try: () => JSON.parse(fs.readFileSync(opts.file, "utf8")) as unknown,
      catch: (e) => new UsageError({ message: `<file>: ${opts.file} is not valid JSON: ${(e as Error).message}` })
    })
    const input = yield* decodeInput(CreateEvalSet)(raw).pipe(Effect.mapError((e) => new UsageError({ message: `<file>: ${e.message}` })))
    const { url, client } = yield* remote(opts)
    const created = yield* client.evals.create({ payload: input }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(created)
    yield* Console.log(`created eval set ${created.name} (${created.id}, ${created.cases.length} cases)`)
  }).pipe(withHttp)

export const run = (opts: Parsed<typeof runOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const started = yield* client.evals.run({ path: { id: opts.id }, payload: { models: opts.models } }).pipe(Effect.mapError(explain(url)))
    const get = client.evals.getRun({ path: { id: opts.id, runId: started.id } }).pipe(Effect.mapError(explain(url)))
    const done = opts.wait
      ? started
      : yield* Effect.repeat(
          get,
          Schedule.recurUntil((r: EvalRunView) => r.status === "completed" || r.status === "failed").pipe(
            Schedule.addDelay(() => "250 millis")
          )
        )
    if (opts.json) return yield* printJson(done)
    yield* printRun(done)
  }).pipe(withHttp)

export const show = (opts: Parsed<typeof showOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    if (Option.isSome(opts.runId)) {
      const r = yield* client.evals.getRun({ path: { id: opts.id, runId: opts.runId.value } }).pipe(Effect.mapError(explain(url)))
      return yield* opts.json ? printJson(r) : printRun(r)
    }
    const detail = yield* client.evals.get({ path: { id: opts.id } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(detail)
    yield* Console.log(`${detail.eval.name} (${detail.eval.id}): ${detail.eval.cases.length} cases`)
    yield* Console.log(
      table(
        ["CASE", "GRADER", "PROMPT"],
        detail.eval.cases.map((c) => [c.id ?? "-", c.grader.type, c.prompt.slice(0, 60)])
      )
    )
    if (detail.runs.length > 0) {
      yield* Console.log("")
      yield* Console.log(
        table(
          ["RUN", "STATUS", "MODELS", "CREATED"],
          detail.runs.map((r) => [r.id, r.status, r.models.join(","), r.createdAt])
        )
      )
    }
  }).pipe(withHttp)
