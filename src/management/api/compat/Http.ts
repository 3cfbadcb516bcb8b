import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Compat } from "../../../services/compat/Compat.js"
import { ManagementApi } from "../Api.js"

/** `GET /api/compat[?models=a,b]`: the plan, its cost and the last run; `POST /api/compat/run` (202: the run goes on in the background);
 * `GET /api/compat/exchanges/{id}`. */
export const layer = HttpApiBuilder.group(ManagementApi, "compat", (handlers) =>
  Effect.gen(function* () {
    const compat = yield* Compat
    return handlers
      .handle("matrix", ({ urlParams }) =>
        compat.matrix(
          urlParams.models
            ?.split(",")
            .map((m) => m.trim())
            .filter((m) => m !== "")
        )
      )
      .handle("run", ({ payload }) => compat.run(payload))
      .handle("exchange", ({ path }) => compat.exchange(path.id))
  })
)
