import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type { Worker } from "node:cluster"
import {
  type Codec,
  jsonCodec,
  makeMemoryCounters,
  makeMemoryKeys,
  makeMemoryTotals,
  SharedState,
  type SharedStateShape,
  type StateChannel,
  type TotalEntry
} from "./SharedState.js"

/**
 * `SharedState` for `gateway --workers N` without Redis: the primary relays channels between workers over node's cluster IPC
 * and holds the counters, totals and keys (docs/scale-out.md#workers). Our messages carry `gw`; node's own (`cmd`) do not.
 */

/** The calls on the primary's stores. */
export type StoreOp =
  | "count.add"
  | "count.get"
  | "totals.claim"
  | "totals.add"
  | "keys.claim"
  | "keys.get"
  | "keys.replace"
  | "keys.release"

/** What a worker sends its primary. `id` -1: no answer wanted. */
export type ToPrimary =
  | { readonly gw: "pub"; readonly topic: string; readonly text: string }
  | { readonly gw: "call"; readonly id: number; readonly op: StoreOp; readonly args: ReadonlyArray<unknown> }
  | { readonly gw: "stop"; readonly intent: "shutdown" | "restart" }
  /** A standby worker is ready: it takes connections once told to serve. */
  | { readonly gw: "standby" }

/** What the primary sends a worker. */
export type ToWorker =
  | { readonly gw: "msg"; readonly topic: string; readonly text: string }
  | { readonly gw: "result"; readonly id: number; readonly value: unknown }
  /** To a standby worker: listen on the gateway's port now (a serving worker stopped). */
  | { readonly gw: "serve" }

/** The stores of one node (the primary's, or a worker's own once the primary is gone), called by name. */
const makeStores = () => {
  const counters = makeMemoryCounters()
  const totals = makeMemoryTotals(true)
  const keys = makeMemoryKeys(true)
  return (op: StoreOp, a: ReadonlyArray<any>): Effect.Effect<unknown> => {
    switch (op) {
      case "count.add":
        return counters.add(a[0], a[1], a[2], a[3])
      case "count.get":
        return counters.get(a[0], a[1], a[2])
      case "totals.claim":
        return totals.claim(a[0] as ReadonlyArray<TotalEntry>, a[1])
      case "totals.add":
        return Effect.sync(() => totals.add(a[0] as ReadonlyArray<TotalEntry>, a[1]))
      case "keys.claim":
        return keys.claim(a[0], a[1], a[2])
      case "keys.get":
        return keys.get(a[0])
      case "keys.replace":
        return keys.replace(a[0], a[1], a[2], a[3])
      case "keys.release":
        return keys.release(a[0], a[1])
    }
  }
}

/** A message the other side cannot take any more (its channel broke as it stopped) is dropped. */
const ignoreSendError = (): void => undefined

/** Sends `m` to worker `w`; false when its channel is closed or breaks (the worker is going away). */
export const toWorker = (w: Worker, m: ToWorker): boolean => {
  if (!w.isConnected()) return false
  try {
    // With a callback: a channel that broke before its `disconnect` came (a worker stopping)
    // fails the write as an `error` event otherwise, which nobody listens to on a cluster
    // worker: the primary died of it (exit 1 at a SIGTERM to the node).
    w.send(m, ignoreSendError)
    return true
  } catch {
    // The worker is going away: it misses this change, as a Redis subscriber that dropped would.
    return false
  }
}

const isGatewayMessage = (m: unknown): m is { readonly gw: string } =>
  typeof m === "object" && m !== null && typeof (m as { gw?: unknown }).gw === "string"

/**
 * The primary's side: relays channel messages between `workers()` and answers calls on its
 * stores (counters, totals, keys). Returns the handler to attach to each worker's `message` event; `stop`
 * messages go to `onStop`.
 */
export const makeRelay = (options: {
  readonly workers: () => Iterable<Worker>
  readonly onStop: (intent: "shutdown" | "restart", from: Worker) => void
  /** A standby worker said it is ready to serve. */
  readonly onStandby?: (from: Worker) => void
  /** Counts relayed messages per topic (tests and the start-up log read it). */
  readonly relayed?: Map<string, number>
}) => {
  const stores = makeStores()
  return (from: Worker, message: unknown) => {
    if (!isGatewayMessage(message)) return
    const m = message as ToPrimary
    switch (m.gw) {
      case "pub": {
        const out: ToWorker = { gw: "msg", topic: m.topic, text: m.text }
        for (const w of options.workers()) if (w !== from) toWorker(w, out)
        if (options.relayed) options.relayed.set(m.topic, (options.relayed.get(m.topic) ?? 0) + 1)
        return
      }
      case "call": {
        const value = Effect.runSync(stores(m.op, m.args))
        if (m.id >= 0) toWorker(from, { gw: "result", id: m.id, value: value === undefined ? null : value })
        return
      }
      case "stop":
        return options.onStop(m.intent, from)
      case "standby":
        return options.onStandby?.(from)
    }
  }
}

/** Whether this process is a worker of `gateway --workers N` with an IPC channel to its primary. */
export const isClusterWorker = (): boolean => process.env.GATEWAY_WORKER_ID !== undefined && typeof process.send === "function"

/**
 * Whether this process runs the work that must run once per gateway, not once per worker (the
 * batch sweep): every process but workers 2..N of `gateway --workers N`.
 */
export const runsOncePerGateway = (): boolean => !isClusterWorker() || process.env.GATEWAY_WORKER_ID === "1"

/**
 * Whether this worker starts as a standby (docs/scale-out.md, "Cores"): a whole gateway that does
 * not listen on the gateway's port until its primary tells it to (a serving worker stopped).
 */
export const startsAsStandby = (): boolean => isClusterWorker() && process.env.GATEWAY_WORKER_ROLE === "standby"

/**
 * Tells the primary this standby worker is ready, and calls `serve` once when the primary says to
 * serve. Answers the cancel (the layer's close).
 */
export const awaitServeOrder = (serve: () => void): (() => void) => {
  const onMessage = (message: unknown) => {
    if (!isGatewayMessage(message) || message.gw !== "serve") return
    process.off("message", onMessage)
    serve()
  }
  process.on("message", onMessage)
  toPrimary({ gw: "standby" })
  return () => process.off("message", onMessage)
}

/**
 * Messages this worker sent to its primary, by what they carry (`pub:<topic>`, `call:<op>`,
 * `stop`): `gateway_node_messages_total{kind}`, so a request's cost in messages can be read.
 */
export const sentToPrimary = new Map<string, number>()

/** Sends a message to the primary; false when the channel is closed. */
export const toPrimary = (m: ToPrimary): boolean => {
  if (typeof process.send !== "function" || !process.connected) return false
  const kind = m.gw === "pub" ? `pub:${m.topic}` : m.gw === "call" ? `call:${m.op}` : m.gw
  sentToPrimary.set(kind, (sentToPrimary.get(kind) ?? 0) + 1)
  try {
    // With a callback, as the primary's relay sends: a broken channel is not an `error` event.
    process.send(m, undefined, undefined, ignoreSendError)
    return true
  } catch {
    return false
  }
}

/**
 * The worker's side, as a `SharedState` layer: one `message` listener for the process (removed
 * when the layer closes), dispatching by topic. An `apply` that throws is logged and the others
 * still run.
 */
export const layerWorker = Layer.scoped(
  SharedState,
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const logWarning = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
    const subscribers = new Map<string, Array<(text: string) => void>>()
    const waiting = new Map<number, (value: unknown) => void>()
    let nextId = 0
    const local = makeStores()
    const GONE = Symbol("primary gone")

    const onMessage = (message: unknown) => {
      if (!isGatewayMessage(message)) return
      const m = message as ToWorker
      if (m.gw === "result") {
        const resume = waiting.get(m.id)
        if (resume !== undefined) {
          waiting.delete(m.id)
          resume(m.value)
        }
        return
      }
      if (m.gw === "msg") {
        const list = subscribers.get(m.topic)
        if (list === undefined) return
        for (const deliver of list) deliver(m.text)
      }
    }
    // The primary went away: what was waiting for a count is answered from this process's memory.
    const onDisconnect = () => {
      for (const [id, resume] of waiting) {
        waiting.delete(id)
        resume(GONE)
      }
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        process.on("message", onMessage)
        process.on("disconnect", onDisconnect)
      }),
      () =>
        Effect.sync(() => {
          process.off("message", onMessage)
          process.off("disconnect", onDisconnect)
        })
    )

    /** One call on the primary's stores (on this worker's own when the primary is gone). */
    const call = (op: StoreOp, args: ReadonlyArray<unknown>): Effect.Effect<any> =>
      Effect.flatMap(
        Effect.async<unknown>((resume) => {
          const id = ++nextId
          waiting.set(id, (value) => resume(Effect.succeed(value)))
          if (!toPrimary({ gw: "call", id, op, args })) {
            waiting.delete(id)
            resume(Effect.succeed(GONE))
          }
        }),
        (value) => (value === GONE ? local(op, args) : Effect.succeed(value === null ? undefined : value))
      )

    const shape: SharedStateShape = {
      counters: {
        add: (key, by, windowMs, now) => call("count.add", [key, by, windowMs, now]),
        get: (key, windowMs, now) => call("count.get", [key, windowMs, now])
      },
      totals: {
        exact: true,
        claim: (entries, by) => call("totals.claim", [entries, by]),
        add: (entries, by) => {
          if (!toPrimary({ gw: "call", id: -1, op: "totals.add", args: [entries, by] })) Effect.runSync(local("totals.add", [entries, by]))
        }
      },
      keys: {
        exact: true,
        claim: (key, value, ttlMs) => call("keys.claim", [key, value, ttlMs]),
        get: (key) => call("keys.get", [key]),
        replace: (key, owner, value, ttlMs) => call("keys.replace", [key, owner, value, ttlMs]),
        release: (key, owner) => call("keys.release", [key, owner])
      },
      channel: <A>(topic: string, apply: (change: A) => void, codec: Codec<A> = jsonCodec): StateChannel<A> => {
        let list = subscribers.get(topic)
        if (list === undefined) subscribers.set(topic, (list = []))
        list.push((text) => {
          try {
            apply(codec.decode(text))
          } catch (e) {
            logWarning(`shared state: a change on "${topic}" from another worker could not be applied: ${String(e)}`)
          }
        })
        return {
          shared: true,
          publish: (change: A) => {
            toPrimary({ gw: "pub", topic, text: codec.encode(change) })
          }
        }
      }
    }
    return shape
  })
)

/**
 * The shared-state layer for this process: the workers' IPC transport when this is a worker of
 * `gateway --workers N` and no other multi-process transport was chosen (`fallback` is what
 * src/server/Gateway.ts would use otherwise: one process, or Redis when REDIS_URL is set).
 */
export const layerForProcess = <E, R>(fallback: Layer.Layer<SharedState, E, R>): Layer.Layer<SharedState, E, R> =>
  isClusterWorker() && !process.env.REDIS_URL ? layerWorker : fallback
