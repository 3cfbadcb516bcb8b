import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"

const impl = () => import("./replay.impl.js")

export const replayOptions = {
  ...remoteOptions,
  session: Options.text("session").pipe(Options.withDescription("The recorded inspector session to replay (its id)."), Options.optional),
  usageId: Options.text("usage-id").pipe(
    Options.repeated,
    Options.withDescription("A request of the usage log (its request id) whose body the inspector kept; repeat.")
  ),
  jsonl: Options.file("jsonl").pipe(
    Options.withDescription("A JSONL file: a session's JSONL export, {path, body, response} lines, or Chat Completions bodies."),
    Options.optional
  ),
  model: Options.text("model").pipe(Options.repeated, Options.withDescription("A candidate model; repeat.")),
  concurrency: Options.integer("concurrency").pipe(Options.withDescription("Calls in flight at once (default 2)."), Options.optional),
  budget: Options.float("budget").pipe(
    Options.withDescription("Stop starting calls once they cost this much, in USD (default 1)."),
    Options.optional
  ),
  judge: Options.text("judge").pipe(
    Options.withDescription("A model that says which answer is better (default: the settings' shadowOptions.judgeModel)."),
    Options.optional
  ),
  noWait: Options.boolean("no-wait").pipe(
    Options.withDescription("Print the job id and return at once (read it later with GET /api/replay/{id}).")
  ),
  json
}

/** `gateway replay`: recorded requests sent again to candidate models, compared (docs/replay.md). */
export const replayCommand = Command.make(
  "replay",
  replayOptions,
  lazy(impl, (m) => m.replay)
).pipe(
  Command.withDescription(
    "Send a recorded inspector session, usage-log requests (when their bodies were kept) or a JSONL file again to candidate models, within a concurrency and a budget, and report how they compare with the recorded answers."
  )
)
