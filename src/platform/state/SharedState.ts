import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { BoundedMap } from "../../kernel/BoundedMap.js"

/**
 * The shared-state seam: each service keeps a local read model and hands every change to a `StateChannel`, through which
 * other processes' changes arrive; the one interface a multi-process backend implements (docs/internals.md#seam-4-shared-state).
 */

/** How a channel's changes become text on a wire and back. */
export interface Codec<A> {
  readonly encode: (change: A) => string
  readonly decode: (text: string) => A
}

/** JSON: for changes made of plain data (the default). */
export const jsonCodec: Codec<any> = { encode: (a) => JSON.stringify(a), decode: (s) => JSON.parse(s) }

export interface StateChannel<A> {
  /**
   * Whether other processes can receive this channel's changes. False with the memory layer: a
   * publisher on the request path checks it before building a change, so one process pays nothing.
   */
  readonly shared: boolean
  /**
   * Hands a change this process has already applied to its own read model to every other
   * process. Synchronous, fire and forget: never blocks, never fails, never calls back into this
   * process's own `apply`. Delivery is at most once and unordered between processes.
   */
  readonly publish: (change: A) => void
}

/**
 * Counters per fixed time window, exact across processes: the one thing pub/sub cannot give.
 * A window of `windowMs` holds `now` when `floor(now / windowMs)` is its number (windows are
 * aligned to the epoch, so every process agrees on them). A Redis layer implements `add` as
 * `INCRBYFLOAT <prefix>count:<key>:<window>` plus `PEXPIREAT` past the window's end (one Lua script), `get` as `GET`.
 */
export interface WindowCounters {
  /** Adds `by` (may be negative) to `key`'s counter in the window holding `now`; answers the total after, atomically. */
  readonly add: (key: string, by: number, windowMs: number, now: number) => Effect.Effect<number>
  /** The counter's value in the window holding `now` (0 when nothing was added there). */
  readonly get: (key: string, windowMs: number, now: number) => Effect.Effect<number>
}

/** Window counters in this process's memory: at most 100,000 live counters, expired ones dropped as new ones come. */
export const makeMemoryCounters = (): WindowCounters => {
  const counters = new BoundedMap<string, { window: number; value: number }>({ maxEntries: 100_000 })
  const current = (key: string, windowMs: number, now: number) => {
    const window = Math.floor(now / windowMs)
    const c = counters.get(key)
    return c !== undefined && c.window === window ? c : { window, value: 0 }
  }
  return {
    add: (key, by, windowMs, now) =>
      Effect.sync(() => {
        const c = current(key, windowMs, now)
        const next = { window: c.window, value: c.value + by }
        counters.set(key, next)
        return next.value
      }),
    get: (key, windowMs, now) => Effect.sync(() => current(key, windowMs, now).value)
  }
}

/** One total of `SharedTotals`: its key, the level it may not reach, its value when missing, when it expires. */
export interface TotalEntry {
  readonly key: string
  /** `claim` refuses when the total has reached this (within 1e-10); `add` ignores it. */
  readonly limit: number
  /** The total when the store does not hold it yet (or lost it): this process's own view of it. */
  readonly init: number
  /** Epoch ms after which the store may forget the total (the end of its period, plus slack). */
  readonly expireAt: number
}

/** What `claim` answers: whether `by` was added, and each total before the add. */
export interface TotalsClaim {
  readonly ok: boolean
  readonly values: ReadonlyArray<number>
}

/**
 * Float totals over periods the caller names (budget windows), with an atomic check-and-add:
 * what makes budgets exact across processes (docs/scale-out.md, "Redis"). A Redis layer runs
 * each call as one Lua script.
 */
export interface SharedTotals {
  /** True when the totals are shared by several processes; the services take the exact path only then. */
  readonly exact: boolean
  /**
   * Atomically: reads every entry's total (a missing one starts at its `init`); when none has
   * reached its `limit`, adds `by` to each. `undefined` when the store is unreachable (the caller
   * falls back to its own read model).
   */
  readonly claim: (entries: ReadonlyArray<TotalEntry>, by: number) => Effect.Effect<TotalsClaim | undefined>
  /**
   * Adds `by` to each entry (a missing one is set to its `init` instead, which already holds
   * this process's view). Fire and forget; calls of one process apply in call order.
   */
  readonly add: (entries: ReadonlyArray<TotalEntry>, by: number) => void
}

/**
 * Short-lived keys with an atomic claim (`SET NX PX`): the idempotency claim that makes a
 * duplicate on another process wait for the first one's answer.
 */
export interface SharedKeys {
  /** True when the keys are shared by several processes. */
  readonly exact: boolean
  /** Sets `key` to `value` for `ttlMs` when no one holds it: true when this call did. `undefined` when the store is unreachable. */
  readonly claim: (key: string, value: string, ttlMs: number) => Effect.Effect<boolean | undefined>
  /** The value, `undefined` when missing (or the store is unreachable). */
  readonly get: (key: string) => Effect.Effect<string | undefined>
  /** Replaces the value of `key` when it is still `owner` (a claim this process made), with `ttlMs`. */
  readonly replace: (key: string, owner: string, value: string, ttlMs: number) => Effect.Effect<void>
  /** Deletes `key` when its value is still `owner`. */
  readonly release: (key: string, owner: string) => Effect.Effect<void>
}

/** Totals in one map (one process, or every node of a memory cluster). */
export const makeMemoryTotals = (exact: boolean): SharedTotals => {
  const totals = new Map<string, { value: number; expireAt: number }>()
  const read = (e: TotalEntry, now: number) => {
    const t = totals.get(e.key)
    if (t !== undefined && t.expireAt > now) return t
    const fresh = { value: e.init, expireAt: e.expireAt }
    totals.set(e.key, fresh)
    return fresh
  }
  const sweep = (now: number) => {
    if (totals.size < 10_000) return
    for (const [k, t] of totals) if (t.expireAt <= now) totals.delete(k)
  }
  return {
    exact,
    claim: (entries, by) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        sweep(now)
        const current = entries.map((e) => read(e, now))
        const values = current.map((t) => t.value)
        const ok = entries.every((e, i) => values[i]! < e.limit - 1e-10)
        if (ok) for (const t of current) t.value += by
        return { ok, values }
      }),
    add: (entries, by) => {
      // Synchronous, so without the Clock: an expired total is reset by the next `claim`.
      for (const e of entries) {
        const t = totals.get(e.key)
        if (t !== undefined) t.value += by
        else totals.set(e.key, { value: e.init, expireAt: e.expireAt })
      }
    }
  }
}

/** Keys in one map (one process, or every node of a memory cluster). */
export const makeMemoryKeys = (exact: boolean): SharedKeys => {
  const keys = new Map<string, { value: string; expireAt: number }>()
  const live = (key: string, now: number) => {
    const k = keys.get(key)
    if (k === undefined) return undefined
    if (k.expireAt > now) return k
    keys.delete(key)
    return undefined
  }
  return {
    exact,
    claim: (key, value, ttlMs) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (live(key, now) !== undefined) return false
        if (keys.size >= 10_000) for (const [k, v] of keys) if (v.expireAt <= now) keys.delete(k)
        keys.set(key, { value, expireAt: now + ttlMs })
        return true
      }),
    get: (key) => Effect.map(Clock.currentTimeMillis, (now) => live(key, now)?.value),
    replace: (key, owner, value, ttlMs) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (live(key, now)?.value === owner) keys.set(key, { value, expireAt: now + ttlMs })
      }),
    release: (key, owner) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (live(key, now)?.value === owner) keys.delete(key)
      })
  }
}

export interface SharedStateShape {
  /** Exact counters shared by every process of the gateway (rate limits). */
  readonly counters: WindowCounters
  /** Exact float totals with an atomic check-and-add (budgets). */
  readonly totals: SharedTotals
  /** Atomic short-lived claims (idempotency). */
  readonly keys: SharedKeys
  /**
   * The channel `topic`, opened once per service instance when its layer is built. `apply` is
   * called (synchronously, outside any fiber) with each change another process published on the
   * same topic, never with this process's own; it must not throw and must not publish.
   */
  readonly channel: <A>(topic: string, apply: (change: A) => void, codec?: Codec<A>) => StateChannel<A>
  /**
   * Whether the transport reaches the other processes now (Redis connected): the gauge
   * `gateway_shared_state_up`. Absent where it cannot be lost (one process, the test cluster).
   */
  readonly reachable?: () => boolean
}

const LOCAL_CHANNEL: StateChannel<never> = { shared: false, publish: () => {} }

/** One process: nothing to tell anyone. */
export const localSharedState: SharedStateShape = {
  channel: () => LOCAL_CHANNEL as StateChannel<any>,
  counters: makeMemoryCounters(),
  totals: makeMemoryTotals(false),
  keys: makeMemoryKeys(false)
}

/**
 * Gateways in one process linked as if by Redis pub/sub: what one node publishes on a topic
 * reaches every other node's `apply` for that topic (encoded and decoded on the way), at once.
 */
export interface MemoryCluster {
  /** Changes published per topic, across all nodes (what crossed the wire, encoded). */
  readonly published: ReadonlyMap<string, number>
  /** What an `apply` threw (a healthy cluster has none; a real transport would log and go on). */
  readonly errors: ReadonlyArray<unknown>
  /** A new node (one gateway process's view). */
  readonly join: () => SharedStateShape
}

export const makeMemoryCluster = (): MemoryCluster => {
  type Subscriber = { readonly node: number; readonly deliver: (text: string) => void }
  const topics = new Map<string, Array<Subscriber>>()
  const published = new Map<string, number>()
  const errors: Array<unknown> = []
  let nodes = 0
  // One counter store for the whole cluster, as one Redis would be.
  const counters = makeMemoryCounters()
  const totals = makeMemoryTotals(true)
  const keys = makeMemoryKeys(true)
  return {
    published,
    errors,
    join: () => {
      const node = ++nodes
      return {
        counters,
        totals,
        keys,
        channel: <A>(topic: string, apply: (change: A) => void, codec: Codec<A> = jsonCodec) => {
          let subscribers = topics.get(topic)
          if (subscribers === undefined) topics.set(topic, (subscribers = []))
          subscribers.push({
            node,
            deliver: (text) => {
              try {
                apply(codec.decode(text))
              } catch (e) {
                errors.push(e)
              }
            }
          })
          const all = subscribers
          return {
            shared: true,
            publish: (change: A) => {
              const text = codec.encode(change)
              published.set(topic, (published.get(topic) ?? 0) + 1)
              for (const s of all) if (s.node !== node) s.deliver(text)
            }
          }
        }
      }
    }
  }
}

/**
 * The transport of state changes between gateway processes. Services read it with
 * `SharedState.orLocal` (optional: a layer built without it is one process on its own).
 */
export class SharedState extends Context.Tag("gateway/SharedState")<SharedState, SharedStateShape>() {
  /** One process (the default): publishing is a no-op, no remote change ever arrives. */
  static readonly layer = Layer.sync(
    SharedState,
    (): SharedStateShape => ({
      channel: localSharedState.channel,
      counters: makeMemoryCounters(),
      totals: makeMemoryTotals(false),
      keys: makeMemoryKeys(false)
    })
  )

  /** A node of `cluster`, one per build of the layer (two gateways, two builds, two nodes). */
  static readonly layerCluster = (cluster: MemoryCluster) => Layer.sync(SharedState, () => cluster.join())

  /** The provided transport, or the one-process one when none is. */
  static readonly orLocal: Effect.Effect<SharedStateShape> = Effect.map(
    Effect.serviceOption(SharedState),
    Option.getOrElse(() => localSharedState)
  )
}
