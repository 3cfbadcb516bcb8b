/**
 * The Lua scripts the shared state runs on Redis (one round trip each, atomic): a window counter,
 * the totals' check-and-add and add, and a claimed key's compare-and-set and compare-and-delete.
 */
import type { Redis } from "ioredis"

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

/** The publisher, with the scripts defined on it. */
export type Scripted = Redis & {
  gwCount(key: string, by: string, expireAt: string): Promise<string>
  gwClaim(...args: Array<string | number>): Promise<[number, Array<string>]>
  gwAdd(...args: Array<string | number>): Promise<number>
  gwReplace(key: string, owner: string, value: string, ttlMs: string): Promise<number>
  gwRelease(key: string, owner: string): Promise<number>
}

/** Defines the scripts on the publisher (before its first command). */
export const defineScripts = (pub: Scripted): void => {
  pub.defineCommand("gwCount", { numberOfKeys: 1, lua: COUNT_LUA })
  pub.defineCommand("gwClaim", { lua: CLAIM_LUA })
  pub.defineCommand("gwAdd", { lua: ADD_LUA })
  pub.defineCommand("gwReplace", { numberOfKeys: 1, lua: REPLACE_LUA })
  pub.defineCommand("gwRelease", { numberOfKeys: 1, lua: RELEASE_LUA })
}
