/**
 * Fusion (spec document 1): a panel of models answers the prompt in parallel, whole and without
 * tools, and a judge writes the reply from their answers.
 */
import { sealResponse } from "../upstream/formats/signatures.js"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import { type CanonicalRequest, type CanonicalResponse, type ContentBlock, type FormatId, textOf, type Usage } from "../domain/canonical.js"
import { tryJson } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { FORMATS } from "../upstream/formats/registry.js"
import type { Connection } from "../upstream/providers/Connections.js"
import type { FailureInfo } from "../services/resilience/types.js"
import type { FusionPlan, RoutePlan } from "../services/routing/plan.js"
import type { Candidate } from "../services/routing/types.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import {
  type AttemptFailed,
  type AttemptOutcome,
  attemptFailed,
  failureOfError,
  headerValue,
  newTracking,
  type Tracking
} from "../kernel/attempts.js"
import type { ExtraTokens, InferenceCall, InferenceShape } from "./call.js"
import { clientError, type InferenceError, tryDecode } from "../kernel/errors.js"
import type { AttemptRequest } from "./fallback.js"
import { committed } from "./io.js"
import { errorInAnswer } from "./sending.js"

/** Panel requests carry no tools: calls and results in the history become plain text. */
export const withoutTools = (req: CanonicalRequest): CanonicalRequest => ({
  ...req,
  tools: [],
  stream: false,
  messages: req.messages.map((m) => ({
    role: m.role === "tool" ? "user" : m.role,
    content: m.content.flatMap(
      (b): Array<ContentBlock> =>
        b.type === "tool_use"
          ? [{ type: "text", text: `[called tool ${b.name} with ${JSON.stringify(b.input ?? {})}]` }]
          : b.type === "tool_result"
            ? [
                {
                  type: "text",
                  text: `[result of tool ${b.name ?? b.toolUseId}: ${b.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("")}]`
                }
              ]
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

/** What fusion needs of the pipeline: the guarded attempt, sending, reading failures, answering, and the dispatcher for the judge. */
export interface FusionDeps {
  readonly accounting: AccountingShape
  readonly guarded: InferenceShape["guarded"]
  readonly send: InferenceShape["send"]
  readonly readFailure: (
    res: UpstreamResponse,
    upstream: WireFormat,
    client: WireFormat,
    connection: Connection
  ) => Effect.Effect<{ readonly error: InferenceError; readonly info: FailureInfo }>
  readonly wholeText: (
    res: UpstreamResponse,
    client: WireFormat,
    connection: Connection
  ) => Effect.Effect<string, { readonly error: InferenceError; readonly info: FailureInfo }>
  readonly encodeFor: (
    connection: Connection,
    req: CanonicalRequest
  ) => { readonly format: FormatId; readonly body: Record<string, unknown> }
  /** A panel member's answer as the reply; `costUsd` and `tokens` are the whole panel's. */
  readonly respondWith: (
    call: InferenceCall,
    decoded: CanonicalResponse,
    served: { readonly candidate: Candidate; readonly costUsd: number; readonly tokens: ExtraTokens }
  ) => Effect.Effect<void>
  readonly execute: (call: InferenceCall, plan: RoutePlan, track: Tracking) => Effect.Effect<unknown, InferenceError>
}

/** One panel member's request: the panel's prompt (whole, without tools). */
interface PanelRequest extends AttemptRequest {
  readonly req: CanonicalRequest
}

/** A panel member's answer, decoded. */
interface PanelAnswer extends AttemptOutcome {
  readonly decoded: CanonicalResponse
}

const NO_PROBES: ReadonlySet<string> = new Set()

export const makeFusion = ({ accounting, guarded, send, readFailure, wholeText, encodeFor, respondWith, execute }: FusionDeps) => {
  /** One try of a panel member against one of its candidates: the whole (non-streamed) answer. */
  const tryMember: (member: PanelRequest, c: Candidate) => Effect.Effect<PanelAnswer, AttemptFailed> = Effect.fnUntraced(function* (
    member: PanelRequest,
    c: Candidate
  ) {
    const client = member.format
    const { format, body } = encodeFor(c.connection, { ...member.req, model: c.model, stream: false })
    const upstream = FORMATS[format]
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
    const bad = errorInAnswer(upstream.id, json, text, client, c.connection, "answer")
    if (bad) return yield* Effect.fail(attemptFailed(bad.error, bad.info))
    // Its reasoning state may reach the client as the reply: sealed with its issuer (docs/reasoning-state.md).
    const decoded = sealResponse(upstream.decodeResponse(json), c.connection.id)
    return { status: 200, usage: decoded.usage, ttftMs: null, error: null, headers: headerValue(res.headers), decoded }
  })

  /**
   * One panel member's whole answer, through the guarded attempt over its candidates (a target
   * served by several connections falls back to the next); records the member's own usage row.
   */
  const complete = (call: InferenceCall, candidates: ReadonlyArray<Candidate>, req: CanonicalRequest, hold: Tracking["hold"]) =>
    Effect.suspend(() => {
      const { ctx } = call
      const startedAt = Date.now()
      const track = newTracking(call.model)
      if (hold) track.hold = hold
      // A member's own fallbacks are not the reply's: its fallback header goes on a copy of the context.
      const member: PanelRequest = { ctx: { ...ctx, responseHeaders: {} }, format: call.format, model: call.model, passthrough: false, req }
      const plan: RoutePlan = {
        kind: "direct",
        scope: candidates[0]?.key ?? call.model,
        strategy: "fusion-panel",
        candidates,
        blocked: [],
        probes: NO_PROBES
      }
      const row = (status: number, u: Partial<Usage> | undefined, error: string | null) => {
        const c = track.tried ?? candidates[0]
        return accounting.finish({
          requestId: ctx.requestId,
          apiKeyId: ctx.apiKeyId,
          connectionId: c?.connection.id ?? null,
          provider: c?.connection.provider.id ?? null,
          model: c?.model ?? call.model,
          endpoint: `${call.endpoint}:fusion-panel`,
          stream: false,
          status,
          usage: {
            input: u?.inputTokens ?? null,
            output: u?.outputTokens ?? null,
            cached: u?.cachedInputTokens ?? null,
            reasoning: u?.reasoningTokens ?? null
          },
          latencyMs: Date.now() - startedAt,
          ttftMs: null,
          error,
          fallbackAttempts: track.fallbacks,
          requestedModel: call.model
        })
      }
      // The row of a member that answered is written even if the panel closes meanwhile.
      return Effect.uninterruptibleMask((restore) =>
        restore(guarded(member, plan, track, tryMember)).pipe(
          // Cut off when the panel closed (grace or hard timeout): the call still cost something upstream.
          Effect.onInterrupt(() => row(499, undefined, "panel closed before this member answered")),
          Effect.tapError((e) => row(e.status, undefined, e.message)),
          Effect.flatMap((answer) => Effect.map(row(200, answer.usage, null), (costUsd) => ({ response: answer.decoded, costUsd })))
        )
      )
    })

  /**
   * Fusion (spec document 1): the prompt goes to every panel model in parallel, whole and
   * without tools; once `minPanel` answers are in, stragglers get `stragglerGraceMs`; the panel
   * phase ends at `panelHardTimeoutMs` in any case. No answer: 503; one: that answer; more: the
   * judge synthesises them (anonymised as Source 1, 2, ...) with the client's stream flag and tools.
   */
  const fuse = Effect.fnUntraced(function* (call: InferenceCall, plan: RoutePlan, f: FusionPlan, track: Tracking) {
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
      complete(call, f.members?.[index] ?? [c], panelRequest, track.hold).pipe(
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
            return Effect.all([
              answers.length >= f.minPanel || all ? Deferred.succeed(quorum, undefined) : Effect.void,
              all ? Deferred.succeed(everyone, undefined) : Effect.void
            ])
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
      return yield* Effect.fail(
        clientError(client, {
          status: 503,
          kind: "overloaded",
          message: `the fusion panel of '${plan.scope}' produced no answer`,
          code: "fusion_no_answers"
        })
      )
    }
    track.panelCostUsd = panelCost
    if (got.length === 1) {
      // The panel's row already counts its tokens; this request's row says how it ended.
      track.tried = f.panel[got[0]!.index]
      track.outcome = { status: 200, usage: undefined, ttftMs: null, error: null }
      return yield* respondWith(
        call,
        { ...got[0]!.response, model: call.model },
        { candidate: f.panel[got[0]!.index]!, costUsd: panelCost, tokens: panelTokens }
      )
    }
    const judged: CanonicalRequest = {
      ...canonical,
      system: [...canonical.system, { type: "text", text: fusionBrief(got.map((a) => textOf(a.response.content))) }]
    }
    track.tried = f.judge
    // A judge that fails before answering leaves the panel's first answer as the reply.
    return yield* execute(
      { ...call, decode: () => judged, passthrough: false, extraCostUsd: panelCost, extraTokens: panelTokens },
      { ...plan, candidates: [f.judge], strategy: "fusion" },
      track
    ).pipe(
      Effect.catchAll((e) =>
        committed(ctx)
          ? Effect.fail(e)
          : Effect.zipRight(
              Effect.logWarning(`fusion judge of ${plan.scope} failed (${e.message}); answering with the panel's first answer`),
              Effect.suspend(() => {
                const best = got[0]!
                track.tried = f.panel[best.index]
                track.outcome = { status: 200, usage: undefined, ttftMs: null, error: null }
                return respondWith(
                  call,
                  { ...best.response, model: call.model },
                  { candidate: f.panel[best.index]!, costUsd: panelCost, tokens: panelTokens }
                )
              })
            )
      )
    )
  })

  return { fuse }
}
