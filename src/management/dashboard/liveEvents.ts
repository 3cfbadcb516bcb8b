/**
 * The live feed's events (LiveFeed.ts): every event of the event bus delivered to the dashboards
 * connected to this process, and shared with the other processes of the node (`--workers`) or the
 * other gateways on one Redis while a dashboard is connected to one of them.
 */
import type { WebSocket } from "ws"
import type { GatewayEvent } from "../../platform/events/EventBus.js"
import type { SharedStateShape } from "../../platform/state/SharedState.js"

/** Events replayed to a new client. */
const RECENT = 100
/** A client further behind than this many bytes misses events until it catches up. */
const MAX_BUFFERED = 1024 * 1024
/** A process with dashboard clients says so this often, and is believed this long. */
const WATCH_EVERY_MS = 10_000
const WATCH_FOR_MS = 30_000

/** What the processes of a node (or the gateways on one Redis) tell each other on the `live` channel. */
type LiveWire =
  | { readonly t: "events"; readonly events: ReadonlyArray<GatewayEvent>; readonly to?: string }
  | { readonly t: "watch"; readonly from: string; readonly until: number }

/** The dashboards connected to this process, and the recent events a new one is sent first. */
export interface LiveClients {
  readonly clients: Set<WebSocket>
  readonly recent: GatewayEvent[]
}

/**
 * Delivery to this process's dashboards (`enqueue`), once per layer. Publishing only queues the
 * event (it runs on the request that published it); the queue is written out once per turn of
 * the event loop, so a burst of events is one pass, as a subscription's batch was, without a
 * fiber's wake-up for every event. A client more than MAX_BUFFERED behind skips events.
 */
export const makeDelivery = ({ clients, recent }: LiveClients) => {
  let queued: GatewayEvent[] = []
  let flushing = false
  const flush = () => {
    flushing = false
    const batch = queued
    queued = []
    for (const e of batch) {
      recent.push(e)
      if (recent.length > RECENT) recent.shift()
      if (clients.size === 0) continue
      const frame = JSON.stringify({ type: "event", event: e })
      for (const ws of clients) if (ws.bufferedAmount < MAX_BUFFERED) ws.send(frame)
    }
  }
  const enqueue = (e: GatewayEvent) => {
    queued.push(e)
    if (!flushing) {
      flushing = true
      setImmediate(flush)
    }
  }
  return enqueue
}

/** What the `live` channel needs: this process's dashboards, and how an event reaches them. */
export interface LiveChannelDeps {
  readonly shared: SharedStateShape
  readonly clients: Set<WebSocket>
  readonly enqueue: (e: GatewayEvent) => void
}

/**
 * Shares events on the `live` channel only while some process has a dashboard connected (`watching`), so with nobody watching a
 * request costs no message (docs/scale-out.md#what-each-shared-state-guarantees). `listener` is the bus's listener; once per layer.
 */
export const makeLiveChannel = ({ shared, clients, enqueue }: LiveChannelDeps) => {
  const self = `${process.pid}-${Math.random().toString(36).slice(2, 10)}`
  const watchers = new Map<string, number>()
  const watchedElsewhere = (): boolean => {
    if (watchers.size === 0) return false
    const now = Date.now()
    for (const [who, until] of watchers) {
      if (until > now) return true
      watchers.delete(who)
    }
    return false
  }
  let outgoing: GatewayEvent[] = []
  /** This process's own recent events: what a new watcher elsewhere is sent once. */
  const own: GatewayEvent[] = []
  const others = shared.channel<LiveWire>("live", (m) => {
    if (m.t === "events") {
      // Events for one watcher (its catch-up), or for whoever has clients.
      if (m.to !== undefined ? m.to !== self : clients.size === 0) return
      for (const e of m.events) enqueue(e)
      return
    }
    if (m.from === self) return
    const known = (watchers.get(m.from) ?? 0) > Date.now()
    if (m.until > Date.now()) watchers.set(m.from, m.until)
    else watchers.delete(m.from)
    // A new watcher gets this process's recent events once (its clients had only their own process's).
    if (!known && m.until > Date.now() && own.length > 0) others.publish({ t: "events", to: m.from, events: own.slice() })
  })
  const sendOut = () => {
    const batch = outgoing
    outgoing = []
    if (batch.length > 0) others.publish({ t: "events", events: batch })
  }
  const listener = (e: GatewayEvent) => {
    enqueue(e)
    if (!others.shared) return
    own.push(e)
    if (own.length > RECENT) own.shift()
    if (!watchedElsewhere()) return
    if (outgoing.push(e) === 1) setImmediate(sendOut)
  }
  let heartbeat: NodeJS.Timeout | undefined
  const watching = (on: boolean) => {
    if (!others.shared) return
    others.publish({ t: "watch", from: self, until: on ? Date.now() + WATCH_FOR_MS : 0 })
    if (on && heartbeat === undefined) {
      heartbeat = setInterval(() => others.publish({ t: "watch", from: self, until: Date.now() + WATCH_FOR_MS }), WATCH_EVERY_MS)
      heartbeat.unref()
    } else if (!on && heartbeat !== undefined) {
      clearInterval(heartbeat)
      heartbeat = undefined
    }
  }
  return { listener, watching }
}
