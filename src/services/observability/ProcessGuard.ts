import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import { redactText } from "../../kernel/redact.js"

/**
 * The serving process outlives a bug: an exception nothing caught, or a promise rejection nothing
 * handled, is logged (through the process logger, which masks credentials) and the gateway keeps
 * serving, instead of node's default of ending the process and every request with it. Requests
 * already have their own last resort (the server answers 500); this is for callbacks outside any
 * request. Only for the server process (`gateway` / `npm start`), not for tests or CLI commands.
 */
/** Lines written to a stdout or stderr whose reader is gone are dropped (see below). */
const onStreamError = () => {}
let streamGuarded = false

export const ProcessGuard = Layer.scopedDiscard(
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const report = (what: string) => (error: unknown) => {
      try {
        Runtime.runSync(runtime)(Effect.logError(`${what}; the gateway keeps serving`, Cause.pretty(Cause.die(error))))
      } catch {
        process.stderr.write(`${what}: ${redactText(String((error as Error)?.stack ?? error))}\n`)
      }
    }
    const onException = report("uncaught exception")
    const onRejection = report("unhandled promise rejection")
    // A log sink that is gone (the reader of a piped stdout exited, a closed terminal) fails each
    // write with EPIPE, emitted as an 'error' on the stream. Unhandled, that is an uncaught
    // exception, whose report is one more write, which fails again: a busy loop that also kept
    // SIGTERM from ending the process. The stream's own listener takes those errors: lines
    // written there are lost (the log file, GATEWAY_LOG_FILE, still has them), nothing else.
    // It stays for the rest of the process: the last finalizers (the store's, after this layer's
    // scope has closed) still log ("server stopped"), and an EPIPE then would end a clean stop
    // with exit code 1.
    if (!streamGuarded) {
      streamGuarded = true
      process.stdout.on("error", onStreamError)
      process.stderr.on("error", onStreamError)
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        process.on("uncaughtException", onException)
        process.on("unhandledRejection", onRejection)
      }),
      () =>
        Effect.sync(() => {
          process.off("uncaughtException", onException)
          process.off("unhandledRejection", onRejection)
        })
    )
  })
)
