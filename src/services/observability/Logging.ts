import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import { LogFile, logFileOf } from "./LogFile.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { redactText } from "../../kernel/redact.js"

const redactMessage = (message: unknown): unknown => {
  if (typeof message === "string") return redactText(message)
  if (Array.isArray(message)) return message.map(redactMessage)
  if (message instanceof Error) return redactText(message.message)
  return message
}

const redacting = <O>(logger: Logger.Logger<unknown, O>): Logger.Logger<unknown, O> => Logger.mapInput(logger, redactMessage)

/**
 * The process logger: pretty on a terminal, one JSON object per line with `LOG_FORMAT=json`.
 * Request handlers annotate their fiber with `requestId`, so every line of a request carries it.
 * Messages pass through `redactText` first: credentials never reach the output.
 */
export const layer = (
  format: "pretty" | "json",
  minimum: LogLevel.LogLevel = LogLevel.Info,
  options: { readonly stderr?: boolean; readonly file?: LogFile } = {}
) =>
  Layer.merge(
    // The whole logger set is replaced (not just the default logger), so that a logger added
    // by the runtime (runMain's pretty logger) cannot print every line a second time.
    Layer.locallyScoped(
      FiberRef.currentLoggers,
      HashSet.fromIterable<Logger.Logger<unknown, any>>([
        format === "json"
          ? redacting(options.stderr ? Logger.withConsoleError(Logger.jsonLogger) : Logger.withConsoleLog(Logger.jsonLogger))
          : redacting(Logger.prettyLogger({ colors: "auto", mode: "tty", stderr: options.stderr ?? false })),
        ...(options.file ? [fileLogger(options.file)] : [])
      ])
    ),
    Logger.minimumLogLevel(minimum)
  )

/** JSON lines into the log file, masked like the console. */
const fileLogger = (file: LogFile): Logger.Logger<unknown, void> => Logger.map(redacting(Logger.jsonLogger), (line) => file.push(line))

/**
 * The log file of the server: `GATEWAY_LOG_FILE` (`off` for none; default DATA_DIR/logs/gateway.log),
 * rotated past `GATEWAY_LOG_FILE_MAX_MB` (default 10) with `GATEWAY_LOG_FILE_KEEP` (default 5) older
 * files kept. Flushed every 250 ms by a background fiber and when the layer closes.
 */
/** How long a queued log line waits for the lines after it before the file is written. */
const FLUSH_AFTER_MS = 250

const logFileLayer = (dataDir: string) =>
  Effect.gen(function* () {
    const setting = yield* Config.string("GATEWAY_LOG_FILE").pipe(Config.withDefault(""))
    if (setting.trim().toLowerCase() === "off") return undefined
    const maxMb = yield* Config.number("GATEWAY_LOG_FILE_MAX_MB").pipe(Config.withDefault(10))
    const keep = yield* Config.integer("GATEWAY_LOG_FILE_KEEP").pipe(Config.withDefault(5))
    // Written FLUSH_AFTER_MS after the first line queued since the last write, rather than by a
    // fiber waking four times a second whether anything was logged or not (an idle gateway logs nothing).
    let timer: ReturnType<typeof setTimeout> | undefined
    const flush = () => {
      timer = undefined
      try {
        file.flush()
      } catch {
        // A full or read-only disk: these lines are lost, the logger goes on.
      }
    }
    const file: LogFile = new LogFile({
      file: setting.trim() || logFileOf(dataDir),
      maxBytes: Math.max(1024, Math.floor(maxMb * 1024 * 1024)),
      keep: Math.max(0, keep),
      onQueued: () => {
        timer ??= setTimeout(flush, FLUSH_AFTER_MS).unref()
      }
    })
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        clearTimeout(timer)
        flush()
      })
    )
    return file
  }).pipe(Effect.orDie)

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

/** The server's logger: `layerFromConfig` plus the rotating log file under DATA_DIR. */
export const layerWithFile = Layer.unwrapScoped(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const file = yield* logFileLayer(config.dataDir)
    return layer(config.logFormat, levelFromEnv(), file ? { file } : {})
  })
)
