import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Webhooks } from "../../../services/webhooks/Webhooks.js"
import { ManagementApi } from "../Api.js"

/** `/api/webhooks*`: list (secrets masked), create, detail (full secret), update, delete, test ping. */
export const layer = HttpApiBuilder.group(ManagementApi, "webhooks", (handlers) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    return handlers
      .handle("list", () => Effect.map(webhooks.list, (list) => ({ webhooks: list })))
      .handle("create", ({ payload }) => webhooks.create(payload))
      .handle("get", ({ path }) => webhooks.get(path.id))
      .handle("update", ({ path, payload }) => webhooks.update(path.id, payload))
      .handle("remove", ({ path }) => Effect.map(webhooks.remove(path.id), (removed) => ({ removed })))
      .handle("test", ({ path }) => webhooks.test(path.id))
  })
)
