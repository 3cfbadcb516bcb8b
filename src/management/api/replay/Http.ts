import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Replay } from "../../../services/shadow/Replay.js"
import { ManagementApi } from "../Api.js"

/** `POST /api/replay` starts a job (202 with its state); `GET /api/replay/{id}`: its progress and report. */
export const layer = HttpApiBuilder.group(ManagementApi, "replay", (handlers) =>
  Effect.gen(function* () {
    const replay = yield* Replay
    return handlers.handle("start", ({ payload }) => replay.start(payload)).handle("get", ({ path }) => replay.get(path.id))
  })
)
