import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import { Redis, type RedisOptions } from "ioredis"
import { randomUUID } from "node:crypto"
import {
  type Codec,
  jsonCodec,
  makeMemoryCounters,
  type SharedKeys,
  SharedState,
  type SharedStateShape,
  type SharedTotals,
  type StateChannel,
  type TotalEntry,
  type WindowCounters
} from "./SharedState.js"
import { maskRedisUrl } from "./redisUrl.js"

/**
 * `SharedState` on Redis (docs/scale-out.md, "Redis"; docs/ARCHITECTURE.md, "Seam 4").
 *
 * Two connections: a publisher (commands and `PUBLISH`) and a subscriber (`PSUBSCRIBE
 * <prefix>*`). A change goes out as `<node id>|<encoded change>` on `<prefix><topic>`; a
 * process drops the messages carrying its own node id. Counters, totals and keys are Lua
 * scripts (one round trip, atomic).
 *
 * Redis down: ioredis reconnects with backoff (100 ms doubling to 2 s); meanwhile publishing
 * drops changes, counters count in this process's memory, totals and claims answer
 * "unreachable" so the services fall back to their own read models. One warning per outage,
 * one info line when it is back. The URL is logged with its password masked.
 */

export interface RedisOptionsForGateway {
  /** Prefix of every key and channel (default `gateway:`): several gateways may share one Redis. */
  readonly prefix?: string
  /** How long the layer waits for the first connection before starting degraded (default 2 s). */
  readonly connectWaitMs?: number
}

/** Counter: INCRBYFLOAT then PEXPIREAT, atomically. KEYS[1]; ARGV: by, expireAt. */
const COUNT_LUA = `local v = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return v`

/** Totals check-and-add. KEYS: totals; ARGV[1] = by, then limit, init, expireAt per key. Answers {ok, values}. */
const CLAIM_LUA = `local values = {}
local ok = 1
for i, k in ipairs(KEYS) do
  local base = 1 + (i - 1) * 3
  local v = redis.call('GET', k)
  if not v then
    v = ARGV[base + 2]
    redis.call('SET', k, v)
    redis.call('PEXPIREAT', k, ARGV[base + 3])
  end
  values[i] = v
  if tonumber(v) >= tonumber(ARGV[base + 1]) - 1e-10 then ok = 0 end
end
if ok == 1 and tonumber(ARGV[1]) ~= 0 then
  for _, k in ipairs(KEYS) do redis.call('INCRBYFLOAT', k, ARGV[1]) end
end
return {ok, values}`

/** Totals add. KEYS: totals; ARGV[1] = by, then init, expireAt per key. */
const ADD_LUA = `for i, k in ipairs(KEYS) do
  local base = 1 + (i - 1) * 2
  if redis.call('EXISTS', k) == 1 then
    redis.call('INCRBYFLOAT', k, ARGV[1])
  else
    redis.call('SET', k, ARGV[base + 1])
    redis.call('PEXPIREAT', k, ARGV[base + 2])
  end
end
return 1`

/** Compare-and-set. KEYS[1]; ARGV: owner, value, ttlMs. */
const REPLACE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`

/** Compare-and-delete. KEYS[1]; ARGV: owner. */
const RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

type Scripted = Redis & {
  gwCount(key: string, by: string, expireAt: string): Promise<string>
  gwClaim(...args: Array<string | number>): Promise<[number, Array<string>]>
  gwAdd(...args: Array<string | number>): Promise<number>
  gwReplace(key: string, owner: string, value: string, ttlMs: string): Promise<number>
  gwRelease(key: string, owner: string): Promise<number>
}

const noop = () => {}

/** A node of the Redis-backed shared state: one per build of the layer (one gateway process). */
export const layerRedis = (url: string, options: RedisOptionsForGateway = {}): Layer.Layer<SharedState> =>
  Layer.scoped(
    SharedState,
    Effect.gen(function* () {
      const runtime = yield* Effect.runtime<never>()
      const runLog = Runtime.runFork(runtime)
      const masked = maskRedisUrl(url)
      const prefix = options.prefix ?? "gateway:"
      const node = randomUUID().replace(/-/g, "").slice(0, 12)
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
      pub.defineCommand("gwCount", { numberOfKeys: 1, lua: COUNT_LUA })
      pub.defineCommand("gwClaim", { lua: CLAIM_LUA })
      pub.defineCommand("gwAdd", { lua: ADD_LUA })
      pub.defineCommand("gwReplace", { numberOfKeys: 1, lua: REPLACE_LUA })
      pub.defineCommand("gwRelease", { numberOfKeys: 1, lua: RELEASE_LUA })

      // One warning per outage (either connection), one line when both are back.
      let down = false
      const onError = (err: Error) => {
        if (down) return
        down = true
        runLog(Effect.logWarning(`shared state: Redis at ${masked} is unreachable (${err.message}); serving with this process's local state, reconnecting`))
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

      // Dispatch by topic to the registered applies; never a node's own message.
      const channelPrefix = prefix
      const handlers = new Map<string, Array<(text: string) => void>>()
      sub.on("pmessage", (_pattern: string, channel: string, message: string) => {
        if (!channel.startsWith(channelPrefix)) return
        const bar = message.indexOf("|")
        if (bar < 0 || message.slice(0, bar) === node) return
        const list = handlers.get(channel.slice(channelPrefix.length))
        if (list === undefined) return
        const text = message.slice(bar + 1)
        for (const deliver of list) deliver(text)
      })

      const subscribed = Effect.tryPromise(() => sub.psubscribe(`${channelPrefix}*`)).pipe(Effect.ignore)
      const ready = Effect.async<void>((resume) => {
        if (pub.status === "ready") return resume(Effect.void)
        const done = () => resume(Effect.void)
        pub.once("ready", done)
        return Effect.sync(() => pub.off("ready", done))
      })
      const waited = yield* Effect.all([subscribed, ready], { concurrency: 2 }).pipe(Effect.timeout(Duration.millis(options.connectWaitMs ?? 2000)), Effect.option)
      if (waited._tag === "None") onError(new Error("no connection within the start-up wait"))
      else yield* Effect.logInfo(`shared state: Redis at ${masked} (node ${node}, prefix ${prefix})`)

      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          pub.disconnect()
          sub.disconnect()
        })
      )

      const channel = <A>(topic: string, apply: (change: A) => void, codec: Codec<A> = jsonCodec): StateChannel<A> => {
        let list = handlers.get(topic)
        if (list === undefined) handlers.set(topic, (list = []))
        list.push((text) => {
          try {
            apply(codec.decode(text))
          } catch (e) {
            runLog(Effect.logWarning(`shared state: a '${topic}' change from another process could not be applied: ${e instanceof Error ? e.message : String(e)}`))
          }
        })
        const name = channelPrefix + topic
        return {
          shared: true,
          publish: (change) => {
            if (!up()) return
            let text: string
            try {
              text = codec.encode(change)
            } catch {
              return
            }
            pub.publish(name, `${node}|${text}`).catch(noop)
          }
        }
      }

      // Counters: in Redis while it is reachable, in this process's memory while it is not.
      const fallback = makeMemoryCounters()
      const counterKey = (key: string, window: number) => `${prefix}count:${key}:${window}`
      const counters: WindowCounters = {
        add: (key, by, windowMs, now) => {
          if (!up()) return fallback.add(key, by, windowMs, now)
          const window = Math.floor(now / windowMs)
          return Effect.tryPromise(() => pub.gwCount(counterKey(key, window), String(by), String((window + 1) * windowMs + 1000))).pipe(
            Effect.map(Number),
            Effect.orElse(() => fallback.add(key, by, windowMs, now))
          )
        },
        get: (key, windowMs, now) => {
          if (!up()) return fallback.get(key, windowMs, now)
          return Effect.tryPromise(() => pub.get(counterKey(key, Math.floor(now / windowMs)))).pipe(
            Effect.map((v) => (v === null ? 0 : Number(v))),
            Effect.orElse(() => fallback.get(key, windowMs, now))
          )
        }
      }

      const totalKey = (key: string) => `${prefix}total:${key}`
      const totals: SharedTotals = {
        exact: true,
        claim: (entries, by) => {
          if (!up()) return Effect.succeed(undefined)
          const args: Array<string | number> = [entries.length, ...entries.map((e) => totalKey(e.key)), String(by)]
          for (const e of entries) args.push(String(e.limit), String(e.init), String(Math.ceil(e.expireAt)))
          return Effect.tryPromise(() => pub.gwClaim(...args)).pipe(
            Effect.map(([ok, values]) => ({ ok: ok === 1, values: values.map(Number) })),
            Effect.orElseSucceed(() => undefined)
          )
        },
        add: (entries: ReadonlyArray<TotalEntry>, by: number) => {
          if (!up() || entries.length === 0) return
          const args: Array<string | number> = [entries.length, ...entries.map((e) => totalKey(e.key)), String(by)]
          for (const e of entries) args.push(String(e.init), String(Math.ceil(e.expireAt)))
          pub.gwAdd(...args).catch(noop)
        }
      }

      const claimKey = (key: string) => `${prefix}key:${key}`
      const keys: SharedKeys = {
        exact: true,
        claim: (key, value, ttlMs) =>
          up()
            ? Effect.tryPromise(() => pub.set(claimKey(key), value, "PX", Math.max(1, Math.ceil(ttlMs)), "NX")).pipe(
                Effect.map((r) => r === "OK"),
                Effect.orElseSucceed(() => undefined)
              )
            : Effect.succeed(undefined),
        get: (key) =>
          up()
            ? Effect.tryPromise(() => pub.get(claimKey(key))).pipe(
                Effect.map((v) => v ?? undefined),
                Effect.orElseSucceed(() => undefined)
              )
            : Effect.succeed(undefined),
        replace: (key, owner, value, ttlMs) =>
          up() ? Effect.tryPromise(() => pub.gwReplace(claimKey(key), owner, value, String(Math.max(1, Math.ceil(ttlMs))))).pipe(Effect.ignore) : Effect.void,
        release: (key, owner) => (up() ? Effect.tryPromise(() => pub.gwRelease(claimKey(key), owner)).pipe(Effect.ignore) : Effect.void)
      }

      // Up while both connections are: the subscriber misses the others' changes while it is down.
      const reachable = () => pub.status === "ready" && sub.status === "ready"
      return { channel, counters, totals, keys, reachable } satisfies SharedStateShape
    })
  )
