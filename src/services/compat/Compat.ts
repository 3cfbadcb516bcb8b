/**
 * The live compatibility matrix: the supported clients' recorded requests replayed against configured models through
 * the gateway's own routes, costed before the run and stopped at its budget; the last run is kept (docs/compat.md).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { CompatExchange, CompatMatrix, CompatRun } from "../../domain/compat.js"
import type { BadRequest, Conflict, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import { bindOwnRoutes, type TakesOwnRoutes } from "../../kernel/internalCall.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { Accounting } from "../accounting/Accounting.js"
import { Pricing } from "../accounting/Pricing.js"
import { loadCases } from "./compatCases.js"
import { makeCompatMatrix } from "./compatMatrix.js"
import { type CompatState, makeCompatExchange, makeCompatRun, makeLastRun } from "./compatRun.js"

export interface CompatShape extends TakesOwnRoutes {
  /** The matrix for `models` (default: the last run's, else the configured ones): the cases, the estimate, the last run's cells. */
  readonly matrix: (models?: ReadonlyArray<string>) => Effect.Effect<CompatMatrix, BadRequest>
  /** Starts a run of the cases against the models within the budget, in the background; answers the matrix with the run `running`. */
  readonly run: (request: CompatRun) => Effect.Effect<CompatMatrix, BadRequest | Conflict | ServiceUnavailable>
  readonly exchange: (id: string) => Effect.Effect<CompatExchange, NotFound>
}

/**
 * The compatibility matrix: the recorded cases (compatCases.ts), the matrix and its estimate
 * (compatMatrix.ts), and a run with its exchanges (compatRun.ts).
 */
export class Compat extends Context.Tag("gateway/Compat")<Compat, CompatShape>() {
  static readonly layer = Layer.scoped(
    Compat,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const scope = yield* Effect.scope
      const connections = yield* Connections
      const accounting = yield* Accounting
      const pricing = yield* Pricing
      const state: CompatState = { own: undefined, current: undefined }
      const cases = Effect.promise(loadCases)

      // The parts: the last run, the matrix, a run, an exchange.
      const lastRun = makeLastRun({ kv, state })
      const { matrix, matrixFor, modelsOr } = makeCompatMatrix({ connections, accounting, pricing, cases, lastRun })
      const run = makeCompatRun({ kv, scope, state, cases, lastRun, modelsOr, matrixFor })
      const exchange = makeCompatExchange({ kv, cases })

      return {
        matrix,
        run,
        exchange,
        setOwnRoutes: (o) => {
          state.own = o
        }
      } satisfies CompatShape
    })
  )

  /** Gives it the gateway's own routes once the server listens. */
  static readonly ownRoutesLayer = bindOwnRoutes(Compat)
}
