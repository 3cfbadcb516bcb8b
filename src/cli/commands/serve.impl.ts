import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import cluster from "node:cluster"
import type { Parsed } from "../handler.js"
import { overridesFrom } from "../overrides.js"
import type { rootOptions } from "../root.js"
import { UsageError } from "../usageError.js"

/**
 * `gateway` with no subcommand: the server (`--mcp`: the MCP server over stdio, docs/mcp.md;
 * `--workers N`: N server processes on one port, docs/scale-out.md "Workers"). Each path loads
 * only what it runs: the primary of `--workers` loads no gateway services.
 */
export const serve = (root: Parsed<typeof rootOptions>) =>
  Effect.gen(function* () {
    const workers = Option.isSome(root.workers) ? yield* workersOf(root.workers.value, root.mcp) : 1
    if (root.mcp) {
      const { serveStdio } = yield* Effect.promise(() => import("../mcpStdio.js"))
      return yield* serveStdio(overridesFrom(root))
    }
    if (workers > 1 && cluster.isPrimary) {
      const { servePrimary } = yield* Effect.promise(() => import("../../server/workers.js"))
      return yield* servePrimary(workers, overridesFrom(root))
    }
    const { serve: serveGateway } = yield* Effect.promise(() => import("../../server/serve.js"))
    // A worker started after another one listened takes that port (its primary says which).
    const pinned = cluster.isWorker ? Number(process.env.GATEWAY_WORKER_PORT) : Number.NaN
    const served = serveGateway(Number.isInteger(pinned) && pinned > 0 ? { ...overridesFrom(root), port: pinned } : overridesFrom(root))
    // A worker that cannot serve lets go of its primary's channel, or the open channel would keep it running.
    return yield* cluster.isWorker
      ? Effect.tapErrorCause(served, () => Effect.sync(() => process.connected && process.disconnect()))
      : served
  })

const workersOf = (text: string, mcp: boolean) =>
  Effect.flatMap(
    Effect.promise(() => import("../../server/workers.js")),
    ({ parseWorkers, standbyWanted }) => {
      const n = parseWorkers(text)
      if (n instanceof Error) return Effect.fail(new UsageError({ message: n.message }))
      if (mcp && n > 1) return Effect.fail(new UsageError({ message: "--workers: the MCP server over stdio (--mcp) is one process" }))
      const standby = n > 1 ? standbyWanted() : true
      if (standby instanceof Error) return Effect.fail(new UsageError({ message: standby.message }))
      return Effect.succeed(n)
    }
  )
