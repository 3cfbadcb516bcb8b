import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import { redactText } from "../../kernel/redact.js"

/** Lines written to a stdout or stderr whose reader is gone are dropped (docs/internals.md, "Log sinks that are gone"). */
const onStreamError = () => {}
let streamGuarded = false

/**
 * The serving process outlives a bug: an uncaught exception or unhandled rejection outside any request is logged
 * (credentials masked) and the gateway keeps serving. Only for the server process, not for tests or CLI commands.
 */
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
    // EPIPE from a gone log sink would loop through the exception report; the stream's own listener takes it, and
    // stays for the process so the last finalizers can still log (docs/internals.md, "Log sinks that are gone").
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
