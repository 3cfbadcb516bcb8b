/**
 * Replay: recorded requests sent again to candidate models through the gateway's own routes, compared and stored as
 * shadow pairs under `replay:<id>`; job state is kept in the store so any gateway answers for it (docs/replay.md#the-job).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BadRequest, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { ReplayJob, StartReplay } from "../../domain/replay.js"
import { bindOwnRoutes, type TakesOwnRoutes } from "../../kernel/internalCall.js"
import { Settings } from "../../platform/settings/Settings.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Inspector } from "../inspector/Inspector.js"
import { makeReplayItems } from "./replayItems.js"
import { makeReplayGet, makeReplayStart, makeWithReport, type ReplayState } from "./replayJobs.js"
import { Shadow } from "./Shadow.js"

export interface ReplayShape extends TakesOwnRoutes {
  /** Reads the source, answers the job (running), and runs it in the background. */
  readonly start: (request: StartReplay) => Effect.Effect<ReplayJob, BadRequest | NotFound | ServiceUnavailable>
  readonly get: (id: string) => Effect.Effect<ReplayJob, NotFound>
}

/** Replay: a source's requests (replayItems.ts), and the jobs that send them again (replayJobs.ts). */
export class Replay extends Context.Tag("gateway/Replay")<Replay, ReplayShape>() {
  static readonly layer = Layer.scoped(
    Replay,
    Effect.gen(function* () {
      const shadow = yield* Shadow
      const inspector = yield* Inspector
      const kv = yield* KeyValue
      const sql = yield* SqlClient.SqlClient
      const settings = yield* Settings
      const scope = yield* Effect.scope
      const state: ReplayState = { own: undefined, running: new Map() }

      // The parts: a job's report, a source's requests, starting a job, reading one.
      const withReport = makeWithReport({ shadow })
      const itemsOf = makeReplayItems({ inspector, sql })
      const start = makeReplayStart({ kv, settings, shadow, scope, state, itemsOf, withReport })
      const get = makeReplayGet({ kv, state, withReport })

      return {
        start,
        get,
        setOwnRoutes: (o) => {
          state.own = o
        }
      } satisfies ReplayShape
    })
  )

  /** Gives it the gateway's own routes once the server listens. */
  static readonly ownRoutesLayer = bindOwnRoutes(Replay)
}
