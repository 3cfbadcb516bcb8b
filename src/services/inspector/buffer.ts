/**
 * The inspector's in-memory ring of entries, shared by every capture source, the live feed, recording sessions and replay; plain
 * code, the service is Inspector.ts. Bounded memory and masking: docs/inspector.md#limits-and-memory, docs/inspector.md#secrets.
 */
import * as crypto from "node:crypto"
import type { FormatId, Usage } from "../../domain/canonical.js"
import { type AnswerReading, conversationOf, mergeStream, readAnswer, readRequest, type RequestReading } from "./analyze.js"
import { captureBody, flatHeaders, jsonOf, maskHeaders, maskUrl } from "./bodies.js"
import { detect } from "./detect.js"
import { toHar } from "./har.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"
import type { CaptureEnd, CaptureStart, CapturedBody, Conversation, InspectorSink, InterceptedRequest, LlmMeta } from "./types.js"

export type EntrySummary = Omit<
  InterceptedRequest,
  "requestBody" | "responseBody" | "conversation" | "upstream" | "requestHeaders" | "responseHeaders"
> & {
  readonly hasBodies: boolean
}

export type FeedEvent =
  | { readonly type: "new"; readonly entry: EntrySummary }
  | { readonly type: "update"; readonly entry: EntrySummary }
  | { readonly type: "clear" }

export interface ListFilter {
  readonly profile?: "llm" | "all" | undefined
  readonly host?: string | undefined
  readonly agent?: string | undefined
  readonly status?: string | undefined
  readonly source?: string | undefined
  readonly sessionId?: string | undefined
  readonly limit?: number | undefined
}

export interface SessionView {
  readonly id: string
  readonly name: string | null
  readonly state: "recording" | "saved"
  readonly startedAt: number
  readonly stoppedAt: number | null
  readonly count: number
  /** Entries left out past the session's limit (INSPECTOR_BUFFER_SIZE). */
  readonly dropped: number
}

/**
 * A request of the gateway's own (agent-bridge) recorded while nobody looks: what its entry is built
 * from when someone reads it (`deferred` below). Its owner's object of a fixed shape holding plain
 * values (no closures over the request, no copies of it): a slot keeps it for up to
 * INSPECTOR_BUFFER_SIZE requests, long enough for whatever it holds to be promoted to the old
 * generation, where it dies; the less it holds, the less the old generation grows.
 */
export interface OwnRequest {
  /** The start as `begin` takes it, built when the entry is. */
  start(): CaptureStart
  /** The owner's touches on the fresh entry (the agent-bridge's LLM guess from the path). */
  began(slot: Slot): void
  /** The end as `end` takes it, once `endOwn` was called. */
  end(): CaptureEnd
  /** The owner's touches once the end is on the entry (the usage row's figures). */
  ended(slot: Slot): void
}

/**
 * Per entry, what the analysis needs between start and end (not shown). A slot whose request began
 * while nobody looked holds its `OwnRequest` and builds its entry the first time anyone reads
 * `entry`; with nobody reading, a request costs a few fields here, not an entry.
 */
class Slot {
  private built: InterceptedRequest | undefined
  format: FormatId | null = null
  reading: RequestReading | undefined = undefined
  provider: string | null = null
  bodyBytes = 0
  /** The sequence number of a deferred slot, until its entry holds it. */
  seq = 0
  /** The other processes of the node have this entry (share.ts): its changes go to them too. */
  sent = false
  /** A deferred slot's start time (ms), then its end's (undefined: not ended yet) and failure, until its entry is built. */
  startedAt = 0
  endedAt: number | undefined = undefined
  failed: { readonly error: string; readonly at: number } | undefined = undefined
  constructor(
    public id: string,
    public requestId: string | null,
    /** Recorded by another process of this node (`--workers`: share.ts), not by this one. */
    readonly foreign: boolean,
    entry: InterceptedRequest | undefined,
    /** What a deferred slot's entry is built from, until it is. */
    public deferred: OwnRequest | undefined,
    private readonly materialize: ((slot: Slot) => InterceptedRequest) | undefined
  ) {
    this.built = entry
  }
  get entry(): InterceptedRequest {
    if (this.built === undefined) this.built = this.materialize!(this)
    return this.built
  }
  /** Sets the entry (once built). */
  hold(entry: InterceptedRequest): void {
    this.built = entry
  }
  /**
   * This slot, evicted unread (`spare` below), taken for a new deferred request: every field as
   * `new Slot(id, requestId, false, undefined, own, materialize)` makes it (its `materialize` is
   * that one already: only deferred slots are spared).
   */
  reuse(id: string, requestId: string, own: OwnRequest): void {
    this.id = id
    this.requestId = requestId
    this.deferred = own
    this.built = undefined
    this.format = null
    this.reading = undefined
    this.provider = null
    this.bodyBytes = 0
    this.seq = 0
    this.sent = false
    this.startedAt = 0
    this.endedAt = undefined
    this.failed = undefined
  }
}

/**
 * What this buffer tells the other processes of its node under `--workers` (share.ts carries it):
 * an entry as it is now (`fresh` the first time), a clear, whether someone here looks (bodies
 * are then kept everywhere), a recording session started, stopped or renamed here.
 */
export type ShareOut =
  | {
      readonly t: "entry"
      readonly fresh: boolean
      readonly entry: InterceptedRequest
      readonly format: FormatId | null
      readonly provider: string | null
    }
  | { readonly t: "clear" }
  | { readonly t: "watching"; readonly on: boolean }
  | {
      readonly t: "session"
      readonly op: "start" | "stop" | "rename"
      readonly id: string
      readonly name: string | null
      readonly startedAt: number
    }

export interface RecordingSession {
  readonly id: string
  name: string | null
  readonly startedAt: number
  readonly entries: Map<string, InterceptedRequest>
  dropped: number
}

export class InspectorError extends Error {
  constructor(
    readonly status: 400 | 404 | 409 | 502,
    readonly code: string,
    message: string
  ) {
    super(message)
  }
}

/** The replay's way into the gateway's own routes (bound by the server's layer: OwnRoutes). */
export type Replayer = (path: string, body: string, requestId: string) => Promise<{ readonly status: number }>

export interface MakeInspectorDeps {
  readonly config: InspectorConfigShape
  /** The gateway's pricing: USD of tokens of `model` at `provider`. */
  readonly costOf?: (provider: string, model: string, usage: Partial<Usage>) => number | undefined
  /** Process attribution (capture/process.ts); null when unknown. */
  readonly attribute?: (clientPort: number) => Promise<{ readonly pid: number; readonly name: string } | null>
  /** Total bytes of bodies kept (INSPECTOR_MAX_TOTAL_MB). */
  readonly maxTotalBytes?: number
}

const sizeOf = (b: CapturedBody | null): number => (b === null ? 0 : b.text.length)

/** Characters a conversation holds (its texts repeat the bodies': counted against the same budget). */
const conversationSize = (c: Conversation | null): number => {
  if (c === null) return 0
  let n = 0
  for (const turns of [c.request, c.response])
    for (const t of turns)
      for (const b of t.blocks) {
        if (b.type === "text" || b.type === "reasoning") n += b.text.length
        else if (b.type === "tool_result") n += b.content.length
        else if (b.type === "tool_use") n += 64
      }
  for (const r of c.rawEvents ?? []) n += r.data.length
  return n
}

const statusMatches = (status: InterceptedRequest["status"], want: string): boolean => {
  if (want === "in-flight" || want === "error") return status === want
  if (/^[1-5]xx$/.test(want)) return typeof status === "number" && Math.floor(status / 100) === Number(want[0])
  if (/^\d{3}$/.test(want)) return status === Number(want)
  if (want === "ok") return typeof status === "number" && status < 400
  if (want === "failed") return status === "error" || (typeof status === "number" && status >= 400)
  return true
}

const matches = (e: InterceptedRequest, f: ListFilter): boolean =>
  (f.profile !== "llm" || e.detectedKind === "llm" || e.llm !== null) &&
  (f.host === undefined || e.host === f.host || e.host.endsWith(`.${f.host}`)) &&
  (f.agent === undefined || e.agent === f.agent) &&
  (f.status === undefined || statusMatches(e.status, f.status)) &&
  (f.source === undefined || e.source === f.source)

/** The entries of `list` (oldest first) that `filter` keeps: the newest `limit` of them. */
export const select = (list: ReadonlyArray<InterceptedRequest>, filter: ListFilter): ReadonlyArray<InterceptedRequest> => {
  const hit = list.filter((e) => matches(e, filter))
  return filter.limit !== undefined && hit.length > filter.limit ? hit.slice(hit.length - filter.limit) : hit
}

export const summaryOf = (e: InterceptedRequest): EntrySummary => {
  const { requestBody, responseBody, conversation: _c, upstream: _u, requestHeaders: _rq, responseHeaders: _rs, ...rest } = e
  return { ...rest, hasBodies: requestBody !== null || responseBody !== null }
}

/** The gateway route a captured LLM call replays through. */
export const replayPath = (format: FormatId | null, apiKind: string | null, model: string | null, stream: boolean): string | undefined => {
  switch (format) {
    case "openai-chat":
      return "/v1/chat/completions"
    case "openai-responses":
      return "/v1/responses"
    case "anthropic":
      return "/v1/messages"
    case "gemini":
      return model
        ? `/v1beta/models/${encodeURIComponent(model)}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`
        : undefined
    case "ollama":
      return apiKind === "api.generate" ? "/api/generate" : "/api/chat"
    default:
      return apiKind === "completions" ? "/v1/completions" : apiKind === "embeddings" ? "/v1/embeddings" : undefined
  }
}

export const makeInspector = (deps: MakeInspectorDeps) => {
  const config = deps.config
  const maxBytes = config.maxBodyKb * 1024
  const maxTotal = deps.maxTotalBytes ?? 256 * 1024 * 1024
  const slots = new Map<string, Slot>()
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
   * buffer evicts one per request, and a Map's first key, taken after the previous first was
   * deleted, is found by walking every deleted entry still in its table (up to a buffer's worth,
   * until the table is rebuilt). The ring doubles when full and is otherwise reused as it is.
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
  /** The oldest id still held (the Map's first key, found through `order`). */
  const oldestId = (): string | undefined => {
    while (held > 0) {
      const id = order[oldestAt]!
      order[oldestAt] = undefined
      oldestAt = (oldestAt + 1) % order.length
      held--
      if (slots.has(id)) return id
    }
    // Only if `order` missed a slot (it does not): the Map's own order.
    return slots.keys().next().value
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

  const bodyOf = (raw: Buffer | undefined, size: number, headers: Readonly<Record<string, string>>): CapturedBody | null =>
    raw === undefined || !wantsBodies() ? null : captureBody(raw, size, headers, { maxBytes, mask: config.maskSecrets })

  const llmOf = (
    slot: Slot,
    answer: AnswerReading | undefined,
    responseHeaders: Readonly<Record<string, string>> | null,
    streamed: boolean
  ): LlmMeta => {
    const reading = slot.reading
    const usage = answer?.usage
    const model = reading?.model ?? answer?.model ?? null
    const tokensIn = usage?.inputTokens ?? null
    const tokensOut = usage?.outputTokens ?? null
    const cost =
      slot.provider !== null && model !== null && usage !== undefined && deps.costOf
        ? (deps.costOf(slot.provider, model, usage) ?? null)
        : null
    return {
      provider: slot.provider,
      apiKind: slot.entry.llm?.apiKind ?? null,
      model,
      messages: reading?.canonical?.messages.length ?? 0,
      tokensIn,
      tokensOut,
      streamed,
      mappedTo: responseHeaders?.["x-gateway-model"] ?? (answer?.model && model && answer.model !== model ? answer.model : null),
      costEstimateUsd: cost
    }
  }

  // Unique in this process and unguessable across restarts, without a random draw per request.
  const idPrefix = `ti_${crypto.randomBytes(4).toString("hex")}`
  const newId = () => `${idPrefix}${(seq + 1).toString(36)}`

  /** The entry of a request that started (`in-flight`), with what its analysis keeps in `slot`. */
  const buildEntry = (slot: Slot, start: CaptureStart, seqNo: number, startedAt: number, bodies: boolean): InterceptedRequest => {
    let url: URL | undefined
    try {
      url = new URL(start.url)
    } catch {
      url = undefined
    }
    const rawHeaders = flatHeaders(start.headers)
    const requestHeaders = config.maskSecrets ? maskHeaders(rawHeaders) : rawHeaders
    const size = start.body?.length ?? start.bodySize ?? 0
    const requestBody = start.tunnelOnly || !bodies ? null : bodyOf(start.body, size, rawHeaders)
    const json = requestBody
      ? jsonOf(requestBody)
      : start.body && !start.tunnelOnly
        ? jsonOf(captureBody(start.body, size, rawHeaders, { maxBytes, mask: false }))
        : undefined
    const host = url?.hostname.replace(/^\[|\]$/g, "") ?? ""
    const path = url ? url.pathname + url.search : start.url
    const detection = start.tunnelOnly
      ? { ...detect({ host, path: "", body: undefined, userAgent: rawHeaders["user-agent"] }), apiKind: null, llm: false }
      : detect({
          host,
          path: url?.pathname ?? start.url,
          body: json,
          userAgent: rawHeaders["user-agent"],
          headers: rawHeaders,
          kind: start.kind
        })
    const reading = detection.llm ? readRequest(detection.format, json, url?.pathname ?? "") : undefined
    const conversation = detection.llm && reading ? conversationOf(reading, undefined) : null
    slot.format = detection.format
    slot.reading = reading
    slot.provider = detection.provider
    return {
      id: slot.id,
      seq: seqNo,
      source: start.source,
      status: "in-flight",
      detectedKind: detection.kind,
      method: start.method.toUpperCase(),
      url: config.maskSecrets ? maskUrl(start.url) : start.url,
      host,
      port: url?.port ? Number(url.port) : url ? (url.protocol === "https:" ? 443 : 80) : null,
      path: config.maskSecrets ? maskUrl(path) : path,
      tls: url?.protocol === "https:",
      httpVersion: start.httpVersion ?? "1.1",
      requestHeaders,
      requestBody,
      responseHeaders: null,
      responseBody: null,
      requestSize: size,
      responseSize: null,
      timings: { startedAt, ttfbMs: null, totalMs: null },
      error: null,
      tunnelOnly: start.tunnelOnly === true,
      contextKey: conversation?.contextKey ?? null,
      pid: null,
      processName: null,
      agent: detection.agent,
      llm: detection.llm
        ? {
            provider: detection.provider,
            apiKind: detection.apiKind,
            model: reading?.model ?? null,
            messages: reading?.canonical?.messages.length ?? 0,
            tokensIn: null,
            tokensOut: null,
            streamed: reading?.stream ?? false,
            mappedTo: null,
            costEstimateUsd: null
          }
        : null,
      conversation: conversation && bodies ? conversation : null,
      upstream: [],
      annotation: null,
      replayOf: null,
      replays: [],
      sessionIds: [],
      requestId: start.requestId ?? null
    }
  }

  /** A request's answer (or its end) on its entry, at `now` (ms). */
  const applyEnd = (slot: Slot, end: CaptureEnd, now: number, bodies: boolean): void => {
    const e = slot.entry
    const rawHeaders = flatHeaders(end.headers)
    e.status = end.status
    e.responseHeaders = config.maskSecrets ? maskHeaders(rawHeaders) : rawHeaders
    const size = end.body?.length ?? end.bodySize ?? 0
    e.responseSize = size
    if (end.requestBodySize !== undefined) e.requestSize = end.requestBodySize
    e.responseBody = e.tunnelOnly || !bodies ? null : bodyOf(end.body, size, rawHeaders)
    e.timings = { startedAt: e.timings.startedAt, ttfbMs: end.ttfbMs ?? now - e.timings.startedAt, totalMs: now - e.timings.startedAt }
    // An LLM call the buffer read at its start (the agent-bridge reads its own: agentBridge.ts).
    if (e.llm !== null && slot.reading !== undefined) {
      const type = rawHeaders["content-type"] ?? ""
      const streamed = /event-stream|ndjson/.test(type)
      // The answer is read from the body as decoded (unmasked only if masking is off); a cut body is not read.
      const body = e.responseBody ?? (end.body ? captureBody(end.body, size, rawHeaders, { maxBytes, mask: false }) : null)
      let answer: AnswerReading | undefined
      if (body !== null && body.encoding === "utf8" && !body.truncated && end.status < 400) {
        answer = streamed
          ? mergeStream(slot.format, body.text, /ndjson/.test(type) ? "ndjson" : "sse")
          : readAnswer(slot.format, jsonOf(body))
      }
      e.llm = llmOf(slot, answer, rawHeaders, streamed || (slot.reading?.stream ?? false))
      if (slot.reading && bodies) e.conversation = conversationOf(slot.reading, answer)
    }
    // The reading (its canonical request holds the body's text again) is needed only until here.
    slot.reading = undefined
  }

  const applyFail = (e: InterceptedRequest, error: string, now: number): void => {
    e.status = "error"
    e.error = config.maskSecrets ? maskUrl(error) : error
    e.timings = { startedAt: e.timings.startedAt, ttfbMs: e.timings.ttfbMs, totalMs: now - e.timings.startedAt }
  }

  /** A deferred slot's entry, built as it would have been when its request began and ended. */
  const materialize = (slot: Slot): InterceptedRequest => {
    const own = slot.deferred!
    slot.deferred = undefined
    const entry = buildEntry(slot, own.start(), slot.seq, slot.startedAt, false)
    // The getter answers `entry` from here on (the touches below read it).
    slot.hold(entry)
    own.began(slot)
    if (slot.endedAt !== undefined) {
      applyEnd(slot, own.end(), slot.endedAt, false)
      own.ended(slot)
    }
    if (slot.failed !== undefined) applyFail(entry, slot.failed.error, slot.failed.at)
    slot.failed = undefined
    return entry
  }

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

  /** The end of an own request: noted while its entry is not built (`own.end` read then), applied (then `own.ended`) otherwise. */
  const endOwn = (id: string, own: OwnRequest): void => {
    const slot = slots.get(id)
    if (!slot) return
    if (slot.deferred !== undefined) {
      slot.endedAt = Date.now()
      return
    }
    sinkEnd(id, own.end())
    own.ended(slot)
    changed(slot)
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

  /** An unmasked buffer's entry as views show it: credentials masked (the detail with `showSecrets` excepted). */
  const view = (e: InterceptedRequest, showSecrets: boolean): InterceptedRequest => {
    if (config.maskSecrets || showSecrets) return e
    const mask = (b: CapturedBody | null) => (b === null || b.encoding !== "utf8" ? b : { ...b, text: maskUrl(b.text) })
    return {
      ...e,
      url: maskUrl(e.url),
      path: maskUrl(e.path),
      requestHeaders: maskHeaders(e.requestHeaders),
      responseHeaders: e.responseHeaders && maskHeaders(e.responseHeaders),
      requestBody: mask(e.requestBody),
      responseBody: mask(e.responseBody),
      upstream: e.upstream.map((u) => ({ ...u, requestBody: mask(u.requestBody), responseBody: mask(u.responseBody) }))
    }
  }

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
