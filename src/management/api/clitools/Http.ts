import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import { CliTools } from "../../clitools/CliTools.js"
import { ManagementApi } from "../Api.js"

/** The caller's view of this gateway: the Host it used (configured = a tool points here). */
const caller = Effect.map(HttpServerRequest.HttpServerRequest, (req) => ({ host: req.headers["host"] }))

/** `/api/cli-tools/*`: statuses, one tool's catalog entry and status, its settings (read and write). */
export const layer = HttpApiBuilder.group(ManagementApi, "cliTools", (handlers) =>
  Effect.gen(function* () {
    const tools = yield* CliTools
    return handlers
      .handle("allStatuses", () => Effect.flatMap(caller, tools.statuses))
      .handle("runtime", ({ path }) => Effect.flatMap(caller, (c) => tools.runtime(path.toolId, c)))
      .handle("settings", ({ path }) => tools.settings(path.tool))
      .handle("saveSettings", ({ path, payload }) => Effect.flatMap(caller, (c) => tools.save(path.tool, payload, c)))
  })
)
