import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import { redactText } from "./redact.js"

/**
 * The serving process outlives a bug: an exception nothing caught, or a promise rejection nothing
 * handled, is logged (through the process logger, which masks credentials) and the gateway keeps
 * serving, instead of node's default of ending the process and every request with it. Requests
 * already have their own last resort (the server answers 500); this is for callbacks outside any
 * request. Only for the server process (`gateway` / `npm start`), not for tests or CLI commands.
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
