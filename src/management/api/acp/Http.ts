import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { AcpAgents } from "../../clitools/AcpAgents.js"
import { ManagementApi } from "../Api.js"

/** `/api/acp/agents`: list (detection cached), add a custom agent or refresh detection, delete a custom one. */
export const layer = HttpApiBuilder.group(ManagementApi, "acp", (handlers) =>
  Effect.gen(function* () {
    const agents = yield* AcpAgents
    return handlers
      .handle("list", () => agents.list)
      .handle("change", ({ payload }) => ("refresh" in payload ? agents.refresh : agents.add(payload)))
      .handle("remove", ({ urlParams }) => agents.remove(urlParams.id))
  })
)
