import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import type { AppConfigShape } from "../config/AppConfig.js"
import { live } from "../Gateway.js"
import { Lifecycle, RESTART_EXIT_CODE, restartMode } from "./Lifecycle.js"
import { startingEnv } from "./startEnv.js"

/**
 * Runs the gateway as this process's child, with the same node options, argv and starting
 * environment (plus GATEWAY_SUPERVISED=1), stdio shared; again whenever it exits 75 (its own
 * restart). Answers its final exit status. Interrupted (SIGINT/SIGTERM to this process), it
 * passes SIGTERM on and waits for the child's graceful stop.
 */
const supervise = Effect.async<number>((resume) => {
  let child: ReturnType<typeof spawn>
  const start = () => {
    child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
      env: { ...startingEnv(), GATEWAY_SUPERVISED: "1" },
      stdio: "inherit"
    })
    child.once("exit", (code, signal) => {
      if (code === RESTART_EXIT_CODE) start()
      else resume(Effect.succeed(code ?? (signal ? 1 : 0)))
    })
  }
  start()
  return Effect.async<void>((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done(Effect.void)
    child.once("exit", () => done(Effect.void))
    child.kill("SIGTERM")
  })
})

/**
 * The server command: builds the gateway, serves until a signal or an operator's stop
 * (POST /api/shutdown, /api/restart), closes it gracefully (no new connections, in-flight
 * requests finish), then exits 0, or restarts: exit 75 when supervised (GATEWAY_SUPERVISED=1)
 * or GATEWAY_RESTART_MODE=exit, else this process supervises a fresh gateway on the same port.
 */
export const serve = (overrides: Partial<AppConfigShape>) =>
  Effect.gen(function* () {
    const intent = yield* Effect.scoped(
      Effect.flatMap(Layer.build(live(overrides)), (context) => Context.get(context, Lifecycle).stopped)
    )
    if (intent === "shutdown") return yield* Effect.sync(() => process.exit(0))
    if (restartMode() === "exit") return yield* Effect.sync(() => process.exit(RESTART_EXIT_CODE))
    const code = yield* supervise
    return yield* Effect.sync(() => process.exit(code))
  })
