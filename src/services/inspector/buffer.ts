/**
 * The inspector's in-memory ring of entries, shared by every capture source, the live feed, recording sessions and replay; plain
 * code, the service is Inspector.ts. Bounded memory and masking: docs/inspector.md#limits-and-memory, docs/inspector.md#secrets.
 */
import * as crypto from "node:crypto"
import { IdMap } from "../../kernel/churn.js"
import type { FormatId, Usage } from "../../domain/canonical.js"
import { makeEntryBuilder, type OwnRequest, Slot, conversationSize, sizeOf } from "./bufferEntry.js"
import {
  type FeedEvent,
  InspectorError,
  type ListFilter,
  type RecordingSession,
  type Replayer,
  replayPath,
  type SessionView,
  type ShareOut,
  select,
  summaryOf
} from "./bufferViews.js"
import { toHar } from "./har.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"
import type { CaptureEnd, CaptureStart, CapturedBody, InspectorSink, InterceptedRequest } from "./types.js"

export interface MakeInspectorDeps {
  readonly config: InspectorConfigShape
  /** The gateway's pricing: USD of tokens of `model` at `provider`. */
  readonly costOf?: (provider: string, model: string, usage: Partial<Usage>) => number | undefined
  /** Process attribution (capture/process.ts); null when unknown. */
  readonly attribute?: (clientPort: number) => Promise<{ readonly pid: number; readonly name: string } | null>
  /** Total bytes of bodies kept (INSPECTOR_MAX_TOTAL_MB). */
  readonly maxTotalBytes?: number
}

export const makeInspector = (deps: MakeInspectorDeps) => {
  const config = deps.config
  const maxBytes = config.maxBodyKb * 1024
  const maxTotal = deps.maxTotalBytes ?? 256 * 1024 * 1024
  /**
   * The slots by entry id, oldest first. An entry comes and goes with every request: an `IdMap`, where
   * a Map's replaced tables would hold every slot until the next full collection (src/kernel/churn.ts).
   */
  const slots = new IdMap<Slot>()
  /**
   * Slots by their gateway request id, built when first asked for after the slots changed (a
   * shadow replay's lookup, a replay's answer) rather than kept up to date with a Map set and
   * delete per request; the newest slot of a request id wins.
   */
  let byRequestId: Map<string, Slot> | undefined
  const slotOfRequest = (requestId: string): Slot | undefined => {
    if (byRequestId === undefined) {
      byRequestId = new Map()
      for (const s of slots.values()) if (s.requestId) byRequestId.set(s.requestId, s)
    }
    return byRequestId.get(requestId)
  }
  const subscribers = new Set<(e: FeedEvent) => void>()
  const recording = new Map<string, RecordingSession>()
  /** Replays under way: the gateway request id → the entry replayed. */
  const pendingReplays = new Map<string, string>()
  let seq = 0
  let totalBytes = 0
  /** Ids of entries holding bodies, oldest first (a body budget's eviction order). */
  const withBodies: Array<string> = []
  let replayer: Replayer | undefined
  /** The other processes of this node (share.ts): where this one's changes go. */
  let outbox: ((m: ShareOut) => void) | undefined
  /** Other processes where someone looks: process → until when (ms). */
  const remoteWatchers = new Map<string, number>()

  const remoteWatching = (): boolean => {
    const now = Date.now()
    for (const [who, until] of remoteWatchers) {
      if (until > now) return true
      remoteWatchers.delete(who)
    }
    return false
  }
  const wantsBodies = () =>
    config.captureBodies || subscribers.size > 0 || recording.size > 0 || (remoteWatchers.size > 0 && remoteWatching())
  /** Someone looks somewhere in the node (a feed client here or elsewhere) or a session records: entries go to the others as they change.
   * */
  const watchedAnywhere = () => subscribers.size > 0 || recording.size > 0 || (remoteWatchers.size > 0 && remoteWatching())
  /**
   * Tells the other processes of the node (share.ts) about an entry: while someone looks, and
   * then for as long as they have it. While nobody looks, nothing is sent: a reader gathers the
   * entries first (`unsent`, on the others' answer to its sync).
   */
  const share = (slot: Slot, fresh: boolean) => {
    if (outbox === undefined || (!slot.sent && !watchedAnywhere())) return
    const first = !slot.sent
    slot.sent = true
    outbox({ t: "entry", fresh: fresh || first, entry: slot.entry, format: slot.format, provider: slot.provider })
  }

  const publish = (event: FeedEvent) => {
    if (subscribers.size === 0) return
    for (const s of subscribers) {
      try {
        s(event)
      } catch {
        // A subscriber's failure is its own (the feed drops a broken client).
      }
    }
  }

  const dropBodies = (slot: Slot) => {
    const e = slot.entry
    totalBytes -= slot.bodyBytes
    slot.bodyBytes = 0
    const note = (b: CapturedBody | null): CapturedBody | null =>
      b === null
        ? null
        : {
            text: "",
            encoding: "utf8",
            size: b.size,
            truncated: true,
            notice: "body dropped to keep the inspector's memory bounded (INSPECTOR_MAX_TOTAL_MB)"
          }
    e.requestBody = note(e.requestBody)
    e.responseBody = note(e.responseBody)
    e.conversation = null
    slot.reading = undefined
    e.upstream = e.upstream.map((u) => ({ ...u, requestBody: note(u.requestBody), responseBody: note(u.responseBody) }))
  }

  /** Counts a slot's bodies again and keeps the total under budget, dropping the oldest bodies first. */
  const account = (slot: Slot) => {
    const e = slot.entry
    const bytes =
      sizeOf(e.requestBody) +
      sizeOf(e.responseBody) +
      conversationSize(e.conversation) +
      e.upstream.reduce((n, u) => n + sizeOf(u.requestBody) + sizeOf(u.responseBody), 0)
    if (slot.bodyBytes === 0 && bytes > 0) withBodies.push(e.id)
    totalBytes += bytes - slot.bodyBytes
    slot.bodyBytes = bytes
    while (totalBytes > maxTotal && withBodies.length > 0) {
      const id = withBodies.shift()!
      const victim = slots.get(id)
      if (victim && victim.bodyBytes > 0) dropBodies(victim)
    }
  }

  /**
   * The slots' ids in the order they were added, as a ring from `oldestAt` (`held` of them): a full
   * buffer evicts one per request, and the map's first key would be its whole key list (`IdMap.keys`
   * copies every key). The ring doubles when full and is otherwise reused as it is.
   */
  let order: Array<string | undefined> = new Array<string | undefined>(64).fill(undefined)
  let oldestAt = 0
  let held = 0
  const addSlot = (id: string, slot: Slot) => {
    if (!slots.has(id)) {
      if (held === order.length) {
        const bigger = new Array<string | undefined>(order.length * 2).fill(undefined)
        for (let i = 0; i < held; i++) bigger[i] = order[(oldestAt + i) % order.length]
        order = bigger
        oldestAt = 0
      }
      order[(oldestAt + held) % order.length] = id
      held++
    }
    slots.set(id, slot)
  }
  /** The oldest id still held (the map's first key, found through `order`). */
  const oldestId = (): string | undefined => {
    while (held > 0) {
      const id = order[oldestAt]!
      order[oldestAt] = undefined
      oldestAt = (oldestAt + 1) % order.length
      held--
      if (slots.has(id)) return id
    }
    // Only if `order` missed a slot (it does not): the map's own order.
    return slots.keys()[0]
  }

  /**
   * A deferred slot evicted unread after its request ended, with its owner's object: nothing refers
   * to either any more (the owner lets go of its object at the request's end, an entry never built
   * was never handed out), so the next deferred request takes both (`recycledOwn`, `beginOwn`)
   * rather than making two objects that would live a full buffer's worth of requests, long enough
   * to be promoted to the old generation and die there. One is enough: a full buffer evicts one
   * slot per request.
   */
  let spare: Slot | undefined

  const evictOldest = () => {
    const id = oldestId()
    if (id === undefined) return
    const slot = slots.get(id)!
    slots.delete(id)
    totalBytes -= slot.bodyBytes
    slot.bodyBytes = 0
    byRequestId = undefined
    const i = withBodies.indexOf(id)
    if (i !== -1) withBodies.splice(i, 1)
    if (slot.deferred !== undefined && slot.endedAt !== undefined) spare = slot
  }

  const push = (slot: Slot, fromElsewhere = false) => {
    addSlot(slot.entry.id, slot)
    byRequestId = undefined
    while (slots.size > config.bufferSize) evictOldest()
    for (const s of recording.values()) {
      s.entries.set(slot.entry.id, slot.entry)
      if (s.entries.size > config.bufferSize) {
        s.entries.delete(s.entries.keys().next().value!)
        s.dropped++
      }
    }
    if (recording.size > 0 && !fromElsewhere) slot.entry.sessionIds = [...recording.keys()]
    account(slot)
    if (subscribers.size > 0) publish({ type: "new", entry: summaryOf(slot.entry) })
    if (!fromElsewhere) share(slot, true)
  }

  const changed = (slot: Slot, fromElsewhere = false) => {
    account(slot)
    if (subscribers.size > 0) publish({ type: "update", entry: summaryOf(slot.entry) })
    if (!fromElsewhere) share(slot, false)
  }

  const { buildEntry, applyEnd, applyFail, materialize, view } = makeEntryBuilder(config, maxBytes, wantsBodies, deps.costOf)

  // Unique in this process and unguessable across restarts, without a random draw per request.
  const idPrefix = `ti_${crypto.randomBytes(4).toString("hex")}`
  const newId = () => `${idPrefix}${(seq + 1).toString(36)}`

  /** Entries are built when read, not when their request begins: while nobody looks, nothing is shown or shared. */
  const mayDefer = (): boolean => recording.size === 0 && !wantsBodies()

  const begin = (start: CaptureStart): string => {
    const id = newId()
    try {
      const slot = new Slot(id, start.requestId ?? null, false, undefined, undefined, undefined)
      const bodies = wantsBodies()
      slot.hold(buildEntry(slot, start, ++seq, Date.now(), bodies))
      push(slot)
      if (start.clientPort !== undefined) attribute(slot, start.clientPort, start.connection)
    } catch {
      // Capture never breaks what it watches.
    }
    return id
  }

  /**
   * A request of the gateway's own (agent-bridge): recorded as its owner's few values while
   * nobody looks (its entry built when read, its process not looked up), as `begin` otherwise
   * (`eager`: its bodies are kept), then `own.began` touches the fresh entry. Answers its id.
   * `clientPort` and `connection`: its process, looked up only while someone looks.
   */
  const beginOwn = (
    own: OwnRequest,
    requestId: string,
    eager: boolean,
    clientPort: number | undefined,
    connection: object | undefined
  ): string => {
    if (eager || !mayDefer()) {
      const id = begin(own.start())
      const slot = slots.get(id)
      if (slot !== undefined) {
        own.began(slot)
        // Its process only while someone looks (a lookup reads /proc).
        if (clientPort !== undefined && connection !== undefined && wantsBodies()) attribute(slot, clientPort, connection)
      }
      return id
    }
    const id = newId()
    let slot = spare
    if (slot === undefined) slot = new Slot(id, requestId, false, undefined, own, materialize)
    else {
      spare = undefined
      slot.reuse(id, requestId, own)
    }
    slot.seq = ++seq
    slot.startedAt = Date.now()
    addSlot(id, slot)
    byRequestId = undefined
    while (slots.size > config.bufferSize) evictOldest()
    return id
  }

  /**
   * The end of an own request: noted while its entry is not built (`own.end` read then), applied (then `own.ended`) otherwise.
   * Answers whether `own.end` is still to be read (the entry not built yet).
   */
  const endOwn = (id: string, own: OwnRequest): boolean => {
    const slot = slots.get(id)
    if (!slot) return false
    if (slot.deferred !== undefined) {
      slot.endedAt = Date.now()
      return true
    }
    sinkEnd(id, own.end())
    own.ended(slot)
    changed(slot)
    return false
  }

  const sinkEnd = (id: string, end: CaptureEnd): void => {
    const slot = slots.get(id)
    if (!slot) return
    try {
      applyEnd(slot, end, Date.now(), wantsBodies())
      changed(slot)
    } catch {
      // Capture never breaks what it watches.
    }
  }

  const fail = (id: string, error: string): void => {
    const slot = slots.get(id)
    if (!slot) return
    if (slot.deferred !== undefined) {
      slot.failed = { error, at: Date.now() }
      return
    }
    applyFail(slot.entry, error, Date.now())
    changed(slot)
  }

  /**
   * Process attribution, once per client connection (`connection`, when the source knows it) and
   * otherwise per port as capture/process.ts caches it.
   */
  const byConnection = new WeakMap<object, Promise<{ readonly pid: number; readonly name: string } | null>>()
  const attribute = (slot: Slot, clientPort: number, connection: object | undefined): void => {
    if (!deps.attribute) return
    let who = connection === undefined ? undefined : byConnection.get(connection)
    if (who === undefined) {
      who = deps.attribute(clientPort)
      if (connection !== undefined) byConnection.set(connection, who)
    }
    const id = slot.id
    who
      .then((found) => {
        if (!found || !slots.has(id)) return
        slot.entry.pid = found.pid
        slot.entry.processName = found.name
        changed(slot)
      })
      .catch(() => undefined)
  }

  // The lookup is cached per port: the entry's own lookup at `begin` gets this answer.
  const accepted = (clientPort: number): void => void deps.attribute?.(clientPort).catch(() => undefined)
  const sink: InspectorSink = { begin, end: sinkEnd, fail, wantsBodies, maxBodyBytes: maxBytes, accepted }

  return {
    sink,
    wantsBodies,
    maskSecrets: config.maskSecrets,
    /** The slot of a gateway request (agent-bridge), by its request id. */
    bySlotRequestId: slotOfRequest,
    slot: (id: string): Slot | undefined => slots.get(id),
    changed,
    beginOwn,
    endOwn,
    /**
     * The owner's object of the spare slot (its request ended, its slot was evicted unread), for the
     * owner to take for its next request instead of making one; once only.
     */
    recycledOwn: (): OwnRequest | undefined => {
      const own = spare?.deferred
      if (own !== undefined) spare!.deferred = undefined
      return own
    },
    pendingReplayOf: (requestId: string): string | undefined => pendingReplays.get(requestId),
    /** Entries matching `filter`, oldest first (the newest `limit`). */
    entries: (filter: ListFilter = {}): ReadonlyArray<InterceptedRequest> =>
      select(
        [...slots.values()].map((s) => s.entry),
        filter
      ),
    get: (id: string, showSecrets = false): InterceptedRequest | undefined => {
      const s = slots.get(id)
      return s ? view(s.entry, showSecrets) : undefined
    },
    view,
    clear: (fromElsewhere = false) => {
      slots.clear()
      order.fill(undefined)
      oldestAt = 0
      held = 0
      byRequestId = undefined
      withBodies.length = 0
      totalBytes = 0
      publish({ type: "clear" })
      if (!fromElsewhere) outbox?.({ t: "clear" })
    },
    annotate: (id: string, note: string | null): InterceptedRequest | undefined => {
      const s = slots.get(id)
      if (!s) return undefined
      s.entry.annotation = note === null || note.trim() === "" ? null : note.slice(0, 10_000)
      changed(s)
      return view(s.entry, false)
    },
    /** A feed subscriber: while any is subscribed, bodies are kept. */
    subscribe: (fn: (e: FeedEvent) => void): (() => void) => {
      subscribers.add(fn)
      if (subscribers.size === 1) outbox?.({ t: "watching", on: true })
      return () => {
        if (subscribers.delete(fn) && subscribers.size === 0) outbox?.({ t: "watching", on: false })
      }
    },
    subscriberCount: () => subscribers.size,
    memory: () => ({ entries: slots.size, bodyBytes: totalBytes, maxBodyBytes: maxTotal, bufferSize: config.bufferSize }),
    setReplayer: (r: Replayer | undefined) => {
      replayer = r
    },
    replay: async (
      id: string
    ): Promise<{ readonly original: string; readonly replay: string | null; readonly requestId: string; readonly status: number }> => {
      const s = slots.get(id)
      if (!s) throw new InspectorError(404, "not_found", `no intercepted request ${id} in the buffer`)
      const e = s.entry
      if (e.llm === null)
        throw new InspectorError(
          400,
          "not_replayable",
          "only LLM calls can be replayed through the router; this request was not detected as one"
        )
      const path = replayPath(s.format, e.llm.apiKind, e.llm.model, e.llm.streamed)
      if (path === undefined)
        throw new InspectorError(400, "not_replayable", `the ${e.llm.apiKind ?? "unknown"} API is not one the router serves`)
      if (e.requestBody === null)
        throw new InspectorError(
          409,
          "body_not_captured",
          "the request's body was not captured (bodies are kept while an inspector client is connected or a session records)"
        )
      if (e.requestBody.truncated || e.requestBody.encoding !== "utf8")
        throw new InspectorError(409, "body_truncated", "the request's body was truncated or is binary: it cannot be replayed")
      if (replayer === undefined)
        throw new InspectorError(409, "replay_unavailable", "replay is available once the gateway's server is listening")
      const requestId = `replay_${crypto.randomBytes(8).toString("hex")}`
      pendingReplays.set(requestId, id)
      try {
        const res = await replayer(path, e.requestBody.text, requestId)
        const replayId = slotOfRequest(requestId)?.id ?? null
        return { original: id, replay: replayId, requestId, status: res.status }
      } catch (err) {
        throw new InspectorError(
          502,
          "replay_failed",
          `the replay could not reach the gateway's own route: ${err instanceof Error ? err.message : String(err)}`
        )
      } finally {
        pendingReplays.delete(requestId)
      }
    },
    /** Links a replay's entry to its original (agent-bridge, when the replay's request begins). */
    linkReplay: (replayEntry: InterceptedRequest, originalId: string) => {
      replayEntry.replayOf = originalId
      const o = slots.get(originalId)
      if (o) {
        o.entry.replays = [...o.entry.replays, replayEntry.id]
        changed(o)
      }
    },
    har: (entries: ReadonlyArray<InterceptedRequest>, comment?: string) => toHar(entries, comment),
    // ------------------------------------------------------------ sessions (recording in memory)
    startRecording: (name: string | null): SessionView => {
      const id = `ses_${crypto.randomBytes(6).toString("hex")}`
      const s: RecordingSession = { id, name, startedAt: Date.now(), entries: new Map(), dropped: 0 }
      recording.set(id, s)
      outbox?.({ t: "session", op: "start", id, name, startedAt: s.startedAt })
      return { id, name, state: "recording", startedAt: s.startedAt, stoppedAt: null, count: 0, dropped: 0 }
    },
    recordingSession: (id: string) => recording.get(id),
    renameRecording: (id: string, name: string | null): boolean => {
      const s = recording.get(id)
      if (!s) return false
      s.name = name
      outbox?.({ t: "session", op: "rename", id, name, startedAt: s.startedAt })
      return true
    },
    stopRecording: (id: string): RecordingSession | undefined => {
      const s = recording.get(id)
      recording.delete(id)
      if (s) outbox?.({ t: "session", op: "stop", id, name: s.name, startedAt: s.startedAt })
      return s
    },
    // ------------------------------------------------------------ the other processes of this node (share.ts)
    setOutbox: (fn: ((m: ShareOut) => void) | undefined) => {
      outbox = fn
    },
    /** Someone looks (`until` in the future) or stopped looking (`until` 0) in process `who`. */
    watchElsewhere: (who: string, until: number) => {
      if (until > Date.now()) remoteWatchers.set(who, until)
      else remoteWatchers.delete(who)
    },
    /** An entry another process recorded, as it is now: added (`fresh`, or unknown here) or updated in place. */
    upsertElsewhere: (entry: InterceptedRequest, format: FormatId | null, provider: string | null, fresh: boolean) => {
      const slot = slots.get(entry.id)
      if (slot) {
        Object.assign(slot.entry, entry)
        slot.format = format
        slot.provider = provider
        changed(slot, true)
      } else if (fresh) {
        const fresh = new Slot(entry.id, entry.requestId, true, entry, undefined, undefined)
        fresh.format = format
        fresh.provider = provider
        // Its process has it: a change made here (an annotation) goes back to the others.
        fresh.sent = true
        push(fresh, true)
      }
    },
    /** A session another process started, renamed or stopped (stopped there: saved there). */
    sessionElsewhere: (op: "start" | "stop" | "rename", id: string, name: string | null, startedAt: number) => {
      if (op === "stop") recording.delete(id)
      else if (op === "rename") {
        const s = recording.get(id)
        if (s) s.name = name
      } else if (!recording.has(id)) recording.set(id, { id, name, startedAt, entries: new Map(), dropped: 0 })
    },
    /**
     * This process's own entries the other processes do not have yet (recorded while nobody
     * looked), built now and marked as theirs from here on: what a reader elsewhere gathers.
     */
    unsent: (): ReadonlyArray<Extract<ShareOut, { t: "entry" }>> => {
      const out: Array<Extract<ShareOut, { t: "entry" }>> = []
      for (const s of slots.values()) {
        if (s.foreign || s.sent) continue
        s.sent = true
        out.push({ t: "entry", fresh: true, entry: s.entry, format: s.format, provider: s.provider })
      }
      return out
    },
    /** What a process that just started needs from this one: its own entries, its sessions, whether someone looks here. */
    stateForNewcomer: (): ReadonlyArray<ShareOut> => [
      ...[...recording.values()].map((s): ShareOut => ({ t: "session", op: "start", id: s.id, name: s.name, startedAt: s.startedAt })),
      ...(subscribers.size > 0 ? [{ t: "watching", on: true } as const] : []),
      ...[...slots.values()].flatMap(
        (s): Array<ShareOut> => (s.foreign ? [] : [{ t: "entry", fresh: true, entry: s.entry, format: s.format, provider: s.provider }])
      )
    ],
    recordingViews: (): ReadonlyArray<SessionView> =>
      [...recording.values()].map((s) => ({
        id: s.id,
        name: s.name,
        state: "recording",
        startedAt: s.startedAt,
        stoppedAt: null,
        count: s.entries.size,
        dropped: s.dropped
      }))
  }
}

export type InspectorCore = ReturnType<typeof makeInspector>
