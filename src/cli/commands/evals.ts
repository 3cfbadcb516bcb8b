import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Schema from "effect/Schema"
import { StartRun } from "../../domain/evals.js"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { schemaOption } from "../schema.js"

const impl = () => import("./evals.impl.js")

/** `a, b,c` → `["a", "b", "c"]`. */
const CommaList = Schema.transform(Schema.String, Schema.Array(Schema.String), {
  strict: true,
  decode: (s) =>
    s
      .split(",")
      .map((m) => m.trim())
      .filter((m) => m !== ""),
  encode: (a) => a.join(",")
})

export const listOptions = { ...remoteOptions, json }
export const createOptions = { ...remoteOptions, file: Args.file({ name: "file", exists: "yes" }), json }
export const runOptions = {
  ...remoteOptions,
  id: Args.text({ name: "id" }),
  models: schemaOption("models", Schema.compose(CommaList, StartRun.fields.models)).pipe(
    Options.withDescription("Model ids, comma-separated.")
  ),
  wait: Options.boolean("no-wait").pipe(Options.withDescription("Print the queued run and return without waiting for it.")),
  json
}
export const showOptions = {
  ...remoteOptions,
  id: Args.text({ name: "id" }),
  runId: Args.text({ name: "run-id" }).pipe(Args.optional),
  json
}

const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription("List eval sets."))
const create = Command.make(
  "create",
  createOptions,
  lazy(impl, (m) => m.create)
).pipe(Command.withDescription("Create an eval set from a JSON file ({ name, cases: [{ prompt, grader }] })."))
const run = Command.make(
  "run",
  runOptions,
  lazy(impl, (m) => m.run)
).pipe(Command.withDescription("Run an eval set against models through the gateway and print score, latency and cost per model and case."))
const show = Command.make(
  "show",
  showOptions,
  lazy(impl, (m) => m.show)
).pipe(Command.withDescription("Show an eval set and its runs, or one run's results."))

/** `gateway eval`: eval sets and runs on the running server (docs/guardrails.md, "Evals"). */
export const evalCommand = Command.make("eval").pipe(
  Command.withDescription("Eval sets: create, run against models through the gateway, show results."),
  Command.withSubcommands([list, create, run, show])
)
