import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { CloudSync } from "../../sync/CloudSync.js"
import { ManagementApi } from "../Api.js"

/** The sync client's routes (docs/operations.md, "Cloud sync"). */
export const layer = HttpApiBuilder.group(ManagementApi, "sync", (handlers) =>
  Effect.gen(function* () {
    const sync = yield* CloudSync
    return handlers
      .handle("initialize", ({ payload }) => sync.initialize(payload))
      .handle("status", () => sync.status)
      .handle("run", ({ payload }) => sync.run(payload.action, payload.force ?? false))
      .handle("disconnect", () => Effect.map(sync.disconnect, (disconnected) => ({ disconnected })))
  })
)
