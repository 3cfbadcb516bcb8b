import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AppConfig } from "../config/AppConfig.js"
import { envFilePath, envFingerprint, snapshotEnvFile } from "./envFile.js"

export type StopIntent = "shutdown" | "restart"

/** Exit status of a supervised gateway that asks its supervisor to start it again (EX_TEMPFAIL). */
export const RESTART_EXIT_CODE = 75

/** How a restart happens: `supervisor` (this process re-runs the gateway as its child) or `exit` (exit 75; a service manager starts it
 * again). */
export const restartMode = (env: NodeJS.ProcessEnv = process.env): "supervisor" | "exit" =>
  env.GATEWAY_RESTART_MODE === "exit" || env.GATEWAY_SUPERVISED === "1" ? "exit" : "supervisor"

export interface LifecycleShape {
  readonly startedAt: number
  /** Asks the serving process to stop (gracefully) or restart; false when a stop was already asked for. */
  readonly request: (intent: StopIntent) => Effect.Effect<boolean>
  /** Completes with the intent once a stop was asked for (the serving command waits on it). */
  readonly stopped: Effect.Effect<StopIntent>
  /** The env file changed since this process started (it is read only at start). */
  readonly restartRequired: Effect.Effect<boolean>
  readonly envFile: string
}

/**
 * The serving process's life: when it started, the graceful stop or restart an operator asked
 * for (POST /api/shutdown, /api/restart), and whether its env file changed since. At start it
 * snapshots the env file into DATA_DIR/env-backups (the copies env repair restores from).
 */
export class Lifecycle extends Context.Tag("gateway/Lifecycle")<Lifecycle, LifecycleShape>() {
  static readonly layer = Layer.effect(
    Lifecycle,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const envFile = envFilePath()
      const fingerprint = envFingerprint(envFile)
      yield* Effect.sync(() => snapshotEnvFile(envFile, config.dataDir)).pipe(
        Effect.catchAllDefect((e) => Effect.logWarning(`could not snapshot the env file ${envFile}: ${String(e)}`))
      )
      const stop = yield* Deferred.make<StopIntent>()
      return {
        startedAt: Date.now(),
        envFile,
        request: (intent) => Deferred.succeed(stop, intent),
        stopped: Deferred.await(stop),
        restartRequired: Effect.sync(() => envFingerprint(envFile) !== fingerprint)
      }
    })
  )
}
