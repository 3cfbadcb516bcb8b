import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import { RESTART_EXIT_CODE } from "../platform/system/Lifecycle.js"
import { startingEnv } from "../platform/system/startEnv.js"

/**
 * Runs the gateway as this process's child, with the same node options, argv and starting
 * environment (plus `extraEnv` and GATEWAY_SUPERVISED=1), stdio shared; again whenever it exits 75 (its own
 * restart). Answers its final exit status. Interrupted (SIGINT/SIGTERM to this process), it
 * passes SIGTERM on and waits for the child's graceful stop.
 */
export const supervise = (extraEnv: Record<string, string> = {}) =>
  Effect.async<number>((resume) => {
    let child: ReturnType<typeof spawn>
    const start = () => {
      child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
        env: { ...startingEnv(), ...extraEnv, GATEWAY_SUPERVISED: "1" },
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
