import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Evals } from "../../../inference/evals/Evals.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** `/api/evals*`: list and create eval sets; start a run (answered at once, `queued`) and read it until `completed`. */
export const layer = HttpApiBuilder.group(ManagementApi, "evals", (handlers) =>
  Effect.gen(function* () {
    const evals = yield* Evals
    return handlers
      .handle("list", () => Effect.map(evals.list, (list) => ({ evals: list })))
      .handle("create", ({ payload }) => Effect.flatMap(actor, (a) => evals.create(payload, a)))
      .handle("get", ({ path }) => evals.get(path.id))
      .handle("run", ({ path, payload }) => Effect.flatMap(actor, (a) => evals.startRun(path.id, payload.models, a)))
      .handle("getRun", ({ path }) => evals.getRun(path.id, path.runId))
  })
)
