import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Policies } from "../../../services/governance/Policies.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** `/api/policies*`: list the current versions, create the next version of a name, show a name's history, delete. */
export const layer = HttpApiBuilder.group(ManagementApi, "policies", (handlers) =>
  Effect.gen(function* () {
    const policies = yield* Policies
    return handlers
      .handle("list", () => Effect.all({ policies: policies.list, toolPolicyMode: policies.toolPolicyMode }))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => policies.create(payload, a)))
      .handle("get", ({ path }) => policies.get(path.id))
      .handle("remove", ({ path }) => Effect.flatMap(actor, (a) => Effect.map(policies.remove(path.id, a), (removed) => ({ removed }))))
  })
)
