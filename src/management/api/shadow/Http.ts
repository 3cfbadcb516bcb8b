import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Shadow } from "../../../services/shadow/Shadow.js"
import { ManagementApi } from "../Api.js"

/** `/api/shadow/report?combo=<name>[&days=N]`: the pairs of the combo's shadow targets, compared. */
export const layer = HttpApiBuilder.group(ManagementApi, "shadow", (handlers) =>
  Effect.gen(function* () {
    const shadow = yield* Shadow
    return handlers.handle("report", ({ urlParams }) => shadow.report(urlParams.combo, urlParams.days))
  })
)
