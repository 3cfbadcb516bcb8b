/**
 * The traffic inspector as a service (docs/inspector.md): the buffer (buffer.ts) with the
 * agent-bridge listening to every request of the gateway, the sessions saved to the database, and
 * replay's way into the gateway's own routes.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { Usage } from "../../domain/canonical.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { OwnRoutes } from "../../kernel/internalCall.js"
import { isClusterWorker, runsOncePerGateway } from "../../platform/state/clusterIpc.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { tokenCost } from "../accounting/cost.js"
import { Pricing } from "../accounting/Pricing.js"
import { makeAgentBridge } from "./agentBridge.js"
import { makeProcessAttribution } from "./capture/process.js"
import { type InspectorCore, makeInspector } from "./buffer.js"
import { InspectorError, type RecordingSession, type SessionView } from "./bufferViews.js"
import { InspectorConfig, type InspectorConfigShape } from "./InspectorConfig.js"
import { joinNode, type NodeShare, nodeTopic } from "./share.js"
import type { InterceptedRequest } from "./types.js"

/** Fields of the session store (KeyValue namespaces): meta per id, entries per id. */
const SESSIONS_NS = "inspector.sessions"
const SESSION_ENTRIES_NS = "inspector.session-entries"

export interface SavedSession {
  readonly meta: SessionView
  readonly entries: ReadonlyArray<InterceptedRequest>
}

export interface InspectorShape {
  readonly core: InspectorCore
  readonly config: InspectorConfigShape
  /** Under `--workers`: the other processes of this node (share.ts); undefined in a gateway of one process. */
  readonly node: NodeShare | undefined
  readonly sessions: {
    readonly list: Effect.Effect<ReadonlyArray<SessionView>>
    readonly start: (name: string | null) => Effect.Effect<SessionView>
    readonly stop: (id: string) => Effect.Effect<SessionView, InspectorError>
    readonly rename: (id: string, name: string | null) => Effect.Effect<SessionView, InspectorError>
    readonly get: (id: string) => Effect.Effect<SavedSession, InspectorError>
    readonly remove: (id: string) => Effect.Effect<void, InspectorError>
  }
  /**
   * Completes once this process's buffer holds the node's entries: under `--workers`, what the
   * other processes recorded while nobody looked (they send nothing per request then) is asked
   * for first (share.ts, `sync`). Read before a list, a detail, an export. Immediate in one process.
   */
  readonly gathered: Effect.Effect<void>
  /** The recorded entries of gateway requests by their request ids: the buffer's, then the saved sessions' (secrets masked as views are).
   * */
  readonly byRequestIds: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, InterceptedRequest>>
}

export class Inspector extends Context.Tag("gateway/Inspector")<Inspector, InspectorShape>() {
  static readonly make = (
    core: InspectorCore,
    config: InspectorConfigShape,
    kv: (typeof KeyValue)["Service"],
    node?: NodeShare
  ): InspectorShape => {
    const loadMeta = (id: string) =>
      Effect.map(kv.get(SESSIONS_NS, id), (o) => (Option.isSome(o) ? (JSON.parse(o.value) as SessionView) : undefined))
    const notFound = (id: string) => new InspectorError(404, "not_found", `no session ${id}`)
    const saved = (s: RecordingSession, stoppedAt: number): SessionView => ({
      id: s.id,
      name: s.name,
      state: "saved",
      startedAt: s.startedAt,
      stoppedAt,
      count: s.entries.size,
      dropped: s.dropped
    })
    return {
      core,
      config,
      node,
      gathered: node === undefined ? Effect.void : node.sync,
      byRequestIds: (ids) =>
        Effect.gen(function* () {
          if (node !== undefined) yield* node.sync
          const found = new Map<string, InterceptedRequest>()
          const want = new Set(ids)
          for (const id of want) {
            const slot = core.bySlotRequestId(id)
            if (slot) found.set(id, core.view(slot.entry, false))
          }
          if (found.size === want.size) return found
          for (const [, raw] of yield* kv.entries(SESSION_ENTRIES_NS))
            for (const e of JSON.parse(raw) as Array<InterceptedRequest>)
              if (e.requestId !== null && want.has(e.requestId) && !found.has(e.requestId)) found.set(e.requestId, core.view(e, false))
          return found
        }),
      sessions: {
        // Under --workers a session saved by another worker is in the store before this worker hears
        // that it stopped: the store's saved row wins over a recording this worker still holds.
        list: Effect.map(kv.entries(SESSIONS_NS), (rows) => {
          const stored = rows.map(([, v]) => JSON.parse(v) as SessionView)
          const savedIds = new Set(stored.map((v) => v.id))
          return [...core.recordingViews().filter((v) => !savedIds.has(v.id)), ...stored].sort((a, b) => b.startedAt - a.startedAt)
        }),
        start: (name) => Effect.sync(() => core.startRecording(name)),
        stop: (id) =>
          Effect.gen(function* () {
            // Under --workers: stopped (and saved) through another worker already, whether or not this one heard.
            if (node !== undefined && core.recordingSession(id) !== undefined && (yield* loadMeta(id)) !== undefined) {
              core.sessionElsewhere("stop", id, null, 0)
              return yield* Effect.fail(new InspectorError(409, "not_recording", `session ${id} is already stopped`))
            }
            // Under --workers: what the other workers served and have not sent yet is here first.
            if (node !== undefined && core.recordingSession(id) !== undefined) yield* node.sync
            const s = core.stopRecording(id)
            if (!s) {
              const meta = yield* loadMeta(id)
              if (meta) return yield* Effect.fail(new InspectorError(409, "not_recording", `session ${id} is already stopped`))
              return yield* Effect.fail(notFound(id))
            }
            const meta = saved(s, Date.now())
            yield* kv.set(SESSION_ENTRIES_NS, id, JSON.stringify([...s.entries.values()]))
            yield* kv.set(SESSIONS_NS, id, JSON.stringify(meta))
            return meta
          }),
        rename: (id, name) =>
          Effect.gen(function* () {
            const meta = core.recordingSession(id) !== undefined && node === undefined ? undefined : yield* loadMeta(id)
            if (meta === undefined && core.renameRecording(id, name)) return core.recordingViews().find((v) => v.id === id)!
            if (!meta) return yield* Effect.fail(notFound(id))
            const next = { ...meta, name }
            yield* kv.set(SESSIONS_NS, id, JSON.stringify(next))
            return next
          }),
        get: (id) =>
          Effect.gen(function* () {
            const live = core.recordingSession(id)
            if (live && (node === undefined || (yield* loadMeta(id)) === undefined))
              return {
                meta: core.recordingViews().find((v) => v.id === id)!,
                entries: [...live.entries.values()].map((e) => core.view(e, false))
              }
            const meta = yield* loadMeta(id)
            if (!meta) return yield* Effect.fail(notFound(id))
            const raw = yield* kv.get(SESSION_ENTRIES_NS, id)
            const entries = Option.isSome(raw) ? (JSON.parse(raw.value) as Array<InterceptedRequest>) : []
            return { meta, entries: entries.map((e) => core.view(e, false)) }
          }),
        remove: (id) =>
          Effect.gen(function* () {
            if (core.stopRecording(id)) return
            const removed = yield* kv.remove(SESSIONS_NS, id)
            yield* kv.remove(SESSION_ENTRIES_NS, id)
            if (!removed) return yield* Effect.fail(notFound(id))
          })
      }
    }
  }

  /**
   * Replay's way in: the gateway's own routes (`OwnRoutes`, once the server listens), as its
   * internal caller; a captured key is never reused. The answer is read to its end, so the
   * replay's entry is complete when the route answers.
   */
  static readonly replayLayer = Layer.scopedDiscard(
    Effect.gen(function* () {
      const inspector = yield* Inspector
      const own = yield* OwnRoutes
      inspector.core.setReplayer(async (path, body, requestId) => {
        const res = await own.fetch(path, { body, requestId, headers: { "x-gateway-no-cache": "true" } })
        await res.arrayBuffer()
        return { status: res.status }
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => inspector.core.setReplayer(undefined)))
    })
  )

  /** The buffer, with the agent-bridge source listening to every request of the gateway. */
  static readonly layer = Layer.scoped(
    Inspector,
    Effect.gen(function* () {
      const config = yield* InspectorConfig
      const kv = yield* KeyValue
      const pricing = yield* Effect.serviceOption(Pricing)
      const attribution = makeProcessAttribution()
      const core = makeInspector({
        config,
        attribute: (port) => attribution.lookup(port),
        maxTotalBytes: config.maxTotalMb * 1024 * 1024,
        ...(Option.isSome(pricing)
          ? {
              costOf: (provider: string, model: string, usage: Partial<Usage>) => {
                const price = pricing.value.priceOf(provider, model)
                return price ? tokenCost(price, usage) : undefined
              }
            }
          : {})
      })
      const hooks = yield* RequestHooks
      const unlisten = hooks.listen(makeAgentBridge(core))
      yield* Effect.addFinalizer(() => Effect.sync(unlisten))
      // `--workers`: one buffer for the node, whichever worker answers (share.ts); worker 1 holds the capture listeners.
      let node: NodeShare | undefined
      if (isClusterWorker()) {
        node = joinNode(core, yield* SharedState.orLocal, { topic: nodeTopic(), holdsCapture: runsOncePerGateway() })
        yield* Effect.addFinalizer(() => Effect.sync(() => node?.close()))
      }
      return Inspector.make(core, config, kv, node)
    })
  )
}
