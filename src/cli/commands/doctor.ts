import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json, remoteOptions, ServerUrl } from "../options.js"
import { schemaOption } from "../schema.js"

export const doctorOptions = {
  json,
  noLiveness: Options.boolean("no-liveness").pipe(Options.withDescription("Skip the running-server check.")),
  host: Options.text("host").pipe(Options.withDescription("Host the server is expected on."), Options.optional),
  livenessUrl: schemaOption("liveness-url", ServerUrl).pipe(
    Options.withDescription("Health URL to probe (default http://<host>:<port>/api/health/ping)."),
    Options.optional
  ),
  clients: Options.boolean("clients").pipe(
    Options.withDescription(
      "Instead: the live compatibility matrix of the running server (docs/compat.md): the supported clients' recorded requests against its models. Shows the cost first; runs with --yes."
    )
  ),
  model: Options.text("model").pipe(
    Options.repeated,
    Options.withDescription("With --clients: a model to run against (default: the configured ones); repeat.")
  ),
  case: Options.text("case").pipe(
    Options.repeated,
    Options.withDescription("With --clients: only this case (ids from GET /api/compat); repeat.")
  ),
  budget: Options.float("budget").pipe(
    Options.withDescription("With --clients: no call starts once the run has cost this much, in USD (default 0.25)."),
    Options.optional
  ),
  yes: Options.boolean("yes").pipe(Options.withDescription("With --clients: run it (without: show what it would cost and the last run).")),
  url: remoteOptions.url,
  apiKey: remoteOptions.apiKey
}

export const doctorCommand = Command.make(
  "doctor",
  doctorOptions,
  lazy(
    () => import("./doctor.impl.js"),
    (m) => m.doctor
  )
).pipe(
  Command.withDescription(
    "Check configuration, database, storage key, port, runtime, native module, memory and the running server; exit 1 when a check fails. With --clients: the live client compatibility matrix."
  )
)
