/**
 * The shared counters and totals on Redis: a window counter (counted in this process's memory
 * while Redis is unreachable), and totals checked and added atomically (answering "unreachable"
 * while it is, so the services fall back to their own read models).
 */
import * as Effect from "effect/Effect"
import { makeMemoryCounters, type SharedTotals, type TotalEntry, type WindowCounters } from "./SharedState.js"
import type { Scripted } from "./redisScripts.js"

const noop = () => {}

export interface RedisValuesDeps {
  readonly pub: Scripted
  readonly prefix: string
  readonly up: () => boolean
}

/** Counters: in Redis while it is reachable, in this process's memory while it is not. */
export const makeRedisCounters = ({ pub, prefix, up }: RedisValuesDeps): WindowCounters => {
  const fallback = makeMemoryCounters()
  const counterKey = (key: string, window: number) => `${prefix}count:${key}:${window}`
  return {
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
}

/** Totals: check-and-add (`claim`) and add, by script; undefined (`claim`) or nothing done (`add`) while Redis is unreachable. */
export const makeRedisTotals = ({ pub, prefix, up }: RedisValuesDeps): SharedTotals => {
  const totalKey = (key: string) => `${prefix}total:${key}`
  return {
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
}
