/**
 * One inspector for the whole node under `--workers`: the processes exchange entries (as they change while someone looks, else on
 * `sync`), clears, sessions, who is watching, and calls forwarded to worker 1's capture listeners (docs/inspector.md#workers).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as os from "node:os"
import type { FormatId } from "../../domain/canonical.js"
import { BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { SharedStateShape, StateChannel } from "../../platform/state/SharedState.js"
import type { InspectorCore } from "./buffer.js"
import type { ShareOut } from "./bufferViews.js"
import type { InterceptedRequest } from "./types.js"

/** A call on the capture listeners' holder failed there: its error's tag and message, or none answered. */
export interface RemoteFailure {
  readonly tag: string
  readonly message: string
}

/** A failure on worker 1 as the worker that forwarded the call answers it. */
export const failureOfRemote = (f: RemoteFailure): BadRequest | Conflict | Forbidden | NotFound | ServiceUnavailable => {
  switch (f.tag) {
    case "Conflict":
      return new Conflict({ message: f.message })
    case "Forbidden":
      return new Forbidden({ message: f.message })
    case "NotFound":
      return new NotFound({ message: f.message })
    case "BadRequest":
      return new BadRequest({ message: f.message })
    default:
      return new ServiceUnavailable({ message: f.message })
  }
}

type Wire =
  | {
      readonly t: "entry"
      readonly from: string
      readonly fresh: boolean
      readonly entry: InterceptedRequest
      readonly format: FormatId | null
      readonly provider: string | null
    }
  | { readonly t: "clear"; readonly from: string }
  | { readonly t: "watch"; readonly from: string; readonly until: number }
  | {
      readonly t: "session"
      readonly from: string
      readonly op: "start" | "stop" | "rename"
      readonly id: string
      readonly name: string | null
      readonly startedAt: number
    }
  | { readonly t: "hello"; readonly from: string }
  | { readonly t: "here"; readonly from: string }
  | { readonly t: "sync"; readonly from: string; readonly id: number }
  | { readonly t: "synced"; readonly from: string; readonly to: string; readonly id: number }
  | { readonly t: "call"; readonly from: string; readonly id: number; readonly op: string; readonly args: unknown }
  | {
      readonly t: "result"
      readonly from: string
      readonly to: string
      readonly id: number
      readonly value?: unknown
      readonly failure?: RemoteFailure
    }

/** How long someone looking somewhere counts without a heartbeat, and how often it is said again. */
const WATCH_TTL_MS = 30_000
const WATCH_EVERY_MS = 10_000
/** How long a worker waits for the holder of the capture listeners to answer. */
export const CALL_TIMEOUT = Duration.seconds(10)
/** How long a worker waits for the others to send what they hold before it saves a session. */
export const SYNC_TIMEOUT_MS = 2_000

/** What runs another worker's call on the holder: its value, or its failure as the caller reports it. */
export type CallHandler = (op: string, args: unknown) => Promise<{ readonly value: unknown } | { readonly failure: RemoteFailure }>

export interface NodeShare {
  /** This process (its pid). */
  readonly self: string
  /** Whether this process holds the capture listeners (worker 1). */
  readonly holdsCapture: boolean
  /** Asks the holder of the capture listeners to run `op`: its answer, its failure, or a failure tagged `Unavailable` after CALL_TIMEOUT.
   * */
  readonly call: (op: string, args: unknown) => Effect.Effect<unknown, RemoteFailure>
  /** On the holder: what runs the calls of the other workers. */
  /** `prefix`: the ops this handler takes (`tproxy.` for the transparent capture's); the longest matching prefix wins, "" takes the rest.
   * */
  readonly serve: (handler: CallHandler, prefix?: string) => void
  /**
   * Completes once every other process of the node has sent the entries it holds unsent (the
   * channel keeps each sender's order, so they are here by then), or after SYNC_TIMEOUT_MS for a
   * process that does not answer (stopping). A session is saved after this, with every entry.
   */
  readonly sync: Effect.Effect<void>
  readonly close: () => void
}

/** The topic of this node's inspector: its primary's pid on this host. */
export const nodeTopic = (): string => `inspector:${os.hostname()}:${process.ppid}`

/**
 * Joins `core` to the other processes of this node on `shared`'s channel `topic`. `holdsCapture`:
 * this process runs the capture listeners (answers calls).
 */
export const joinNode = (
  core: InspectorCore,
  shared: SharedStateShape,
  options: { readonly topic: string; readonly holdsCapture: boolean; readonly self?: string }
): NodeShare => {
  const self = options.self ?? String(process.pid)
  const handlers = new Map<string, CallHandler>()
  const handlerFor = (op: string): CallHandler | undefined => {
    let best: string | undefined
    for (const prefix of handlers.keys()) if (op.startsWith(prefix) && (best === undefined || prefix.length > best.length)) best = prefix
    return best === undefined ? undefined : handlers.get(best)
  }
  const waiting = new Map<number, (r: { readonly value: unknown } | { readonly failure: RemoteFailure }) => void>()
  let nextCall = 0
  let closed = false
  // The other processes of this node, as they said hello or answered one; a sync waits for these.
  const peers = new Set<string>()
  const syncs = new Map<number, { readonly left: Set<string>; readonly done: () => void }>()

  // Entries changed in this turn of the event loop, sent together after it (an entry begun and ended at once goes once).
  const pending = new Map<string, { fresh: boolean; m: Extract<ShareOut, { t: "entry" }> }>()
  let flushQueued = false
  const flush = () => {
    flushQueued = false
    const batch = [...pending.values()]
    pending.clear()
    for (const { fresh, m } of batch) send({ t: "entry", from: self, fresh, entry: m.entry, format: m.format, provider: m.provider })
  }

  let heartbeat: ReturnType<typeof setInterval> | undefined
  const sayWatching = (on: boolean) => {
    send({ t: "watch", from: self, until: on ? Date.now() + WATCH_TTL_MS : 0 })
    if (on && heartbeat === undefined) {
      heartbeat = setInterval(() => send({ t: "watch", from: self, until: Date.now() + WATCH_TTL_MS }), WATCH_EVERY_MS)
      heartbeat.unref()
    } else if (!on && heartbeat !== undefined) {
      clearInterval(heartbeat)
      heartbeat = undefined
    }
  }

  const out = (m: ShareOut) => {
    switch (m.t) {
      case "entry": {
        const was = pending.get(m.entry.id)
        pending.set(m.entry.id, { fresh: m.fresh || (was?.fresh ?? false), m })
        if (!flushQueued) {
          flushQueued = true
          setImmediate(flush)
        }
        return
      }
      case "clear":
        pending.clear()
        return send({ t: "clear", from: self })
      case "watching":
        return sayWatching(m.on)
      case "session":
        return send({ t: "session", from: self, op: m.op, id: m.id, name: m.name, startedAt: m.startedAt })
    }
  }

  const receive = (m: Wire) => {
    if (closed || m.from === self) return
    peers.add(m.from)
    switch (m.t) {
      case "entry":
        return core.upsertElsewhere(m.entry, m.format, m.provider, m.fresh)
      case "clear":
        return core.clear(true)
      case "watch":
        return core.watchElsewhere(m.from, m.until)
      case "session":
        return core.sessionElsewhere(m.op, m.id, m.name, m.startedAt)
      case "here":
        return
      case "sync":
        // What this process holds unsent goes first (the changes of this turn, then the entries
        // recorded while nobody looked), then the answer: the asker sees all of it, in order.
        flush()
        for (const e of core.unsent()) send({ t: "entry", from: self, fresh: true, entry: e.entry, format: e.format, provider: e.provider })
        return send({ t: "synced", from: self, to: m.from, id: m.id })
      case "synced": {
        if (m.to !== self) return
        const asked = syncs.get(m.id)
        asked?.left.delete(m.from)
        if (asked && asked.left.size === 0) asked.done()
        return
      }
      case "hello":
        send({ t: "here", from: self })
        for (const s of core.stateForNewcomer()) {
          if (s.t === "watching") send({ t: "watch", from: self, until: Date.now() + WATCH_TTL_MS })
          else if (s.t === "entry") send({ t: "entry", from: self, fresh: true, entry: s.entry, format: s.format, provider: s.provider })
          else if (s.t === "session") send({ t: "session", from: self, op: s.op, id: s.id, name: s.name, startedAt: s.startedAt })
        }
        return
      case "call": {
        if (!options.holdsCapture) return
        const run = handlerFor(m.op)
        const answer = (r: { readonly value: unknown } | { readonly failure: RemoteFailure }) =>
          send({ t: "result", from: self, to: m.from, id: m.id, ...r })
        if (run === undefined)
          return answer({ failure: { tag: "Unavailable", message: "the capture listeners are not ready yet on worker 1" } })
        run(m.op, m.args).then(answer, (e: unknown) =>
          answer({ failure: { tag: "BadRequest", message: e instanceof Error ? e.message : String(e) } })
        )
        return
      }
      case "result": {
        if (m.to !== self) return
        const resolve = waiting.get(m.id)
        waiting.delete(m.id)
        resolve?.(m.failure !== undefined ? { failure: m.failure } : { value: m.value })
        return
      }
    }
  }

  const channel: StateChannel<Wire> = shared.channel<Wire>(options.topic, receive)
  const send = (m: Wire) => {
    if (!closed) channel.publish(m)
  }
  core.setOutbox(out)
  send({ t: "hello", from: self })

  return {
    self,
    holdsCapture: options.holdsCapture,
    call: (op, args) =>
      Effect.async<unknown, RemoteFailure>((resume) => {
        const id = ++nextCall
        waiting.set(id, (r) => resume("failure" in r ? Effect.fail(r.failure) : Effect.succeed(r.value)))
        send({ t: "call", from: self, id, op, args })
        return Effect.sync(() => waiting.delete(id))
      }).pipe(
        Effect.timeoutFail({
          duration: CALL_TIMEOUT,
          onTimeout: (): RemoteFailure => ({
            tag: "Unavailable",
            message: `worker 1, which holds the inspector's capture listeners, did not answer within ${Duration.format(CALL_TIMEOUT)} (it may be restarting): try again`
          })
        })
      ),
    serve: (h, prefix = "") => {
      handlers.set(prefix, h)
    },
    sync: Effect.async<void>((resume) => {
      if (closed || peers.size === 0) return resume(Effect.void)
      const id = ++nextCall
      const finish = () => {
        clearTimeout(timer)
        syncs.delete(id)
        resume(Effect.void)
      }
      // A process that does not answer (it stopped) is forgotten: the next sync does not wait for it.
      const timer = setTimeout(() => {
        for (const gone of syncs.get(id)?.left ?? []) peers.delete(gone)
        finish()
      }, SYNC_TIMEOUT_MS)
      syncs.set(id, { left: new Set(peers), done: finish })
      send({ t: "sync", from: self, id })
      return Effect.sync(() => {
        clearTimeout(timer)
        syncs.delete(id)
      })
    }),
    close: () => {
      closed = true
      core.setOutbox(undefined)
      if (heartbeat !== undefined) clearInterval(heartbeat)
      for (const resolve of waiting.values()) resolve({ failure: { tag: "Unavailable", message: "the gateway is stopping" } })
      waiting.clear()
      for (const s of [...syncs.values()]) s.done()
    }
  }
}
