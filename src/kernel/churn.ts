/**
 * Collections for what comes and goes at the pace of requests (answers being written, requests in
 * flight, streams watched): `SlotSet` and `IdMap`, where a `Set` or a `Map` would drag every request
 * into V8's old generation.
 *
 * V8 rebuilds a Set's or a Map's table every few dozen adds and deletes, and each table it replaces
 * keeps a pointer to its successor (for the iterators made before). Once one table has lived long
 * enough to be old, that chain, dead but only collected by the next full collection, holds every
 * later table, and every object that was a member when one was built, through each young
 * collection: they are promoted, and die in the old generation. Measured under c=32 JSON load:
 * ~10% of what the gateway allocated was promoted (a raw node proxy: 0%), and a loop that keeps 32
 * objects in flight promotes 18–22% of its allocation through one such Set or Map, 0.4% through
 * these (docs/performance.md, "Promotion: a Map on the request path"). The young collections copy
 * what they promote (5–7 ms pauses instead of ~1) and the old space fills and is collected every
 * few seconds. Neither keeps a table with a successor: `SlotSet` is an array, `IdMap` an object in
 * dictionary mode, whose replaced tables point nowhere.
 */

/**
 * A set of objects, each of which keeps its place in the set on itself (under the set's own
 * symbol); a place given up is taken by the next member. Iterates in place order; members added
 * or removed during an iteration are seen or skipped as their place falls.
 */
export class SlotSet<T extends object> implements Iterable<T> {
  private readonly place = Symbol("place")
  private readonly items: Array<T | undefined> = []
  private readonly free: Array<number> = []
  private count = 0

  get size(): number {
    return this.count
  }

  private placeOf(item: T): number | undefined {
    return (item as { [k: symbol]: number | undefined })[this.place]
  }

  has(item: T): boolean {
    const at = this.placeOf(item)
    return at !== undefined && this.items[at] === item
  }

  add(item: T): this {
    if (this.has(item)) return this
    const at = this.free.length > 0 ? this.free.pop()! : this.items.length
    this.items[at] = item
    ;(item as { [k: symbol]: number | undefined })[this.place] = at
    this.count++
    return this
  }

  delete(item: T): boolean {
    const at = this.placeOf(item)
    if (at === undefined || this.items[at] !== item) return false
    this.items[at] = undefined
    ;(item as { [k: symbol]: number | undefined })[this.place] = undefined
    this.free.push(at)
    this.count--
    return true
  }

  *[Symbol.iterator](): Iterator<T> {
    const items = this.items
    for (let i = 0; i < items.length; i++) {
      const item = items[i]
      if (item !== undefined) yield item
    }
  }
}

/** A map from string ids (request ids), held in an object in dictionary mode. Iterates in insertion order (ids that read as array indices first). */
export class IdMap<V> {
  private entries: Record<string, V> = Object.create(null)
  private count = 0

  get size(): number {
    return this.count
  }

  get(id: string): V | undefined {
    return this.entries[id]
  }

  has(id: string): boolean {
    return id in this.entries
  }

  set(id: string, value: V): this {
    if (!(id in this.entries)) this.count++
    this.entries[id] = value
    return this
  }

  delete(id: string): boolean {
    if (!(id in this.entries)) return false
    delete this.entries[id]
    this.count--
    return true
  }

  /** Forgets every id (an iteration of `values` under way goes on over what was held). */
  clear(): void {
    this.entries = Object.create(null)
    this.count = 0
  }

  keys(): Array<string> {
    return Object.keys(this.entries)
  }

  *values(): Generator<V> {
    const entries = this.entries
    for (const id in entries) yield entries[id]!
  }
}
