/**
 * The two connections to Redis: a publisher (commands, scripts and PUBLISH; commands fail at once
 * while disconnected) and a subscriber (PSUBSCRIBE, kept across reconnects). ioredis reconnects
 * with backoff; an outage is one warning, its end one info line, the URL's password masked.
 */
import * as Effect from "effect/Effect"
import { Redis, type RedisOptions } from "ioredis"
import { defineScripts, type Scripted } from "./redisScripts.js"

/** Opens both connections (they connect at once) and defines the scripts on the publisher. */
export const openConnections = (url: string): { readonly pub: Scripted; readonly sub: Redis } => {
  const base: RedisOptions = {
    // Reconnect forever: 100 ms, doubling, at most 2 s apart.
    retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times - 1, 5), 2000),
    connectTimeout: 2000,
    lazyConnect: false
  }
  // Commands fail at once while disconnected (no queue): the request path never waits for Redis.
  const pub = new Redis(url, { ...base, enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 1000 }) as Scripted
  // The subscriber keeps its PSUBSCRIBE queued until connected and re-subscribes after a reconnect.
  const sub = new Redis(url, { ...base, maxRetriesPerRequest: null, autoResubscribe: true })
  defineScripts(pub)
  return { pub, sub }
}

export interface OutagesDeps {
  readonly pub: Scripted
  readonly sub: Redis
  /** The URL with its password masked. */
  readonly masked: string
  readonly runLog: (effect: Effect.Effect<void>) => unknown
}

/** Watches both connections: `onError` (the first error of an outage warns), and `up` (the publisher is ready). */
export const watchOutages = ({ pub, sub, masked, runLog }: OutagesDeps) => {
  let down = false
  const onError = (err: Error) => {
    if (down) return
    down = true
    runLog(
      Effect.logWarning(
        `shared state: Redis at ${masked} is unreachable (${err.message}); serving with this process's local state, reconnecting`
      )
    )
  }
  const onReady = () => {
    if (!down || pub.status !== "ready" || sub.status !== "ready") return
    down = false
    runLog(Effect.logInfo(`shared state: Redis at ${masked} is reachable again`))
  }
  for (const c of [pub, sub]) {
    c.on("error", onError)
    c.on("ready", onReady)
  }
  const up = () => pub.status === "ready"
  return { onError, up }
}

/** Succeeds once the publisher is ready. */
export const publisherReady = (pub: Scripted) =>
  Effect.async<void>((resume) => {
    if (pub.status === "ready") return resume(Effect.void)
    const done = () => resume(Effect.void)
    pub.once("ready", done)
    return Effect.sync(() => pub.off("ready", done))
  })
