import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { AppConfigShape } from "../platform/config/AppConfig.js"
import { live } from "./Gateway.js"
import { isClusterWorker, toPrimary } from "../platform/state/clusterIpc.js"
import { Lifecycle, RESTART_EXIT_CODE, restartMode } from "../platform/system/Lifecycle.js"
import { supervise } from "./supervise.js"
import { buildLayer } from "../platform/system/buildLayer.js"

/**
 * The server command: build, serve until a signal or an operator's stop, close gracefully, then exit
 * or restart (docs/operations.md, "System routes"; a worker's stop: docs/scale-out.md, "Workers").
 */
export const serve = (overrides: Partial<AppConfigShape>) => {
  const worker = isClusterWorker()
  const program = Effect.gen(function* () {
    const intent = yield* Effect.scoped(
      Effect.flatMap(buildLayer(live(overrides)), (context) =>
        Effect.tap(Context.get(context, Lifecycle).stopped, (intent) =>
          worker ? Effect.sync(() => toPrimary({ gw: "stop", intent })) : Effect.void
        )
      )
    )
    if (intent === "shutdown" || worker) return yield* Effect.sync(() => process.exit(0))
    if (restartMode() === "exit") return yield* Effect.sync(() => process.exit(RESTART_EXIT_CODE))
    const code = yield* supervise()
    return yield* Effect.sync(() => process.exit(code))
  })
  return worker ? Effect.annotateLogs(program, "worker", Number(process.env.GATEWAY_WORKER_ID)) : program
}
