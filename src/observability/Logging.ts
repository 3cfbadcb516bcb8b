import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import { AppConfig } from "../config/AppConfig.js"
import { redactText } from "./redact.js"

const redactMessage = (message: unknown): unknown => {
  if (typeof message === "string") return redactText(message)
  if (Array.isArray(message)) return message.map(redactMessage)
  if (message instanceof Error) return redactText(message.message)
  return message
}

const redacting = <O>(logger: Logger.Logger<unknown, O>): Logger.Logger<unknown, O> =>
  Logger.mapInput(logger, redactMessage)

/**
 * The process logger: pretty on a terminal, one JSON object per line with `LOG_FORMAT=json`.
 * Request handlers annotate their fiber with `requestId`, so every line of a request carries it.
 * Messages pass through `redactText` first: credentials never reach the output.
 */
export const layer = (
  format: "pretty" | "json",
  minimum: LogLevel.LogLevel = LogLevel.Info,
  options: { readonly stderr?: boolean } = {}
) =>
  Layer.merge(
    // The whole logger set is replaced (not just the default logger), so that a logger added
    // by the runtime (runMain's pretty logger) cannot print every line a second time.
    Layer.locallyScoped(
      FiberRef.currentLoggers,
      HashSet.make<[Logger.Logger<unknown, any>]>(
      format === "json"
        ? redacting(
            options.stderr ? Logger.withConsoleError(Logger.jsonLogger) : Logger.withConsoleLog(Logger.jsonLogger)
          )
        : redacting(Logger.prettyLogger({ colors: "auto", mode: "tty", stderr: options.stderr ?? false }))
      )
    ),
    Logger.minimumLogLevel(minimum)
  )

/** Reads `LOG_LEVEL` (debug, info, warning, error, none). */
export const levelFromEnv = (fallback: LogLevel.LogLevel = LogLevel.Info): LogLevel.LogLevel => {
  const level = process.env.LOG_LEVEL?.trim().toLowerCase()
  if (!level) return fallback
  return (
    LogLevel.allLevels.find((l) => l.label.toLowerCase() === level || l._tag.toLowerCase() === level) ??
    (level === "warn" ? LogLevel.Warning : fallback)
  )
}

/** Logger chosen from `AppConfig.logFormat`; `LOG_LEVEL` (debug, info, warning, error) sets the floor. */
export const layerFromConfig = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* AppConfig
    return layer(config.logFormat, levelFromEnv())
  })
)
