/**
 * The opt-in quota refresh and cloud sync of GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS, read at every
 * round (docs/operations.md, "Background tasks").
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { backgroundJob } from "../platform/flags/background.js"
import { Quotas } from "../inference/quotas/Quotas.js"
import { CloudSync } from "../management/sync/CloudSync.js"
import { periodic } from "../platform/system/periodic.js"

const TasksConfig = Config.all({
  quotaSeconds: Config.number("GATEWAY_QUOTA_REFRESH_INTERVAL_SECONDS").pipe(Config.withDefault(300)),
  syncSeconds: Config.number("GATEWAY_CLOUD_SYNC_INTERVAL_SECONDS").pipe(Config.withDefault(900))
})

export const RuntimeTasks = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* TasksConfig.pipe(Effect.orDie)
    if (config.quotaSeconds <= 0 && config.syncSeconds <= 0) return
    if (!(yield* backgroundJob("runtime background tasks"))) return
    const flags = yield* FeatureFlags
    const quotas = yield* Quotas
    const cloud = yield* CloudSync
    const enabled = flags.enabled("GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS")

    const quotaRound = Effect.gen(function* () {
      if (!(yield* enabled)) return
      const n = yield* quotas.refresh(config.quotaSeconds * 2000)
      yield* Effect.logDebug(`quota refresh: ${n} connections asked`)
    })

    const syncRound = Effect.gen(function* () {
      if (!(yield* enabled)) return
      if (!(yield* cloud.status).configured) return
      yield* cloud.run("sync", false).pipe(
        Effect.tap((r) => Effect.logInfo(`cloud sync (scheduled): ${r.result}`)),
        Effect.catchTags({
          SyncConflict: (e) =>
            Effect.logWarning(`cloud sync (scheduled): conflict left for an operator (GET /api/sync/cloud lastConflict): ${e.message}`),
          BadRequest: (e) => Effect.logWarning(`cloud sync (scheduled): ${e.message}`),
          SyncServerError: (e) => Effect.logWarning(`cloud sync (scheduled): ${e.message}`)
        })
      )
    })

    if (config.quotaSeconds > 0) yield* periodic("quota refresh", config.quotaSeconds, quotaRound, { immediately: true })
    if (config.syncSeconds > 0) yield* periodic("cloud sync", config.syncSeconds, syncRound)
  })
)
