import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"

const impl = () => import("./shadow.impl.js")

export const reportOptions = {
  ...remoteOptions,
  combo: Args.text({ name: "combo" }).pipe(
    Args.withDescription("The combo (or, for the settings' shadow targets, the model id) whose pairs to report.")
  ),
  days: Options.integer("days").pipe(Options.withDescription("Only pairs of the last N days."), Options.optional),
  json
}

const report = Command.make(
  "report",
  reportOptions,
  lazy(impl, (m) => m.report)
).pipe(
  Command.withDescription(
    "How each shadow target of a combo compares with what answered: agreement, tool-call agreement, the judge's win/tie/loss, cost and latency deltas with 95% intervals, and the worst disagreements."
  )
)

/** `gateway shadow`: shadow traffic on the running server (docs/shadow.md). */
export const shadowCommand = Command.make("shadow").pipe(
  Command.withDescription("Shadow traffic: a sample of a combo's requests also sent to candidate models, compared."),
  Command.withSubcommands([report])
)
