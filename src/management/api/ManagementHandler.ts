import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import type * as http from "node:http"
import type * as ManagementApp from "./ManagementApp.js"

export type NodeHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void

/** What the management plane's handler reads (the services of every management area, a scope). */
type AppContext = Effect.Effect.Context<typeof ManagementApp.build>

/**
 * The management plane (an HttpApi, ./ManagementApp.ts) as a node:http handler, loaded and built
 * on the first management request rather than at start: its modules and its router (every
 * endpoint of every group) are about a tenth of the server's start, and an inference request
 * never uses them. That first request, and any arriving while it is built, wait for it; its
 * layers are released with this one (the server's scope). Should the build fail, the request
 * gets a 500 and the next one builds again.
 */
export class ManagementHandler extends Context.Tag("gateway/ManagementHandler")<ManagementHandler, NodeHandler>() {
  static readonly layer = Layer.scoped(
    ManagementHandler,
    Effect.gen(function* () {
      // Its own scope, taken now: the plane is released where it was when it was built at start
      // (after the server closes), whenever its first request comes.
      const scope = yield* Scope.fork(yield* Scope.Scope, ExecutionStrategy.sequential)
      const run = Runtime.runPromiseExit(yield* Effect.runtime<AppContext>())
      const load = Effect.flatMap(
        Effect.promise(() => import("./ManagementApp.js")),
        (app) => Scope.extend(app.build, scope)
      )
      let built: NodeHandler | undefined
      let building: Promise<Exit.Exit<NodeHandler, unknown>> | undefined
      const handler: NodeHandler = (req, res) => {
        if (built !== undefined) return built(req, res)
        building ??= run(load)
        void building.then((exit) => {
          if (Exit.isSuccess(exit)) {
            built = exit.value
            return built(req, res)
          }
          building = undefined
          void run(Effect.logError("management plane: building it failed", Cause.pretty(exit.cause)))
          if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" })
          res.end(JSON.stringify({ _tag: "InternalError", message: "internal error: the management plane could not be built" }))
        })
      }
      return handler
    })
  )
}
