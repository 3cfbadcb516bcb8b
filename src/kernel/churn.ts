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
 * few seconds. Neither keeps a table with a successor: `SlotSet` is an array, `IdMap` two arrays
 * and a typed array, whose replaced copies point nowhere.
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

/** An empty slot of `IdMap`'s index; a deleted one is `GONE`, a held one its entry's place + 1. */
const EMPTY = 0
const GONE = -1

/**
 * A map from string ids (request ids), iterated in insertion order. The entries sit in two arrays
 * in the order they came (deleted ones leave a hole, closed up once holes are half of them), found
 * through an open-addressing index of their places hashed by id (FNV-1a of the characters, linear
 * probing): the ids are only compared, never used as property names.
 *
 * An object in dictionary mode (what this was) makes every id a property name, which V8 interns:
 * each new id is copied into the old generation and entered in the isolate's string table, an
 * off-heap hash table that keeps dead names until a full collection and never shrinks. Two ids a
 * request at 7,000 requests a second grew it by an 8 MB and then a 16 MB block within minutes of
 * a soak; a million unique ids, 32 held at a time, grow a process's RSS by 22–23 MB through a
 * dictionary object and 3–4 MB through this (test/churn.test.ts; docs/performance.md,
 * "2026-11-30: interned request ids").
 */
export class IdMap<V> {
  private ids: Array<string | undefined> = []
  private vals: Array<V | undefined> = []
  /** Where the first entry still held may be (the places before it are holes). */
  private first = 0
  private count = 0
  /** Each slot EMPTY, GONE or a place + 1; its length a power of two, at most half of it EMPTY-less. */
  private index = new Int32Array(16)
  /** Slots that are not EMPTY (held and GONE). */
  private taken = 0

  get size(): number {
    return this.count
  }

  /** The slot holding `id` (whose hash is `hash`), or -1. */
  private slotOf(id: string, hash: number = hashId(id)): number {
    const index = this.index
    const mask = index.length - 1
    for (let i = hash & mask; ; i = (i + 1) & mask) {
      const at = index[i]!
      if (at === EMPTY) return -1
      if (at !== GONE && this.ids[at - 1] === id) return i
    }
  }

  get(id: string): V | undefined {
    const slot = this.slotOf(id)
    return slot === -1 ? undefined : this.vals[this.index[slot]! - 1]
  }

  has(id: string): boolean {
    return this.slotOf(id) !== -1
  }

  set(id: string, value: V): this {
    const hash = hashId(id)
    const slot = this.slotOf(id, hash)
    if (slot !== -1) {
      this.vals[this.index[slot]! - 1] = value
      return this
    }
    const place = this.ids.length
    this.ids.push(id)
    this.vals.push(value)
    this.count++
    this.place(hash, place)
    return this
  }

  delete(id: string): boolean {
    const slot = this.slotOf(id)
    if (slot === -1) return false
    const place = this.index[slot]! - 1
    this.index[slot] = GONE
    this.ids[place] = undefined
    this.vals[place] = undefined
    this.count--
    const ids = this.ids
    while (this.first < ids.length && ids[this.first] === undefined) this.first++
    if (this.count === 0) this.empty()
    else if (ids.length >= 64 && this.count * 2 < ids.length) this.compact()
    return true
  }

  /** Forgets every id (an iteration of `values` under way ends: it finds none of them). */
  clear(): void {
    this.reset(16)
  }

  keys(): Array<string> {
    const out: Array<string> = []
    const ids = this.ids
    for (let i = this.first; i < ids.length; i++) {
      const id = ids[i]
      if (id !== undefined) out.push(id)
    }
    return out
  }

  /** The values in insertion order; entries deleted meanwhile are skipped, entries set meanwhile may be seen. */
  *values(): Generator<V> {
    // The arrays an iteration started on. While they are the map's, a place is an entry or a hole;
    // a compaction or a clear makes new ones, and the entries are then looked up again by id.
    const ids = this.ids
    for (let i = this.first; i < ids.length; i++) {
      const id = ids[i]
      if (id === undefined) continue
      if (this.ids === ids) yield this.vals[i]!
      else {
        const slot = this.slotOf(id)
        if (slot !== -1) yield this.vals[this.index[slot]! - 1]!
      }
    }
  }

  /**
   * Enters `place` (of an id hashed `hash`, just added to the arrays) in the index; when that would
   * leave it over half taken, the index is rebuilt instead (grown, or cleaned of GONE slots), which
   * enters every place the arrays hold, this one included.
   */
  private place(hash: number, place: number): void {
    if ((this.taken + 1) * 2 > this.index.length) {
      this.rebuild(this.count * 4 > this.index.length ? this.index.length * 2 : this.index.length)
      return
    }
    const index = this.index
    const mask = index.length - 1
    let i = hash & mask
    while (index[i] !== EMPTY && index[i] !== GONE) i = (i + 1) & mask
    if (index[i] === EMPTY) this.taken++
    index[i] = place + 1
  }

  /** An index of `size` slots for the entries held (no GONE left): the same one cleared, or a new one. */
  private rebuild(size: number): void {
    const index = size === this.index.length ? this.index.fill(EMPTY) : new Int32Array(size)
    const mask = size - 1
    const ids = this.ids
    for (let p = this.first; p < ids.length; p++) {
      const id = ids[p]
      if (id === undefined) continue
      let i = hashId(id) & mask
      while (index[i] !== EMPTY) i = (i + 1) & mask
      index[i] = p + 1
    }
    this.index = index
    this.taken = this.count
  }

  /** Closes the holes: new arrays of the entries held, in their order, and an index of their new places. */
  private compact(): void {
    const ids: Array<string | undefined> = []
    const vals: Array<V | undefined> = []
    for (let p = this.first; p < this.ids.length; p++) {
      const id = this.ids[p]
      if (id === undefined) continue
      ids.push(id)
      vals.push(this.vals[p])
    }
    this.ids = ids
    this.vals = vals
    this.first = 0
    // The index keeps its size unless it is four times what the entries need.
    let size = 16
    while (this.count * 4 > size) size *= 2
    this.rebuild(this.index.length > size * 4 ? size : this.index.length)
  }

  /** Nothing held any more (the last one deleted): the index cleared, the arrays emptied in place. */
  private empty(): void {
    this.ids.length = 0
    this.vals.length = 0
    this.first = 0
    if (this.taken > 0) this.index.fill(EMPTY)
    this.taken = 0
  }

  private reset(size: number): void {
    this.ids = []
    this.vals = []
    this.first = 0
    this.count = 0
    this.index = new Int32Array(size)
    this.taken = 0
  }
}

/** FNV-1a of the id's UTF-16 code units (as int32). */
const hashId = (id: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193)
  return h ^ (h >>> 16)
}
