import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import { BadRequest } from "../../domain/errors.js"
import { CreateEvalSet, type EvalRunView } from "../../domain/evals.js"
import { decodeOrBadRequest } from "../../domain/parse.js"
import { printJson, table } from "../output.js"
import { explain, remote, remoteOptions } from "../remote.js"

/** `gateway eval`: eval sets and runs on the running server (docs/guardrails.md, "Evals"). */
const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))

const usd = (n: number) => `$${n.toFixed(6)}`

const printRun = (run: EvalRunView) =>
  Effect.gen(function* () {
    yield* Console.log(`run ${run.id} of ${run.evalId}: ${run.status}${run.error ? ` (${run.error})` : ""}`)
    if (!run.results) return
    yield* Console.log(table(["MODEL", "SCORE", "PASSED", "MEAN LATENCY", "COST"], run.results.map((r) => [r.model, r.score.toFixed(3), `${r.passed}/${r.total}`, `${r.meanLatencyMs} ms`, usd(r.costUsd)])))
    yield* Console.log("")
    yield* Console.log(
      table(
        ["MODEL", "CASE", "SCORE", "LATENCY", "COST", "REASON"],
        run.results.flatMap((r) => r.cases.map((c) => [r.model, c.caseId, c.score.toFixed(2), `${c.latencyMs} ms`, usd(c.costUsd), c.reason ?? "-"]))
      )
    )
  })

const list = Command.make("list", { ...remoteOptions, json }, (opts) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const { evals } = yield* client.evals.list().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson({ evals })
    if (evals.length === 0) return yield* Console.log("no eval sets yet: create one with `gateway eval create <file.json>`")
    yield* Console.log(table(["ID", "NAME", "CASES", "CREATED"], evals.map((e) => [e.id, e.name, String(e.cases.length), e.createdAt])))
  }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("List eval sets."))

const create = Command.make("create", { ...remoteOptions, file: Args.file({ name: "file", exists: "yes" }), json }, (opts) =>
  Effect.gen(function* () {
    const raw = yield* Effect.try({ try: () => JSON.parse(fs.readFileSync(opts.file, "utf8")) as unknown, catch: (e) => new BadRequest({ message: `${opts.file} is not valid JSON: ${(e as Error).message}` }) })
    const input = yield* decodeOrBadRequest(CreateEvalSet)(raw)
    const { url, client } = yield* remote(opts)
    const created = yield* client.evals.create({ payload: input }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(created)
    yield* Console.log(`created eval set ${created.name} (${created.id}, ${created.cases.length} cases)`)
  }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("Create an eval set from a JSON file ({ name, cases: [{ prompt, grader }] })."))

const run = Command.make(
  "run",
  {
    ...remoteOptions,
    id: Args.text({ name: "id" }),
    models: Options.text("models").pipe(Options.withDescription("Model ids, comma-separated.")),
    wait: Options.boolean("no-wait").pipe(Options.withDescription("Print the queued run and return without waiting for it.")),
    json
  },
  (opts) =>
    Effect.gen(function* () {
      const models = opts.models.split(",").map((m) => m.trim()).filter((m) => m !== "")
      const { url, client } = yield* remote(opts)
      const started = yield* client.evals.run({ path: { id: opts.id }, payload: { models } }).pipe(Effect.mapError(explain(url)))
      const get = client.evals.getRun({ path: { id: opts.id, runId: started.id } }).pipe(Effect.mapError(explain(url)))
      const poll: Effect.Effect<EvalRunView, BadRequest> = Effect.flatMap(get, (r) =>
        r.status === "completed" || r.status === "failed" ? Effect.succeed(r) : Effect.zipRight(Effect.sleep("250 millis"), Effect.suspend(() => poll))
      )
      const done = opts.wait ? started : yield* poll
      if (opts.json) return yield* printJson(done)
      yield* printRun(done)
    }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("Run an eval set against models through the gateway and print score, latency and cost per model and case."))

const show = Command.make("show", { ...remoteOptions, id: Args.text({ name: "id" }), runId: Args.text({ name: "run-id" }).pipe(Args.optional), json }, (opts) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    if (Option.isSome(opts.runId)) {
      const r = yield* client.evals.getRun({ path: { id: opts.id, runId: opts.runId.value } }).pipe(Effect.mapError(explain(url)))
      return yield* opts.json ? printJson(r) : printRun(r)
    }
    const detail = yield* client.evals.get({ path: { id: opts.id } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(detail)
    yield* Console.log(`${detail.eval.name} (${detail.eval.id}): ${detail.eval.cases.length} cases`)
    yield* Console.log(table(["CASE", "GRADER", "PROMPT"], detail.eval.cases.map((c) => [c.id ?? "-", c.grader.type, c.prompt.slice(0, 60)])))
    if (detail.runs.length > 0) {
      yield* Console.log("")
      yield* Console.log(table(["RUN", "STATUS", "MODELS", "CREATED"], detail.runs.map((r) => [r.id, r.status, r.models.join(","), r.createdAt])))
    }
  }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("Show an eval set and its runs, or one run's results."))

export const evalCommand = Command.make("eval").pipe(Command.withDescription("Eval sets: create, run against models through the gateway, show results."), Command.withSubcommands([list, create, run, show]))
