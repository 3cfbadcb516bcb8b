/**
 * Keys claimed across the gateway processes on Redis: set if absent with a TTL, read, replaced
 * and released by their owner only (by script). Undefined ("unreachable") while Redis is.
 */
import * as Effect from "effect/Effect"
import type { SharedKeys } from "./SharedState.js"
import type { RedisValuesDeps } from "./redisCounters.js"

/** The claimed keys under `<prefix>key:`. */
export const makeRedisKeys = ({ pub, prefix, up }: RedisValuesDeps): SharedKeys => {
  const claimKey = (key: string) => `${prefix}key:${key}`
  return {
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
      up()
        ? Effect.tryPromise(() => pub.gwReplace(claimKey(key), owner, value, String(Math.max(1, Math.ceil(ttlMs))))).pipe(Effect.ignore)
        : Effect.void,
    release: (key, owner) => (up() ? Effect.tryPromise(() => pub.gwRelease(claimKey(key), owner)).pipe(Effect.ignore) : Effect.void)
  }
}
