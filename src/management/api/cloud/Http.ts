import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { CloudStore } from "../../sync/CloudStore.js"
import { ManagementApi } from "../Api.js"

/** The sync server's routes (docs/operations.md, "Cloud sync"). */
export const layer = HttpApiBuilder.group(ManagementApi, "cloud", (handlers) =>
  Effect.gen(function* () {
    const store = yield* CloudStore
    return handlers
      .handle("latest", ({ path }) => store.latest(path.space))
      .handle("put", ({ path, payload }) => store.put(path.space, payload.baseVersion, payload.ciphertext))
      .handle("versions", ({ path }) => store.versions(path.space))
  })
)
