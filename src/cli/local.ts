import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { AppConfig, type AppConfigShape } from "../config/AppConfig.js"
import { CoreLayer } from "../Gateway.js"
import * as Logging from "../observability/Logging.js"
import { gateway } from "./root.js"

/** Overrides of AppConfig from the root options (`--port`, `--host`, `--data-dir`). */
export const overridesFrom = (root: {
  readonly port: Option.Option<number>
  readonly host: Option.Option<string>
  readonly dataDir: Option.Option<string>
}): Partial<AppConfigShape> => {
  const overrides: Partial<AppConfigShape> = {}
  if (Option.isSome(root.port)) Object.assign(overrides, { port: root.port.value })
  if (Option.isSome(root.host)) Object.assign(overrides, { host: root.host.value })
  if (Option.isSome(root.dataDir)) Object.assign(overrides, { dataDir: root.dataDir.value })
  return overrides
}

/** AppConfig overrides for a subcommand: the environment, overridden by the root options. */
export const cliConfig = Effect.map(gateway, overridesFrom)

/** Logs of CLI commands go to stderr, warnings and above, so that stdout stays clean output. */
export const cliLogger = Logging.layer(
  process.env.LOG_FORMAT === "json" ? "json" : "pretty",
  Logging.levelFromEnv(LogLevel.Warning),
  { stderr: true }
)

/**
 * Runs an effect against the local database in DATA_DIR, with the same services the server
 * uses. SQLite in WAL mode lets this run while a server is up; the server sees the change
 * within a second.
 */
export const withLocalGateway = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const overrides = yield* cliConfig
    const config = AppConfig.layer(overrides)
    const layer = CoreLayer.pipe(Layer.provide(config), Layer.provideMerge(config), Layer.provide(cliLogger))
    return yield* Effect.provide(effect, layer)
  })
