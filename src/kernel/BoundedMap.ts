/**
 * The gateway's one bounded map, for every cache or table whose keys come from outside: oldest first, optional LRU reads and TTL
 * (docs/internals.md, "Seam 4: shared state"). Plain synchronous code: it sits on the request path.
 */
export interface BoundedMapOptions {
  /** Most entries held; at least 1. */
  readonly maxEntries: number
  /** `insertion` (default): order of the last `set`. `lru`: reads refresh the order too. */
  readonly order?: "insertion" | "lru"
  /** Entries expire this long after their last `set`. */
  readonly ttlMs?: number
}

export class BoundedMap<K, V> implements Iterable<[K, V]> {
  readonly maxEntries: number
  readonly ttlMs: number | undefined
  private readonly lru: boolean
  private readonly map = new Map<K, V>()
  /** With `ttlMs`: when each entry expires, in order of `set` (which is the order of expiry). */
  private readonly expiry: Map<K, number> | undefined
  /**
   * The key last put at the end of `map`'s order, and of `expiry`'s (last `set`): setting it again
   * (a counter per request) updates it in place. A delete and a set would leave a deleted entry
   * in the table each time, and the table is rebuilt (allocated anew) every few of them. Only
   * trusted while the map has the key: whatever is added after it replaces it here.
   */
  private newest: K | undefined = undefined
  private newestExpiry: K | undefined = undefined
  /**
   * Where eviction reads the oldest entries: a live iterator over `map`'s keys (and one over
   * `expiry`'s), kept from one eviction to the next. A Map's first key, read anew, is found by
   * walking every deleted entry still in its table (up to a table's worth, until the table is
   * rebuilt), and a full map evicts one per `set`; a kept iterator stands past them, and new keys
   * come after it. Made again only once it ran out (the map emptied).
   */
  private oldestKeys: IterableIterator<K> | undefined = undefined
  private expiringKeys: IterableIterator<K> | undefined = undefined
  /** The key `expiringKeys` last read, not yet dropped (it was not due): the oldest in `expiry` while `hasNextExpiring`. */
  private nextExpiring: K | undefined = undefined
  private hasNextExpiring = false

  constructor(options: BoundedMapOptions) {
    this.maxEntries = Math.max(1, Math.floor(options.maxEntries))
    this.ttlMs = options.ttlMs
    this.lru = options.order === "lru"
    this.expiry = options.ttlMs === undefined ? undefined : new Map()
  }

  /** Entries held, expired ones not yet dropped included (`evictExpired` first for a live count). */
  get size(): number {
    return this.map.size
  }

  /** The value of a live entry without refreshing its place in the order. */
  peek(key: K, now?: number): V | undefined {
    if (this.expiry !== undefined && this.expired(key, now)) return undefined
    return this.map.get(key)
  }

  /** The value of a live entry; with `order: "lru"` the entry becomes the newest. */
  get(key: K, now?: number): V | undefined {
    if (this.expiry !== undefined && this.expired(key, now)) return undefined
    const value = this.map.get(key)
    if (this.lru && (value !== undefined || this.map.has(key))) this.refresh(key, value as V)
    return value
  }

  /** Whether a live entry exists (a stored `undefined` counts); with `order: "lru"` it becomes the newest. */
  has(key: K, now?: number): boolean {
    if (this.expiry !== undefined && this.expired(key, now)) return false
    if (!this.map.has(key)) return false
    if (this.lru) this.refresh(key, this.map.get(key) as V)
    return true
  }

  /** Stores the entry as the newest; evicts the oldest entries beyond `maxEntries` (and, with `ttlMs`, expired ones). */
  set(key: K, value: V, now?: number): this {
    const map = this.map
    if (key !== this.newest || !map.has(key)) {
      map.delete(key)
      this.newest = key
    }
    map.set(key, value)
    const expiry = this.expiry
    if (expiry !== undefined) {
      const t = now ?? Date.now()
      if (key !== this.newestExpiry || !expiry.has(key)) {
        this.dropExpiry(key)
        this.newestExpiry = key
      }
      expiry.set(key, t + this.ttlMs!)
      this.evictExpired(t)
    }
    while (map.size > this.maxEntries) this.evictOldest()
    return this
  }

  delete(key: K): boolean {
    this.dropExpiry(key)
    return this.map.delete(key)
  }

  clear(): void {
    this.map.clear()
    this.expiry?.clear()
    this.oldestKeys = undefined
    this.expiringKeys = undefined
    this.hasNextExpiring = false
    this.nextExpiring = undefined
  }

  /**
   * Drops expired entries from the oldest end, stopping at the first live one (with a constant
   * `ttlMs` and a clock that does not go back, the order of `set` is the order of expiry).
   * Answers how many were dropped; 0 without `ttlMs`.
   */
  evictExpired(now?: number): number {
    const expiry = this.expiry
    if (expiry === undefined) return 0
    const t = now ?? Date.now()
    let n = 0
    for (;;) {
      if (!this.hasNextExpiring) {
        this.expiringKeys ??= expiry.keys()
        const read = this.expiringKeys.next()
        if (read.done) {
          this.expiringKeys = undefined
          break
        }
        this.nextExpiring = read.value
        this.hasNextExpiring = true
      }
      const key = this.nextExpiring as K
      if (expiry.get(key)! > t) break
      this.dropExpiry(key)
      this.map.delete(key)
      n++
    }
    return n
  }

  /** Keys, oldest first (expired entries not yet dropped included). */
  keys(): IterableIterator<K> {
    return this.map.keys()
  }

  /** Values, oldest first (expired entries not yet dropped included). */
  values(): IterableIterator<V> {
    return this.map.values()
  }

  /** Entries, oldest first (expired entries not yet dropped included). */
  entries(): IterableIterator<[K, V]> {
    return this.map.entries()
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.map.entries()
  }

  private expired(key: K, now: number | undefined): boolean {
    const at = this.expiry!.get(key)
    if (at === undefined || at > (now ?? Date.now())) return false
    this.dropExpiry(key)
    this.map.delete(key)
    return true
  }

  /**
   * `key` out of `expiry`. Every removal goes through here: the key `evictExpired` read last is
   * then read again from its new place, if it is set again (a key set again moves to the end).
   */
  private dropExpiry(key: K): void {
    const expiry = this.expiry
    if (expiry === undefined) return
    if (this.hasNextExpiring && this.nextExpiring === key) {
      this.hasNextExpiring = false
      this.nextExpiring = undefined
    }
    expiry.delete(key)
  }

  /** A read in `lru` order: the entry becomes the newest (its expiry, kept in order of `set`, stays). */
  private refresh(key: K, value: V): void {
    if (key === this.newest) return
    this.map.delete(key)
    this.map.set(key, value)
    this.newest = key
  }

  private evictOldest(): void {
    let oldest = this.oldestKeys?.next()
    if (oldest === undefined || oldest.done) {
      this.oldestKeys = this.map.keys()
      oldest = this.oldestKeys.next()
      if (oldest.done) {
        this.oldestKeys = undefined
        return
      }
    }
    this.map.delete(oldest.value)
    this.dropExpiry(oldest.value)
  }
}
