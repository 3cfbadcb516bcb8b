import * as Effect from "effect/Effect"
import { McpUpstreams } from "../../src/services/mcp/McpUpstreams.js"
import { until } from "./until.js"

/** A gateway's way to run an effect that needs its MCP connections (`TestGateway.run`). */
type Run = <A>(effect: Effect.Effect<A, never, McpUpstreams>) => Promise<A>

/**
 * Waits until the gateway's connection to the MCP server `name` is ready and what it offers is
 * listed; a timeout quotes the health it had instead (its state and reason).
 */
export const mcpListed = (run: Run, name: string, ms = 20_000): Promise<true> =>
  until(
    `${name} ready and listed`,
    () =>
      run(
        Effect.map(McpUpstreams, (u) => {
          const health = u.health(name)
          return health?.state === "ready" && health.listedAt != null ? (true as const) : undefined
        })
      ),
    ms,
    () => run(Effect.map(McpUpstreams, (u) => u.health(name)))
  )
