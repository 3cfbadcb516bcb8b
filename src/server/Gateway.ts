import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InferenceLive } from "../inference/InferenceLive.js"
import { McpGatewayLive } from "../inference/mcp/McpGatewayLive.js"
import { StreamTimeouts } from "../inference/StreamTimeouts.js"
import { ExtensionsLive } from "../management/ExtensionsLive.js"
import { ManagementLive } from "../management/ManagementLive.js"
import { AppConfig, type AppConfigShape } from "../platform/config/AppConfig.js"
import { EventsLive } from "../platform/events/EventsLive.js"
import { layerForProcess } from "../platform/state/clusterIpc.js"
import { SharedState } from "../platform/state/SharedState.js"
import { AccountingLive } from "../services/accounting/AccountingLive.js"
import { GovernanceLive } from "../services/governance/GovernanceLive.js"
import { InspectorLive } from "../services/inspector/InspectorLive.js"
import * as Logging from "../services/observability/Logging.js"
import { ProcessGuard } from "../services/observability/ProcessGuard.js"
import { ResilienceLive } from "../services/resilience/ResilienceLive.js"
import { RoutingLive } from "../services/routing/RoutingLive.js"
import { CoreLayer } from "./CoreLayer.js"
import { ServerLive } from "./ServerLive.js"

/**
 * The whole gateway: the core (src/server/CoreLayer.ts) and the areas the server adds, each on the
 * ones below it; every area's layer states what it reads from the others. Built bottom up and
 * closed top down: the server stops before the planes, the planes before the services they run
 * on, the store last. Needs AppConfig and StreamTimeouts; reads SharedState when it is provided
 * (else each service is this process's own).
 */
export const ServerLayer = ServerLive.pipe(
  Layer.provideMerge(ManagementLive),
  Layer.provideMerge(InferenceLive),
  Layer.provideMerge(McpGatewayLive),
  Layer.provideMerge(InspectorLive),
  Layer.provideMerge(ExtensionsLive),
  Layer.provideMerge(RoutingLive),
  Layer.provideMerge(GovernanceLive),
  Layer.provideMerge(AccountingLive),
  Layer.provideMerge(ResilienceLive),
  Layer.provideMerge(EventsLive),
  Layer.provideMerge(CoreLayer)
)

/** Shared state of this process: Redis when `REDIS_URL` is set (docs/scale-out.md, "Redis"), else this process's own. */
const sharedState = Layer.unwrapEffect(
  Effect.flatMap(AppConfig, (c) =>
    c.redisUrl === undefined
      ? Effect.succeed(SharedState.layer)
      : Effect.promise(() => import("../platform/state/redis.js")).pipe(
          Effect.map((r) => r.layerRedis(c.redisUrl!, { prefix: c.redisPrefix }))
        )
  )
)

/** The server with configuration from the environment (plus overrides) and the process logger. */
export const live = (overrides: Partial<AppConfigShape> = {}) => {
  const config = AppConfig.layer(overrides)
  return Layer.merge(ServerLayer, ProcessGuard).pipe(
    // Redis when REDIS_URL is set (loaded only then); else a worker of `gateway --workers N`
    // talks to its siblings through the primary (src/platform/state/clusterIpc.ts); else one process.
    Layer.provide(layerForProcess(sharedState)),
    Layer.provide(StreamTimeouts.layer),
    Layer.provide(Logging.layerWithFile),
    Layer.provideMerge(config)
  )
}
