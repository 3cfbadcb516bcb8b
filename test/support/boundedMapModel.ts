/**
 * The plain model of a BoundedMap the eviction tests compare it with: a Map whose oldest key is
 * read anew each time, entries set by delete-then-set, expiries kept in their own Map.
 */
export class Model {
  readonly map = new Map<number, number>()
  readonly expiry = new Map<number, number>()
  constructor(
    readonly max: number,
    readonly lru: boolean,
    readonly ttl: number | undefined
  ) {}
  private expired(k: number, now: number): boolean {
    if (this.ttl === undefined) return false
    const at = this.expiry.get(k)
    if (at === undefined || at > now) return false
    this.expiry.delete(k)
    this.map.delete(k)
    return true
  }
  set(k: number, v: number, now: number): void {
    this.map.delete(k)
    this.map.set(k, v)
    if (this.ttl !== undefined) {
      this.expiry.delete(k)
      this.expiry.set(k, now + this.ttl)
      for (const [key, at] of this.expiry) {
        if (at > now) break
        this.expiry.delete(key)
        this.map.delete(key)
      }
    }
    while (this.map.size > this.max) {
      const oldest = this.map.keys().next().value!
      this.map.delete(oldest)
      this.expiry.delete(oldest)
    }
  }
  get(k: number, now: number): number | undefined {
    if (this.expired(k, now)) return undefined
    const v = this.map.get(k)
    if (this.lru && this.map.has(k)) {
      this.map.delete(k)
      this.map.set(k, v!)
    }
    return v
  }
  delete(k: number): void {
    this.expiry.delete(k)
    this.map.delete(k)
  }
}
