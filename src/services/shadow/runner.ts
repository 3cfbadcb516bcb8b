/**
 * Shadow traffic's sampling and calls (docs/shadow.md). While a combo's `config.shadow` or the
 * settings' `shadow` names a target, an `onRequest` hook samples each request of that scope;
 * a sampled request gets a capture of its answer as written (its frames, or its whole body).
 * After the answer has gone to the client, the same request (the client's body and path, the
 * model replaced) goes to each sampled target through the gateway's own routes, so it is
 * routed, translated, priced and counted like any request: never before the primary's answer,
 * never changing it. Bounded: a number of shadow calls at once (a sampled request finding none
 * free is skipped), a budget per day, and none while the primary needed a fallback or the
 * target keeps failing (incident). The two answers are compared and the pair stored (`Shadow`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import type { CanonicalResponse, FormatId } from "../../domain/canonical.js"
import type { ShadowTarget } from "../../domain/shadow.js"
import type { HookRequest, RequestEvent, ResponseEvent } from "../../kernel/hookEvents.js"
import { attach, RequestHooks } from "../../kernel/hooks.js"
import { OwnRoutes } from "../../kernel/internalCall.js"
import type { RequestContext } from "../../kernel/request.js"
import { Settings } from "../../platform/settings/Settings.js"
import { StreamCollector } from "../../upstream/formats/collect.js"
import { type Frame, NdjsonParser, SseParser } from "../../upstream/formats/frames.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import { requestedSchema } from "../../upstream/formats/structured.js"
import { checkAnswer, schemaEngines } from "../../kernel/schemaCheck.js"
import { type Combo, Combos } from "../routing/Combos.js"
import { answerOf, canonicalJson, compare } from "./compare.js"
import { Shadow } from "./Shadow.js"

/** How long a sampled shadow call may wait for a moment without client requests. */
const MAX_WAIT_MS = 10_000

/** The header a shadow call carries: it is never shadowed itself. */
export const SHADOW_HEADER = "x-gateway-shadow"

interface Sampled {
  readonly requestId: string
  readonly scope: string
  readonly format: FormatId
  readonly path: string
  /** The request's query string (known once routed). */
  query: string
  readonly body: Readonly<Record<string, unknown>>
  readonly stream: boolean
  readonly targets: ReadonlyArray<ShadowTarget>
  readonly frames: Array<string>
}

/** An answer in a client format, whole or as the text of its stream, read back into the canonical form. */
export const readAnswer = (format: FormatId, text: string, streamed: boolean): CanonicalResponse => {
  const wire = FORMATS[format]
  if (!streamed) return wire.decodeResponse(JSON.parse(text))
  let frames: Array<Frame>
  const trimmed = text.trimStart()
  if (format === "gemini" && trimmed.startsWith("[")) frames = (JSON.parse(trimmed) as Array<unknown>).map((d) => ({ data: JSON.stringify(d) }))
  else if (wire.framing === "ndjson") frames = new NdjsonParser().push(`${text}\n`)
  else frames = new SseParser().push(`${text}\n\n`)
  const decoder = wire.streamDecoder()
  const collector = new StreamCollector()
  for (const f of frames) collector.push(decoder.push(f))
  collector.push(decoder.end())
  return collector.result("shadow")
}

/** The path and body of the same request to another model (Gemini names the model in the path). */
const retarget = (s: Sampled, model: string): { readonly path: string; readonly body: Record<string, unknown> } => {
  const body: Record<string, unknown> = { ...s.body }
  if (s.format === "gemini") {
    const path = s.path.replace(/\/models\/[^/:]+:/, `/models/${encodeURIComponent(model)}:`)
    return { path: `${path}${path.includes(":streamGenerateContent") ? "?alt=sse" : ""}`, body }
  }
  body["model"] = model
  // A Responses request must not make the upstream keep the shadow's answer.
  if (s.format === "openai-responses") body["store"] = false
  return { path: s.path, body }
}

const excerptOf = (body: Readonly<Record<string, unknown>>): string => {
  const text = JSON.stringify(body["messages"] ?? body["input"] ?? body["contents"] ?? body["prompt"] ?? body)
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text
}

const JUDGE_PROMPT = (request: string, a: string, b: string) =>
  `Two assistants answered the same request. Which answer serves the request better? Reply with exactly one word: A, B, or TIE.\n\nRequest:\n${request}\n\nAnswer A:\n${a}\n\nAnswer B:\n${b}`

export const ShadowRunner = Layer.scopedDiscard(
  Effect.gen(function* () {
    const shadow = yield* Shadow
    const settings = yield* Settings
    const combos = yield* Combos
    const hooks = yield* RequestHooks
    const own = yield* OwnRoutes
    const runtime = yield* Effect.runtime<never>()
    const fork = Runtime.runFork(runtime)

    /** Sampled requests between their onRequest and their route (then attached to the request). */
    const pending = new Map<string, Sampled>()
    let inFlight = 0
    /** Sampled shadow calls waiting for a moment without client requests (see `drain`). */
    const waiting: Array<{ readonly at: number; readonly start: () => void }> = []
    /** Client requests in flight (shadow calls themselves not counted). */
    let primaries = 0
    /** Consecutive failures of a target, and until when it is left alone. */
    const failing = new Map<string, { count: number; until: number }>()

    type Scope = { readonly scope: string; readonly targets: ReadonlyArray<ShadowTarget> } | undefined
    const scopeIn = (model: string, combo: Combo | null | undefined): Scope => {
      const own = combo?.config.shadow
      if (combo && own && own.length > 0) return { scope: combo.name, targets: own }
      const global = settings.current().shadow
      return global.length > 0 ? { scope: combo?.name ?? model, targets: global } : undefined
    }

    const call = (path: string, body: unknown, requestId: string) =>
      Effect.promise(async () => {
        const started = Date.now()
        try {
          const res = await own.fetch(path, { body, requestId, onBehalfOf: null, headers: { [SHADOW_HEADER]: "1", "x-gateway-no-cache": "true" } })
          let ttftMs: number | null = null
          let text = ""
          const reader = res.body?.getReader()
          const decoder = new TextDecoder()
          if (reader)
            for (;;) {
              const { done, value } = await reader.read()
              if (done) break
              ttftMs ??= Date.now() - started
              text += decoder.decode(value, { stream: true })
            }
          text += decoder.decode()
          return {
            status: res.status,
            text,
            latencyMs: Date.now() - started,
            ttftMs,
            costUsd: Number(res.headers.get("x-gateway-response-cost") ?? 0) || 0,
            model: res.headers.get("x-gateway-model"),
            tokens: { input: Number(res.headers.get("x-gateway-tokens-in") ?? 0), output: Number(res.headers.get("x-gateway-tokens-out") ?? 0) },
            contentType: res.headers.get("content-type") ?? ""
          }
        } catch (e) {
          return {
            status: 0,
            text: `the gateway could not be reached: ${(e as Error).message}`,
            latencyMs: Date.now() - started,
            ttftMs: null,
            costUsd: 0,
            model: null,
            tokens: null,
            contentType: ""
          }
        }
      })

    const judge = (model: string, request: string, primary: string, candidate: string, requestId: string) =>
      Effect.gen(function* () {
        // The order is drawn, so a judge's taste for the first answer favours neither side.
        const shadowFirst = Math.random() < 0.5
        const [a, b] = shadowFirst ? [candidate, primary] : [primary, candidate]
        const res = yield* call("/v1/chat/completions", { model, stream: false, max_tokens: 8, messages: [{ role: "user", content: JUDGE_PROMPT(request, a, b) }] }, requestId)
        shadow.spend(res.costUsd)
        if (res.status !== 200) return { verdict: null, costUsd: res.costUsd }
        const said = String(JSON.parse(res.text)?.choices?.[0]?.message?.content ?? "")
          .trim()
          .toUpperCase()
        const pick = /^TIE/.test(said) ? "tie" : /^A\b/.test(said) ? "A" : /^B\b/.test(said) ? "B" : undefined
        const verdict = pick === undefined ? null : pick === "tie" ? ("tie" as const) : (pick === "A") === shadowFirst ? ("win" as const) : ("loss" as const)
        return { verdict, costUsd: res.costUsd }
      }).pipe(Effect.catchAllCause(() => Effect.succeed({ verdict: null, costUsd: 0 })))

    const runOne = (s: Sampled, target: ShadowTarget, index: number, primaryText: string, primary: ResponseEvent) =>
      Effect.gen(function* () {
        const options = settings.current().shadowOptions
        const { path, body } = retarget(s, target.model)
        const res = yield* call(`${path}${s.format === "gemini" || s.query === "" ? "" : `?${s.query}`}`, body, `${s.requestId}_shadow_${index}`)
        shadow.spend(res.costUsd)
        const streamed = s.stream && !res.contentType.includes("application/json")
        let error: string | null = null
        let candidate: CanonicalResponse | undefined
        if (res.status !== 200) error = `status ${res.status}: ${res.text.slice(0, 500)}`
        else
          try {
            candidate = readAnswer(s.format, res.text, streamed)
          } catch (e) {
            error = `the shadow answer could not be read: ${(e as Error).message}`
          }
        const f = failing.get(target.model) ?? { count: 0, until: 0 }
        if (error) failing.set(target.model, { count: f.count + 1, until: f.count + 1 >= 3 ? Date.now() + 60_000 : 0 })
        else failing.delete(target.model)

        const primaryAnswer = answerOf(readAnswer(s.format, primaryText, primary.streamed))
        const shadowAnswer = candidate ? answerOf(candidate) : undefined
        const schema = requestedSchema(s.format, s.body as Record<string, unknown>)
        const engines = schema ? yield* Effect.promise(schemaEngines) : undefined
        const valid = (text: string) => (schema && engines ? (checkAnswer(engines, schema, text)?.valid ?? null) : null)
        const comparison = shadowAnswer ? compare(primaryAnswer, shadowAnswer) : { exact: false, normalized: false, tools: null, similarity: 0 }
        const request = excerptOf(s.body)
        const judged =
          shadowAnswer && options.judgeModel && shadow.spentToday() < options.budgetUsdPerDay
            ? yield* judge(options.judgeModel, request, JSON.stringify(primaryAnswer), JSON.stringify(shadowAnswer), `${s.requestId}_judge_${index}`)
            : undefined
        const u = primary.usage
        yield* shadow.record({
          requestId: s.requestId,
          scope: s.scope,
          format: s.format,
          requestExcerpt: request,
          primaryModel: u?.model ?? null,
          shadowModel: target.model,
          primaryAnswer: primaryAnswer.text || JSON.stringify(primaryAnswer.tools),
          shadowAnswer: shadowAnswer ? shadowAnswer.text || JSON.stringify(shadowAnswer.tools) : null,
          shadowError: error,
          primaryLatencyMs: u?.latencyMs ?? null,
          shadowLatencyMs: res.latencyMs,
          primaryTtftMs: u?.ttftMs ?? null,
          shadowTtftMs: streamed ? res.ttftMs : null,
          primaryTokens: u ? { input: u.usage.input ?? 0, output: u.usage.output ?? 0 } : null,
          shadowTokens: res.tokens,
          primaryCostUsd: u?.costUsd ?? null,
          shadowCostUsd: res.costUsd,
          primaryFinish: primaryAnswer.finish,
          shadowFinish: shadowAnswer?.finish ?? null,
          primaryTools: canonicalJson(primaryAnswer.tools),
          shadowTools: canonicalJson(shadowAnswer?.tools ?? []),
          primarySchemaValid: valid(primaryAnswer.text),
          shadowSchemaValid: shadowAnswer ? valid(shadowAnswer.text) : null,
          exact: comparison.exact,
          normalized: comparison.normalized,
          toolsMatch: comparison.tools,
          similarity: comparison.similarity,
          judgeModel: judged ? options.judgeModel : null,
          judgeVerdict: judged?.verdict ?? null,
          judgeCostUsd: judged ? judged.costUsd : null
        })
      })

    /** The primary's answer went out: each sampled target gets the same request, within the bounds. */
    const finish = (s: Sampled, event: ResponseEvent) => {
      if (event.status !== 200) return shadow.skip("primary_failed")
      if ((event.usage?.fallbackAttempts ?? 0) > 0) return shadow.skip("incident")
      const text = event.streamed ? s.frames.join("") : typeof event.body === "string" ? event.body : (event.body?.toString("utf8") ?? "")
      // Nothing of the answer was seen as written (a transport whose frames the capture does not get): nothing to compare.
      if (text === "") return shadow.skip("no_answer")
      const options = settings.current().shadowOptions
      s.targets.forEach((target, index) => {
        if (shadow.spentToday() >= options.budgetUsdPerDay) return shadow.skip("budget")
        if ((failing.get(target.model)?.until ?? 0) > Date.now()) return shadow.skip("incident")
        // Running and waiting together stay within twice the concurrency: beyond, the sample goes.
        if (inFlight + waiting.length >= options.concurrency * 2) return shadow.skip("concurrency")
        waiting.push({
          at: Date.now(),
          start: () => {
            inFlight++
            fork(
              runOne(s, target, index, text, event).pipe(
                Effect.catchAllCause((cause) => Effect.logWarning(`shadow call to ${target.model} failed`, cause)),
                Effect.ensuring(
                  Effect.sync(() => {
                    inFlight--
                    drain()
                  })
                )
              )
            )
          }
        })
      })
      drain()
    }

    /**
     * Shadow calls yield to the gateway's own traffic: one starts only while no client request is
     * in flight (a request's end starts the next), within the concurrency; one that waited
     * longer than MAX_WAIT_MS goes (`busy`). So a shadow call never shares the CPU with a client
     * request that was already there when it began.
     */
    const drain = () => {
      const options = settings.current().shadowOptions
      while (waiting.length > 0 && Date.now() - waiting[0]!.at > MAX_WAIT_MS) {
        waiting.shift()
        shadow.skip("busy")
      }
      while (primaries === 0 && waiting.length > 0 && inFlight < options.concurrency) waiting.shift()!.start()
    }

    const capture = (s: Sampled) => ({
      name: "shadow.capture",
      onFrame: (e: { readonly text: string }) => void s.frames.push(e.text),
      onResponse: (e: ResponseEvent) => void finish(s, e)
    })

    const sample = (found: Scope, event: RequestEvent, request: HookRequest): undefined => {
      if (found === undefined) return undefined
      const targets = found.targets.filter((t) => t.sampleRate > 0 && Math.random() < t.sampleRate)
      if (targets.length === 0) return undefined
      pending.set(request.requestId, {
        requestId: request.requestId,
        scope: found.scope,
        format: event.format,
        path: request.path,
        query: "",
        body: event.body,
        stream: event.stream,
        targets,
        frames: []
      })
      return undefined
    }

    let off: (() => void) | undefined
    const sync = () => {
      const active = settings.current().shadow.length > 0 || (combosSnapshot?.some((c) => (c.config.shadow?.length ?? 0) > 0) ?? false)
      if (active && off === undefined) {
        const offHook = hooks.register({
          name: "shadow.sample",
          // First: the body kept is the client's own, before other hooks change it (they run again on the shadow call).
          priority: 1,
          onRequest: (event, request) => {
            if (request.headers[SHADOW_HEADER] !== undefined) return undefined
            const known = combos.peekByName(event.model)
            // The combos in memory are not known fresh (one just changed): read them first.
            if (known === undefined) return Effect.map(combos.byName(event.model), (combo) => sample(scopeIn(event.model, combo), event, request))
            return sample(scopeIn(event.model, known), event, request)
          }
        })
        const offListener = hooks.listen({
          name: "shadow.capture",
          begin: (ctx: RequestContext) => {
            if (ctx.headers[SHADOW_HEADER] === undefined) primaries++
          },
          routed: (ctx: RequestContext) => {
            const s = pending.get(ctx.requestId)
            if (s === undefined) return
            pending.delete(ctx.requestId)
            s.query = ctx.query.toString()
            attach(ctx, capture(s))
          },
          end: (ctx: RequestContext) => {
            if (pending.size > 0) pending.delete(ctx.requestId)
            if (ctx.headers[SHADOW_HEADER] === undefined && --primaries <= 0) {
              primaries = 0
              if (waiting.length > 0) drain()
            }
          }
        })
        off = () => {
          offHook()
          offListener()
        }
      } else if (!active && off !== undefined) {
        off()
        off = undefined
      }
    }

    let combosSnapshot: ReadonlyArray<{ readonly config: { readonly shadow?: ReadonlyArray<ShadowTarget> | undefined } }> | undefined = yield* combos.list
    sync()
    const unsubscribe = settings.subscribe(() => sync())
    // Combos change through the API, the CLI or another gateway: looked at every second (from memory).
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.flatMap(combos.list, (list) =>
          Effect.sync(() => {
            combosSnapshot = list
            sync()
          })
        ),
        Schedule.spaced("1 second")
      )
    )
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribe()
        off?.()
      })
    )
  })
)
