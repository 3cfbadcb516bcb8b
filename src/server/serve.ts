import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AppConfigShape } from "../platform/config/AppConfig.js"
import { live } from "./Gateway.js"
import { isClusterWorker, toPrimary } from "../platform/state/clusterIpc.js"
import { Lifecycle, RESTART_EXIT_CODE, restartMode } from "../platform/system/Lifecycle.js"
import { supervise } from "./supervise.js"

/**
 * The server command: builds the gateway, serves until a signal or an operator's stop
 * (POST /api/shutdown, /api/restart), closes it gracefully (no new connections, in-flight
 * requests finish), then exits 0, or restarts: exit 75 when supervised (GATEWAY_SUPERVISED=1)
 * or GATEWAY_RESTART_MODE=exit, else this process supervises a fresh gateway on the same port.
 *
 * A worker of `gateway --workers N` (src/server/workers.ts) hands an operator's stop to its
 * primary first, which stops (or restarts) every worker, then closes and exits 0 itself. Its
 * log lines carry `worker`.
 */
export const serve = (overrides: Partial<AppConfigShape>) => {
  const worker = isClusterWorker()
  const program = Effect.gen(function* () {
    const intent = yield* Effect.scoped(
      Effect.flatMap(Layer.build(live(overrides)), (context) =>
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
