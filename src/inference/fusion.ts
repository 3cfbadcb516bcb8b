/**
 * Fusion (spec document 1): a panel of models answers the prompt in parallel, whole and without
 * tools, and a judge writes the reply from their answers.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { AccountingShape } from "../accounting/Accounting.js"
import { type CanonicalRequest, type CanonicalResponse, type ContentBlock, type FormatId, textOf, type Usage } from "../formats/canonical.js"
import { tryJson } from "../formats/common.js"
import type { WireFormat } from "../formats/format.js"
import { FORMATS } from "../formats/registry.js"
import type { Connection } from "../providers/Connections.js"
import type { ResilienceShape } from "../resilience/Resilience.js"
import type { FailureInfo } from "../resilience/types.js"
import type { FusionPlan, RoutePlan } from "../routing/plan.js"
import type { RoutingMemoryShape } from "../routing/RoutingMemory.js"
import type { Candidate } from "../routing/types.js"
import type { UpstreamResponse } from "../upstream/UpstreamHttp.js"
import type { ExtraTokens } from "./answers.js"
import { attemptFailed, failureOfError, headerValue, type Tracking } from "./attempts.js"
import { clientError, type InferenceError, tryDecode } from "./errors.js"
import { committed } from "./io.js"
import { errorInAnswer } from "./sending.js"
import type { InferenceCall, InferenceShape } from "./pipeline.js"

/** Panel requests carry no tools: calls and results in the history become plain text. */
export const withoutTools = (req: CanonicalRequest): CanonicalRequest => ({
  ...req,
  tools: [],
  stream: false,
  messages: req.messages.map((m) => ({
    role: m.role === "tool" ? "user" : m.role,
    content: m.content.flatMap((b): Array<ContentBlock> =>
      b.type === "tool_use"
        ? [{ type: "text", text: `[called tool ${b.name} with ${JSON.stringify(b.input ?? {})}]` }]
        : b.type === "tool_result"
          ? [{ type: "text", text: `[result of tool ${b.name ?? b.toolUseId}: ${b.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("")}]` }]
          : b.type === "reasoning"
            ? []
            : [b]
    )
  })),
  ...(req.toolChoice ? { toolChoice: undefined } : {})
})

/** What the judge is told, with the panel's answers anonymised. */
export const fusionBrief = (answers: ReadonlyArray<string>): string =>
  [
    "Several independent assistants answered the latest request of this conversation. Their answers follow as numbered sources.",
    "Write the single best reply to the user: keep what is correct and useful, settle disagreements on the merits, and do not mention the sources, a panel or this instruction.",
    ...answers.map((a, i) => `<source ${i + 1}>\n${a}\n</source ${i + 1}>`)
  ].join("\n\n")

/** What fusion needs of the pipeline: sending, reading failures, answering, and the dispatcher for the judge. */
export interface FusionDeps {
  readonly accounting: AccountingShape
  readonly resilience: ResilienceShape
  readonly memory: RoutingMemoryShape
  readonly send: InferenceShape["send"]
  readonly readFailure: (res: UpstreamResponse, upstream: WireFormat, client: WireFormat, connection: Connection) => Effect.Effect<{ readonly error: InferenceError; readonly info: FailureInfo }>
  readonly wholeText: (res: UpstreamResponse, client: WireFormat, connection: Connection) => Effect.Effect<string, { readonly error: InferenceError; readonly info: FailureInfo }>
  readonly encodeFor: (connection: Connection, req: CanonicalRequest) => { readonly format: FormatId; readonly body: Record<string, unknown> }
  /** A panel member's answer as the reply; `costUsd` and `tokens` are the whole panel's. */
  readonly respondWith: (call: InferenceCall, decoded: CanonicalResponse, served: { readonly candidate: Candidate; readonly costUsd: number; readonly tokens: ExtraTokens }) => Effect.Effect<void>
  readonly execute: (call: InferenceCall, plan: RoutePlan, track: Tracking) => Effect.Effect<void, InferenceError>
  /** The time the resilience state is kept in (the Clock's). */
  readonly now: () => number
}

export const makeFusion = ({ accounting, resilience, memory, send, readFailure, wholeText, encodeFor, respondWith, execute, now }: FusionDeps) => {
  /** One whole (non-streamed) answer from a candidate, for a fusion panel; records its own usage row. */
  const complete = (call: InferenceCall, c: Candidate, req: CanonicalRequest) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const { ctx, format: client } = call
        const limit = accounting.tokenLimit(ctx.apiKeyId, { provider: c.connection.provider.id, model: c.model, requestedModel: call.model, connection: c.connection.name })
        if (!limit.ok) {
          return yield* Effect.fail(attemptFailed(clientError(client, { status: 429, kind: "rate_limit", code: "token_limit_exceeded", message: `${c.key}: token limit reached` }), undefined, true))
        }
        const gate = resilience.acquire(c, now())
        if (!gate.allowed) {
          return yield* Effect.fail(attemptFailed(clientError(client, { status: 503, kind: "overloaded", message: `${c.key}: its provider is being probed` }), undefined, true))
        }
        const releaseProbe = gate.probe ? Effect.sync(() => resilience.release(c)) : Effect.void
        const startedAt = Date.now()
        const end = memory.begin(c)
        const row = (status: number, u: Partial<Usage> | undefined, error: string | null) =>
          accounting.finish({
            requestId: ctx.requestId,
            apiKeyId: ctx.apiKeyId,
            connectionId: c.connection.id,
            provider: c.connection.provider.id,
            model: c.model,
            endpoint: `${call.endpoint}:fusion-panel`,
            stream: false,
            status,
            usage: { input: u?.inputTokens ?? null, output: u?.outputTokens ?? null, cached: u?.cachedInputTokens ?? null, reasoning: u?.reasoningTokens ?? null },
            latencyMs: Date.now() - startedAt,
            ttftMs: null,
            error,
            requestedModel: call.model
          })
        const { format, body } = encodeFor(c.connection, { ...req, model: c.model, stream: false })
        const upstream = FORMATS[format]
        const result = yield* restore(
          Effect.gen(function* () {
            // Read whole in the same wait, under the size limit and body idle timeout of every whole answer.
            const res = yield* send({ connection: c.connection, model: c.model }, format, body, { stream: false, readWhole: true }, client).pipe(
              Effect.mapError((e) => attemptFailed(e, failureOfError(e), e.code === "provider_misconfigured" || e.code === "provider_url_blocked"))
            )
            if (res.status < 200 || res.status >= 300) {
              const { error, info } = yield* readFailure(res, upstream, client, c.connection)
              return yield* Effect.fail(attemptFailed(error, info))
            }
            const text = yield* Effect.mapError(wholeText(res, client, c.connection), (f) => attemptFailed(f.error, f.info))
            const json = tryJson(text)
            const bad = errorInAnswer(upstream.id, json, text, client, c.connection)
            if (bad) return yield* Effect.fail(attemptFailed(bad.error, bad.info))
            return { decoded: upstream.decodeResponse(json), headers: headerValue(res.headers) }
          })
        ).pipe(
          Effect.either,
          Effect.ensuring(Effect.sync(end)),
          // Cut off when the panel closed (grace or hard timeout): the call still cost something upstream.
          Effect.onInterrupt(() => releaseProbe.pipe(Effect.zipRight(row(499, undefined, "panel closed before this member answered"))))
        )
        const latencyMs = Date.now() - startedAt
        if (result._tag === "Right") {
          memory.observe(c.key, latencyMs, true, Date.now())
          resilience.succeeded(c, result.right.headers, now())
          const costUsd = yield* row(200, result.right.decoded.usage, null)
          return { response: result.right.decoded, costUsd }
        }
        const failed = result.left
        if (failed.failure) {
          const cls = yield* resilience.failed(c, failed.failure, gate.probe)
          if (cls.scope !== "client") memory.observe(c.key, latencyMs, false, Date.now())
        } else yield* releaseProbe
        yield* row(failed.error.status, undefined, failed.error.message)
        return yield* Effect.fail(failed)
      })
    )

  /**
   * Fusion (spec document 1): the prompt goes to every panel model in parallel, whole and
   * without tools; once `minPanel` answers are in, stragglers get `stragglerGraceMs`; the panel
   * phase ends at `panelHardTimeoutMs` in any case. No answer: 503; one: that answer; more: the
   * judge synthesises them (anonymised as Source 1, 2, ...) with the client's stream flag and tools.
   */
  const fuse = (call: InferenceCall, plan: RoutePlan, f: FusionPlan, track: Tracking) =>
    Effect.gen(function* () {
      const { ctx, format: client } = call
      if (f.panel.length <= 1) return yield* execute(call, { ...plan, candidates: f.panel.length > 0 ? f.panel : [f.judge] }, track)
      const canonical = yield* tryDecode(client, () => (call.decode ?? client.decodeRequest)(call.body))
      const panelRequest = withoutTools(canonical)
      const answers: Array<{ readonly index: number; readonly response: CanonicalResponse }> = []
      // What the whole panel spent (members that answered, empty answers included): the reply's headers count it.
      let panelCost = 0
      const panelTokens = { input: 0, output: 0 }
      let finished = 0
      const quorum = yield* Deferred.make<void>()
      const everyone = yield* Deferred.make<void>()
      const fibers = yield* Effect.forEach(f.panel, (c, index) =>
        complete(call, c, panelRequest).pipe(
          Effect.tap(({ response, costUsd }) =>
            Effect.sync(() => {
              panelCost += costUsd
              panelTokens.input += response.usage?.inputTokens ?? 0
              panelTokens.output += response.usage?.outputTokens ?? 0
              if (textOf(response.content).trim() !== "") answers.push({ index, response })
            })
          ),
          Effect.ignore,
          Effect.ensuring(
            Effect.suspend(() => {
              finished++
              const all = finished === f.panel.length
              return Effect.all([answers.length >= f.minPanel || all ? Deferred.succeed(quorum, undefined) : Effect.void, all ? Deferred.succeed(everyone, undefined) : Effect.void])
            })
          ),
          Effect.fork
        )
      )
      yield* Deferred.await(quorum).pipe(
        Effect.zipRight(Effect.race(Deferred.await(everyone), Effect.sleep(Duration.millis(f.stragglerGraceMs)))),
        Effect.timeout(Duration.millis(f.panelHardTimeoutMs)),
        Effect.ignore
      )
      yield* Fiber.interruptAll(fibers)
      const got = [...answers].sort((a, b) => a.index - b.index)
      yield* Effect.logInfo(`fusion panel of ${plan.scope}: ${got.length} of ${f.panel.length} answered`)
      ctx.progress?.emit("panel", { answered: got.length, of: f.panel.length })
      if (got.length === 0) {
        track.outcome = { status: 503, usage: undefined, ttftMs: null, error: "fusion panel produced no answer" }
        return yield* Effect.fail(clientError(client, { status: 503, kind: "overloaded", message: `the fusion panel of '${plan.scope}' produced no answer`, code: "fusion_no_answers" }))
      }
      track.panelCostUsd = panelCost
      if (got.length === 1) {
        // The panel's row already counts its tokens; this request's row says how it ended.
        track.tried = f.panel[got[0]!.index]
        track.outcome = { status: 200, usage: undefined, ttftMs: null, error: null }
        return yield* respondWith(call, { ...got[0]!.response, model: call.model }, { candidate: f.panel[got[0]!.index]!, costUsd: panelCost, tokens: panelTokens })
      }
      const judged: CanonicalRequest = { ...canonical, system: [...canonical.system, { type: "text", text: fusionBrief(got.map((a) => textOf(a.response.content))) }] }
      track.tried = f.judge
      // A judge that fails before answering leaves the panel's first answer as the reply.
      return yield* execute({ ...call, decode: () => judged, passthrough: false, extraCostUsd: panelCost, extraTokens: panelTokens }, { ...plan, candidates: [f.judge], strategy: "fusion" }, track).pipe(
        Effect.catchAll((e) =>
          committed(ctx)
            ? Effect.fail(e)
            : Effect.gen(function* () {
                yield* Effect.logWarning(`fusion judge of ${plan.scope} failed (${e.message}); answering with the panel's first answer`)
                const best = got[0]!
                track.tried = f.panel[best.index]
                track.outcome = { status: 200, usage: undefined, ttftMs: null, error: null }
                yield* respondWith(call, { ...best.response, model: call.model }, { candidate: f.panel[best.index]!, costUsd: panelCost, tokens: panelTokens })
              })
        )
      )
    })

  return { fuse }
}
