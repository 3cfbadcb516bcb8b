/**
 * One realtime session once both sockets are open: events relayed one by one in both directions,
 * each `response.done`'s usage priced and recorded (one usage row per response) and counted
 * against the key's budget, the session's end when either side closes, it idles or runs too long,
 * and backpressure: a client that does not read pauses the upstream socket (docs/realtime.md).
 */
import type * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type WebSocket from "ws"
import type { Usage } from "../domain/canonical.js"
import { newTracking, recordRequest } from "../kernel/attempts.js"
import { newRequestId } from "../kernel/ids.js"
import type { HttpRequestContext } from "../inference/io.js"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { LimitTarget } from "../services/accounting/TokenLimits.js"
import type { Candidate } from "../services/routing/types.js"
import type { UsageShape } from "../services/usage/Usage.js"

/** Bytes a socket may hold unsent before the other side is paused; it resumes below a quarter of it. */
export const HIGH_WATER = 4 * 1024 * 1024

/** What a session needs of the gateway. */
export interface RealtimeSessionDeps {
  readonly usage: UsageShape
  readonly accounting: AccountingShape
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>
  /** Silence (no event either way) after which the session ends (ms); 0: never. */
  readonly idleMs: number
  /** The longest a session lasts (ms); 0: no limit. */
  readonly maxMs: number
}

/** How a session ended, for its end event and inspector entry. */
export interface SessionEnd {
  readonly code: number
  readonly reason: string
  readonly responses: number
  readonly costUsd: number
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
}

/** One relayed event as the inspector shows it. */
export interface LoggedEvent {
  readonly dir: "client" | "server"
  readonly at: number
  readonly event: unknown
}

/** Events kept per session for the inspector (the first ones; the count says how many there were). */
export const MAX_LOGGED = 1000

/** Fields that carry base64 audio: shown as their size. */
const AUDIO_FIELDS = new Set(["audio", "delta"])
const AUDIO_TYPES = /audio/

/** An event with its audio payloads elided to their size (`<audio: N bytes>`). */
export const elideAudio = (event: Record<string, unknown>): Record<string, unknown> => {
  const audioish = typeof event["type"] === "string" && AUDIO_TYPES.test(event["type"])
  const walk = (v: unknown, key: string | undefined, depth: number): unknown => {
    if (typeof v === "string") {
      if (key !== undefined && (key === "audio" || (audioish && AUDIO_FIELDS.has(key))) && v.length > 64)
        return `<audio: ${Math.floor((v.length * 3) / 4)} bytes>`
      return v.length > 4096 ? `${v.slice(0, 4096)}… (${v.length} characters)` : v
    }
    if (depth > 8 || v === null || typeof v !== "object") return v
    if (Array.isArray(v)) return v.map((x) => walk(x, undefined, depth + 1))
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) out[k] = walk(x, k, depth + 1)
    return out
  }
  return walk(event, undefined, 0) as Record<string, unknown>
}

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0)
const rec = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined

/** A `response.done`'s usage split into text and audio tokens (the realtime API's `usage` object). */
export interface RealtimeUsage {
  readonly input: number
  readonly output: number
  readonly cached: number
  readonly audioIn: number
  readonly cachedAudio: number
  readonly audioOut: number
}

export const usageOf = (u: Record<string, unknown>): RealtimeUsage => {
  const inDetails = rec(u["input_token_details"])
  const outDetails = rec(u["output_token_details"])
  const cachedDetails = rec(inDetails?.["cached_tokens_details"])
  return {
    input: num(u["input_tokens"]),
    output: num(u["output_tokens"]),
    cached: num(inDetails?.["cached_tokens"]),
    audioIn: num(inDetails?.["audio_tokens"]),
    cachedAudio: num(cachedDetails?.["audio_tokens"]),
    audioOut: num(outDetails?.["audio_tokens"])
  }
}

/**
 * USD of one response on `c`: text tokens through the pricing service (its overrides apply),
 * audio tokens at the catalog's audio prices (`audioInput`, `cachedAudioInput`, `audioOutput`);
 * a model without audio prices has its audio tokens priced as text.
 */
export const realtimeCost = (accounting: AccountingShape, c: Candidate, u: RealtimeUsage): number => {
  const p = c.spec?.pricing
  const priced = p?.audioInput !== undefined || p?.audioOutput !== undefined
  if (!priced)
    return accounting.cost(c.connection.provider.id, c.model, { inputTokens: u.input, outputTokens: u.output, cachedInputTokens: u.cached })
  const textCached = Math.max(0, u.cached - u.cachedAudio)
  const text = accounting.cost(c.connection.provider.id, c.model, {
    inputTokens: Math.max(0, u.input - u.audioIn),
    outputTokens: Math.max(0, u.output - u.audioOut),
    cachedInputTokens: textCached
  })
  const audioIn = p?.audioInput ?? 0
  const audio =
    (Math.max(0, u.audioIn - u.cachedAudio) * audioIn +
      u.cachedAudio * (p?.cachedAudioInput ?? audioIn) +
      u.audioOut * (p?.audioOutput ?? 0)) /
    1e6
  return text + audio
}

/** The session's two sockets and who it is for. */
export interface SessionSockets {
  readonly client: WebSocket
  readonly upstream: WebSocket
  /** The upstream's events that came before the session began (`RealtimeConnected.early`). */
  readonly early: () => Array<{ readonly data: WebSocket.RawData; readonly isBinary: boolean }>
  readonly ctx: HttpRequestContext
  readonly candidate: Candidate
  /** The model id as the client asked for it. */
  readonly model: string
  readonly apiKeyId: string | null
  /** The client asked for the beta protocol. */
  readonly beta: boolean
  /** Every relayed event (audio elided), for the inspector; undefined while the inspector is off. */
  readonly log: Array<LoggedEvent> | undefined
  /** Called once when the session ends. */
  readonly ended: (end: SessionEnd) => void
}

/** Sends an `error` event (the realtime API's shape) and closes with `code`. */
export const closeWith = (ws: WebSocket, code: number, errorCode: string, message: string): void => {
  if (ws.readyState === ws.OPEN) {
    ws.send(
      JSON.stringify({
        type: "error",
        event_id: `event_${newRequestId()}`,
        error: { type: "invalid_request_error", code: errorCode, message }
      })
    )
    // A close reason is at most 123 bytes.
    ws.close(
      code,
      Buffer.from(message)
        .subarray(0, 123)
        .toString("utf8")
        .replace(/\uFFFD+$/, "")
    )
  } else if (ws.readyState === ws.CONNECTING) ws.terminate()
}

/** Relays a session until it ends. */
export const relaySession = (deps: RealtimeSessionDeps, s: SessionSockets): void => {
  const { client, upstream, candidate, apiKeyId } = s
  const totals = { responses: 0, costUsd: 0, inputTokens: 0, outputTokens: 0 }
  let over = false
  let lastActive = Date.now()
  let endCode = 1000
  let endReason = "closed by the client"
  const timers: Array<NodeJS.Timeout> = []

  const finish = () => {
    if (over) return
    over = true
    for (const t of timers) clearInterval(t)
    s.ended({
      code: endCode,
      reason: endReason,
      responses: totals.responses,
      costUsd: totals.costUsd,
      usage: { inputTokens: totals.inputTokens, outputTokens: totals.outputTokens }
    })
  }
  /** The gateway ends the session: the client gets an `error` event and the close code. */
  const end = (code: number, errorCode: string, message: string) => {
    if (over) return
    endCode = code
    endReason = `${errorCode}: ${message}`
    closeWith(client, code, errorCode, message)
    if (upstream.readyState === upstream.OPEN || upstream.readyState === upstream.CONNECTING) upstream.close(1000)
    finish()
  }

  const logEvent = (dir: "client" | "server", event: Record<string, unknown> | undefined, raw: string) => {
    if (s.log === undefined || s.log.length >= MAX_LOGGED) return
    s.log.push({ dir, at: Date.now(), event: event ? elideAudio(event) : `<${raw.length} bytes, not JSON>` })
  }

  /** The session's target as token limits name it (a limit on the model asked for, the provider, the connection's model). */
  const limitTarget: LimitTarget = {
    provider: candidate.connection.provider.id,
    model: candidate.model,
    requestedModel: s.model,
    connection: candidate.connection.name
  }

  /** One response's usage row, priced, then the budget and token limits: one spent or reached ends the session (1008). */
  const recordResponse = (response: Record<string, unknown>) => {
    const raw = rec(response["usage"])
    const u = raw ? usageOf(raw) : undefined
    const costUsd = u ? realtimeCost(deps.accounting, candidate, u) : 0
    const usage: Partial<Usage> | undefined = u ? { inputTokens: u.input, outputTokens: u.output, cachedInputTokens: u.cached } : undefined
    totals.responses++
    totals.costUsd += costUsd
    totals.inputTokens += u?.input ?? 0
    totals.outputTokens += u?.output ?? 0
    const track = newTracking(s.model)
    track.tried = candidate
    const status = response["status"]
    track.outcome = {
      status: status === "failed" ? 502 : status === "cancelled" ? 499 : 200,
      usage,
      ttftMs: null,
      error: status === "failed" ? "response failed" : null,
      costUsd
    }
    const ctx: HttpRequestContext = { ...s.ctx, requestId: newRequestId(), startedAt: Date.now() }
    const fiber = deps.run(recordRequest(deps.usage, deps.accounting, { ctx, endpoint: "realtime", stream: true, model: s.model }, track))
    fiber.addObserver(() => {
      const budget = deps.accounting.budget(apiKeyId)
      if (!budget.ok)
        return end(
          1008,
          "budget_exhausted",
          `the ${budget.window} budget of ${budget.subject} ($${budget.limitUsd}) is spent; the session ends`
        )
      // The key's token limits too: the handshake checked them (the guarded attempt), a running session is held to them as its tokens count.
      const limit = deps.accounting.tokenLimit(apiKeyId, limitTarget)
      if (!limit.ok)
        end(
          1008,
          "token_limit_exceeded",
          `the token limit of ${limit.subject} (${limit.limit.maxTokens} tokens per ${limit.limit.window}) is reached; the session ends`
        )
    })
  }

  // Server → client, paused while the client does not read.
  let upstreamPaused = false
  const fromUpstream = (data: WebSocket.RawData, isBinary: boolean) => {
    lastActive = Date.now()
    const text = isBinary ? Buffer.from(data as Buffer).toString("utf8") : data.toString()
    let event: Record<string, unknown> | undefined
    try {
      event = rec(JSON.parse(text))
    } catch {
      event = undefined
    }
    logEvent("server", event, text)
    const type = event?.["type"]
    if (s.beta === true && type === "session.created" && rec(event?.["session"])?.["type"] !== undefined) {
      return end(
        1003,
        "realtime_beta_unsupported",
        "the upstream speaks only the GA realtime protocol: connect without OpenAI-Beta: realtime=v1"
      )
    }
    if (client.readyState !== client.OPEN) return
    client.send(text, () => {
      if (upstreamPaused && client.bufferedAmount < HIGH_WATER / 4) {
        upstreamPaused = false
        upstream.resume()
      }
    })
    if (!upstreamPaused && client.bufferedAmount > HIGH_WATER) {
      upstreamPaused = true
      upstream.pause()
    }
    if (type === "response.done") {
      const response = rec(event?.["response"])
      if (response) recordResponse(response)
    }
  }
  for (const e of s.early()) fromUpstream(e.data, e.isBinary)
  upstream.on("message", fromUpstream)

  // Client → server, paused while the upstream does not read.
  let clientPaused = false
  client.on("message", (data, isBinary) => {
    lastActive = Date.now()
    const text = isBinary ? Buffer.from(data as Buffer).toString("utf8") : data.toString()
    let event: Record<string, unknown> | undefined
    if (s.log !== undefined) {
      try {
        event = rec(JSON.parse(text))
      } catch {
        event = undefined
      }
      logEvent("client", event, text)
    }
    if (upstream.readyState !== upstream.OPEN) return
    upstream.send(text, () => {
      if (clientPaused && upstream.bufferedAmount < HIGH_WATER / 4) {
        clientPaused = false
        client.resume()
      }
    })
    if (!clientPaused && upstream.bufferedAmount > HIGH_WATER) {
      clientPaused = true
      client.pause()
    }
  })

  const upstreamClosed = (code: number, why: string) =>
    end(1011, "upstream_closed", `the upstream ${candidate.connection.name} closed the session (${code}${why ? ` ${why}` : ""})`)
  upstream.on("close", (code, reason) => {
    if (!over) upstreamClosed(code, reason.toString("utf8"))
  })
  // Closed while the client's handshake was answered.
  if (upstream.readyState === upstream.CLOSED || upstream.readyState === upstream.CLOSING) upstreamClosed(1006, "")
  upstream.on("error", () => upstream.terminate())
  client.on("close", (code) => {
    if (!over) {
      endCode = code
      endReason = "closed by the client"
    }
    if (upstream.readyState === upstream.OPEN) upstream.close(1000)
    finish()
  })
  client.on("error", () => client.terminate())

  // Idle and maximum durations (checked each second; the timers do not hold the process open).
  const started = Date.now()
  if (deps.idleMs > 0 || deps.maxMs > 0) {
    const t = setInterval(
      () => {
        const now = Date.now()
        if (deps.maxMs > 0 && now - started >= deps.maxMs)
          end(1000, "session_expired", `the session reached its maximum duration of ${Math.round(deps.maxMs / 1000)} s`)
        else if (deps.idleMs > 0 && now - lastActive >= deps.idleMs)
          end(1000, "session_idle", `no event for ${Math.round(deps.idleMs / 1000)} s; the session ends`)
      },
      Math.max(50, Math.min(1000, deps.idleMs || 1000, deps.maxMs || 1000) / 2)
    )
    t.unref()
    timers.push(t)
  }
}
