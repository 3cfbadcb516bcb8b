import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import { randomUUID } from "node:crypto"
import { makeRedisChannels } from "./redisChannels.js"
import { openConnections, publisherReady, watchOutages } from "./redisConnection.js"
import { makeRedisCounters, makeRedisTotals } from "./redisCounters.js"
import { makeRedisKeys } from "./redisKeys.js"
import { maskRedisUrl } from "./redisUrl.js"
import { SharedState, type SharedStateShape } from "./SharedState.js"

/**
 * `SharedState` on Redis: a publisher and a subscriber connection, counters, totals and keys as Lua scripts; while Redis is
 * down each process serves from its own state (docs/scale-out.md#how-it-works, #redis-unreachable).
 */

export interface RedisOptionsForGateway {
  /** Prefix of every key and channel (default `gateway:`): several gateways may share one Redis. */
  readonly prefix?: string
  /** How long the layer waits for the first connection before starting degraded (default 2 s). */
  readonly connectWaitMs?: number
}

/**
 * A node of the Redis-backed shared state: one per build of the layer (one gateway process). Its
 * parts: the connections and their outages (redisConnection.ts, the scripts in redisScripts.ts),
 * the changes' channels (redisChannels.ts), the counters and totals (redisCounters.ts) and the
 * claimed keys (redisKeys.ts).
 */
export const layerRedis = (url: string, options: RedisOptionsForGateway = {}): Layer.Layer<SharedState> =>
  Layer.scoped(
    SharedState,
    Effect.gen(function* () {
      const runtime = yield* Effect.runtime<never>()
      const runLog = Runtime.runFork(runtime)
      const masked = maskRedisUrl(url)
      const prefix = options.prefix ?? "gateway:"
      const node = randomUUID().replace(/-/g, "").slice(0, 12)
      const { pub, sub } = openConnections(url)
      // One warning per outage (either connection), one line when both are back.
      const { onError, up } = watchOutages({ pub, sub, masked, runLog })
      // Dispatch by topic to the registered applies; never a node's own message.
      const { channel, subscribed } = makeRedisChannels({ pub, sub, prefix, node, up, runLog })

      const connectWait = Duration.millis(options.connectWaitMs ?? 2000)
      const waited = yield* Effect.all([subscribed, publisherReady(pub)], { concurrency: 2 }).pipe(
        Effect.timeout(connectWait),
        Effect.option
      )
      if (waited._tag === "None") onError(new Error("no connection within the start-up wait"))
      else yield* Effect.logInfo(`shared state: Redis at ${masked} (node ${node}, prefix ${prefix})`)

      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          pub.disconnect()
          sub.disconnect()
        })
      )

      const counters = makeRedisCounters({ pub, prefix, up })
      const totals = makeRedisTotals({ pub, prefix, up })
      const keys = makeRedisKeys({ pub, prefix, up })
      // Up while both connections are: the subscriber misses the others' changes while it is down.
      const reachable = () => pub.status === "ready" && sub.status === "ready"
      return { channel, counters, totals, keys, reachable } satisfies SharedStateShape
    })
  )
