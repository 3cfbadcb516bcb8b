/**
 * An inspector buffer entry's slot and how its entry is built from a capture's start and end (masked
 * as configured, its LLM call read), plus the body sizes counted against the memory budget; the
 * buffer (buffer.ts) holds the slots. Masking: docs/inspector.md#secrets.
 */
import type { FormatId, Usage } from "../../domain/canonical.js"
import { type AnswerReading, conversationOf, mergeStream, readAnswer, readRequest, type RequestReading } from "./analyze.js"
import { captureBody, flatHeaders, jsonOf, maskHeaders, maskUrl } from "./bodies.js"
import { detect } from "./detect.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"
import type { CaptureEnd, CaptureStart, CapturedBody, Conversation, InterceptedRequest, LlmMeta } from "./types.js"

/**
 * A request of the gateway's own (agent-bridge) recorded while nobody looks: what its entry is built
 * from when someone reads it (`deferred` on its slot). Its owner's object of a fixed shape holding plain
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
export class Slot {
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
   * This slot, evicted unread (`spare` in buffer.ts), taken for a new deferred request: every field as
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

export const sizeOf = (b: CapturedBody | null): number => (b === null ? 0 : b.text.length)

/** Characters a conversation holds (its texts repeat the bodies': counted against the same budget). */
export const conversationSize = (c: Conversation | null): number => {
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

/**
 * The entry builders of one buffer: `wantsBodies` says whether bodies are kept now, `costOf` prices an
 * LLM call (MakeInspectorDeps).
 */
export const makeEntryBuilder = (
  config: InspectorConfigShape,
  maxBytes: number,
  wantsBodies: () => boolean,
  costOf: ((provider: string, model: string, usage: Partial<Usage>) => number | undefined) | undefined
) => {
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
      slot.provider !== null && model !== null && usage !== undefined && costOf ? (costOf(slot.provider, model, usage) ?? null) : null
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

  return { buildEntry, applyEnd, applyFail, materialize, view }
}
