import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import type { ReplayJob } from "../../domain/replay.js"
import { StartReplay } from "../../domain/replay.js"
import type { Parsed } from "../handler.js"
import { printJson } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import { decodeInput, UsageError } from "../schema.js"
import type { replayOptions } from "./replay.js"
import { print as printReport } from "./shadow.impl.js"

const progress = (j: ReplayJob) =>
  `replay ${j.id} (${j.source}): ${j.state}, ${j.calls.done}/${j.calls.total} calls (${j.calls.failed} failed), spent $${j.spentUsd.toFixed(6)} of $${j.budgetUsd}`

export const replay = (opts: Parsed<typeof replayOptions>) =>
  Effect.gen(function* () {
    const session = Option.getOrUndefined(opts.session)
    const file = Option.getOrUndefined(opts.jsonl)
    const given = [session !== undefined, opts.usageId.length > 0, file !== undefined].filter(Boolean).length
    if (given !== 1)
      return yield* new UsageError({ message: "name exactly one source: --session <id>, --usage-id <id> (repeatable) or --jsonl <file>" })
    let jsonl: string | undefined
    if (file !== undefined) {
      try {
        jsonl = fs.readFileSync(file, "utf8")
      } catch (e) {
        return yield* new UsageError({ message: `--jsonl: ${(e as Error).message}` })
      }
    }
    const source = session !== undefined ? { sessionId: session } : opts.usageId.length > 0 ? { usageIds: opts.usageId } : { jsonl }
    const judge = Option.getOrUndefined(opts.judge)
    const payload = yield* decodeInput(StartReplay, {
      models: "--model",
      concurrency: "--concurrency",
      budgetUsd: "--budget",
      judgeModel: "--judge"
    })({
      source,
      models: opts.model,
      ...Option.match(opts.concurrency, { onNone: () => ({}), onSome: (concurrency) => ({ concurrency }) }),
      ...Option.match(opts.budget, { onNone: () => ({}), onSome: (budgetUsd) => ({ budgetUsd }) }),
      ...(judge !== undefined ? { judgeModel: judge } : {})
    })
    const { url, client } = yield* remote(opts)
    let job = yield* client.replay.start({ payload }).pipe(Effect.mapError(explain(url)))
    if (!opts.json) yield* Console.error(progress(job))
    if (opts.noWait) return yield* opts.json ? printJson(job) : Console.log(job.id)
    let last = ""
    while (job.state === "running") {
      yield* Effect.sleep("500 millis")
      job = yield* client.replay.get({ path: { id: job.id } }).pipe(Effect.mapError(explain(url)))
      const line = progress(job)
      if (!opts.json && line !== last) yield* Console.error(line)
      last = line
    }
    if (opts.json) return yield* printJson(job)
    for (const n of job.notes) yield* Console.log(`  ${n}`)
    yield* Console.log(
      `compared with: ${job.baseline === "recorded" ? "the recorded answers" : job.baseline === "first-model" ? `the first model's answers (${job.models[0]})` : "the recorded answers, else the first model's"}`
    )
    yield* printReport(job.report)
  }).pipe(withHttp)
