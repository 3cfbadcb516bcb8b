import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json, ServerUrl } from "../options.js"
import { schemaOption } from "../schema.js"

export const doctorOptions = {
  json,
  noLiveness: Options.boolean("no-liveness").pipe(Options.withDescription("Skip the running-server check.")),
  host: Options.text("host").pipe(Options.withDescription("Host the server is expected on."), Options.optional),
  livenessUrl: schemaOption("liveness-url", ServerUrl).pipe(Options.withDescription("Health URL to probe (default http://<host>:<port>/api/health/ping)."), Options.optional)
}

export const doctorCommand = Command.make(
  "doctor",
  doctorOptions,
  lazy(
    () => import("./doctor.impl.js"),
    (m) => m.doctor
  )
).pipe(Command.withDescription("Check configuration, database, storage key, port, runtime, native module, memory and the running server; exit 1 when a check fails."))
