/**
 * Inputs a model cannot take (docs/bridge.md): a request's image, audio or PDF parts described by a
 * bridge model through the gateway's own routes, for the targets of its plan that cannot take them,
 * after the targets that can (the plan reordered, stable). Off (no bridge configured): one check.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"
import { type BridgeModels, bridgeModelOf, type ComboBridge, type Modality, takes } from "../../domain/bridge.js"
import { kindOf } from "../../domain/catalog/catalog.js"
import { attemptFailed, type AttemptOutcome } from "../../kernel/attempts.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import { clientError, type InferenceError } from "../../kernel/errors.js"
import { bindOwnRoutes, type OwnRoutesShape, type TakesOwnRoutes } from "../../kernel/internalCall.js"
import { Settings } from "../../platform/settings/Settings.js"
import { type Combo, Combos } from "../../services/routing/Combos.js"
import type { RoutePlan } from "../../services/routing/plan.js"
import { Router } from "../../services/routing/Router.js"
import type { Candidate } from "../../services/routing/types.js"
import type { InferenceCall } from "../call.js"
import type { TryCandidate } from "../fallback.js"
import { NO_FEATURES } from "../planning.js"
import { bridgedText, type MediaPart, type MediaSource, mediaParts, withTexts } from "./media.js"

/** The answer header naming what was bridged: `image; model=<bridge model>`, one value per modality. */
export const BRIDGE_HEADER = "x-gateway-bridge"
/** Descriptions kept for the process, by content hash: a conversation that resends an image does not pay again. */
export const CACHE_ENTRIES = 1000
/** The marker of a bridge's own call in its request id (`<request>_bridge_<n>`): its parts are never bridged again. */
const OWN_CALL = "_bridge_"

/** What the bridge model is asked for each modality. */
export const PROMPTS: Readonly<Record<Modality, string>> = {
  image:
    "Describe this image faithfully and in detail for a reader who cannot see it: every visible element, its position, colours, any text exactly as written, charts and their values, and what the image shows as a whole. Answer with the description only.",
  audio:
    "Transcribe this audio faithfully, word for word, in its original language. Mark speakers when there are several and note relevant non-speech sounds in brackets. Answer with the transcript only.",
  pdf: "Give the full text content of this PDF document faithfully, in reading order, keeping its layout as Markdown: headings, paragraphs, lists, tables (as Markdown tables), and captions; describe figures briefly in brackets. Answer with the content only."
}

/** A bridge model that could not describe a part. */
class BridgeFailed {
  readonly _tag = "BridgeFailed"
  constructor(
    readonly model: string,
    readonly modality: Modality,
    readonly message: string
  ) {}
}

export interface BridgesShape extends TakesOwnRoutes {
  /** The gateway's default bridge models (the settings' `bridge`). */
  readonly defaults: () => BridgeModels
  /** Whether a bridge is configured anywhere (the settings' default or a combo's): the one check requests pay when none is. */
  readonly on: () => boolean
  /** Whether `call` may be bridged: a bridge is on and its body has media parts (the common path leaves it to the pipeline). */
  readonly wants: (call: InferenceCall) => boolean
  /**
   * The plan and try for `call` when bridging applies (a bridged modality among its parts): the plan
   * with the targets that take every such modality first, and a try that hands the others the
   * request with those parts described. Undefined: the plan and try as they are.
   */
  readonly prepare: <A extends AttemptOutcome>(
    call: InferenceCall,
    plan: RoutePlan,
    attempt: TryCandidate<InferenceCall, A>
  ) => Effect.Effect<{ readonly plan: RoutePlan; readonly attempt: TryCandidate<InferenceCall, A> } | undefined>
}

/**
 * Whether `candidate` gets a part of `modality` of `call` as sent: its model takes the modality and,
 * for audio and PDFs, which have no canonical form (docs/formats.md), the body reaches it as the
 * client sent it (the connection speaks the client's format); translated, such a part would be lost.
 */
export const takesHere = (call: InferenceCall, candidate: Candidate, modality: Modality): boolean =>
  takes(candidate.spec?.capabilities, modality) &&
  (modality === "image" || ((call.passthrough ?? true) && candidate.connection.formats.includes(call.format.id)))

/** The plan with the candidates that take every modality of `modalities` first, in their order, then the others in theirs. */
export const nativeFirst = (call: InferenceCall, plan: RoutePlan, modalities: ReadonlyArray<Modality>): RoutePlan => {
  const able = (c: Candidate) => modalities.every((m) => takesHere(call, c, m))
  const native = plan.candidates.filter(able)
  if (native.length === 0 || native.length === plan.candidates.length) return plan
  return { ...plan, candidates: [...native, ...plan.candidates.filter((c) => !able(c))] }
}

const hashOf = (modality: Modality, model: string, source: MediaSource): string =>
  crypto
    .createHash("sha256")
    .update(`${modality}\0${model}\0`)
    .update(source.kind === "data" ? source.data : source.url)
    .digest("hex")

/** The part as an OpenAI chat content part, as the bridge model is asked with it. */
const chatPart = (modality: Modality, source: MediaSource): unknown => {
  if (modality === "image")
    return { type: "image_url", image_url: { url: source.kind === "url" ? source.url : `data:${source.mediaType};base64,${source.data}` } }
  if (source.kind === "url") return undefined
  if (modality === "audio") {
    const format = source.mediaType
      .replace(/^audio\//, "")
      .replace(/^mpeg$/, "mp3")
      .replace(/^x-wav$/, "wav")
    return { type: "input_audio", input_audio: { data: source.data, format } }
  }
  return {
    type: "file",
    file: { filename: source.filename ?? "document.pdf", file_data: `data:${source.mediaType};base64,${source.data}` }
  }
}

/** The text of an OpenAI chat completion (a string, or its text parts). */
const answerText = (answer: unknown): string | undefined => {
  const content = (answer as { choices?: Array<{ message?: { content?: unknown } }> })?.choices?.[0]?.message?.content
  if (typeof content === "string") return content
  if (Array.isArray(content))
    return content
      .map((p) =>
        typeof p === "object" && p !== null && typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : ""
      )
      .join("")
  return undefined
}

/** The message of an error answer of the own routes (`{error: {message}}`), or its status. */
const failureText = async (res: Response): Promise<string> => {
  const text = await res.text().catch(() => "")
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } })?.error?.message
    if (typeof message === "string") return `${res.status}: ${message}`
  } catch {}
  return `${res.status}${text ? `: ${text.slice(0, 300)}` : ""}`
}

export class Bridges extends Context.Tag("gateway/Bridges")<Bridges, BridgesShape>() {
  static readonly layer = Layer.effect(
    Bridges,
    Effect.gen(function* () {
      const settings = yield* Settings
      const combos = yield* Combos
      const router = yield* Router
      let own: OwnRoutesShape | undefined
      const cache = new BoundedMap<string, string>({ maxEntries: CACHE_ENTRIES, order: "lru" })

      // `on`, kept per settings document and combos snapshot (both replaced on change, never mutated).
      let seenDefaults: BridgeModels | undefined
      let seenCombos: ReadonlyArray<Combo> | undefined
      let lastCombos = false
      let isOn = false
      const anyBridge = (b: Partial<Record<Modality, string | null | undefined>> | undefined) =>
        b !== undefined && (typeof b.image === "string" || typeof b.audio === "string" || typeof b.pdf === "string")
      const on = (): boolean => {
        const defaults = settings.current().bridge
        const all = combos.peekAll()
        if (defaults === seenDefaults && (all === undefined || all === seenCombos)) return isOn
        if (all !== undefined && all !== seenCombos) {
          seenCombos = all
          lastCombos = all.some((c) => anyBridge(c.config.bridge))
        }
        seenDefaults = defaults
        isOn = anyBridge(defaults) || lastCombos
        return isOn
      }

      const wants = (call: InferenceCall): boolean => on() && mediaParts(call.format.id, call.body).length > 0

      const comboBridge = (plan: RoutePlan): Effect.Effect<ComboBridge | undefined> => {
        if (plan.kind !== "combo") return Effect.succeed(undefined)
        const known = combos.peekByName(plan.scope)
        if (known !== undefined) return Effect.succeed(known?.config.bridge)
        return Effect.map(combos.byName(plan.scope), (c) => c?.config.bridge)
      }

      /** Whether the bridge model is a transcription model (audio then goes to /v1/audio/transcriptions). */
      const transcribes = (model: string): Effect.Effect<boolean> =>
        Effect.map(Effect.either(router.plan(model, { features: () => NO_FEATURES(undefined) })), (p) => {
          if (p._tag === "Left") return false
          const first = p.right.candidates[0] ?? p.right.blocked[0]?.candidate
          return first !== undefined && kindOf(first.connection.provider, first.model) === "transcription"
        })

      /** One call to the bridge model through the own routes: the part's description. */
      const ask = async (
        routes: OwnRoutesShape,
        call: InferenceCall,
        model: string,
        modality: Modality,
        source: MediaSource,
        requestId: string,
        transcription: boolean
      ): Promise<string> => {
        const base = { onBehalfOf: call.ctx.apiKeyId, requestId }
        if (transcription && source.kind === "data") {
          const form = new FormData()
          const ext = source.mediaType.replace(/^audio\//, "").replace(/^mpeg$/, "mp3")
          form.append("model", model)
          form.append("file", new Blob([Buffer.from(source.data, "base64")], { type: source.mediaType }), `audio.${ext}`)
          const res = await routes.fetch("/v1/audio/transcriptions", { ...base, body: form })
          if (!res.ok) throw new BridgeFailed(model, modality, await failureText(res))
          const text = ((await res.json()) as { text?: unknown }).text
          if (typeof text !== "string") throw new BridgeFailed(model, modality, "the transcription had no text")
          return text
        }
        const part = chatPart(modality, source)
        if (part === undefined)
          throw new BridgeFailed(model, modality, `a ${modality} given by URL cannot be sent to a bridge model; send it inline`)
        const res = await routes.fetch("/v1/chat/completions", {
          ...base,
          body: {
            model,
            stream: false,
            messages: [
              { role: "system", content: PROMPTS[modality] },
              { role: "user", content: [part] }
            ]
          }
        })
        if (!res.ok) throw new BridgeFailed(model, modality, await failureText(res))
        const text = answerText(await res.json())
        if (text === undefined || text.trim() === "") throw new BridgeFailed(model, modality, "the answer had no text")
        return text.trim()
      }

      const prepare = <A extends AttemptOutcome>(call: InferenceCall, plan: RoutePlan, attempt: TryCandidate<InferenceCall, A>) =>
        Effect.gen(function* () {
          if (!on() || call.ctx.requestId.includes(OWN_CALL)) return undefined
          const parts = mediaParts(call.format.id, call.body)
          if (parts.length === 0) return undefined
          const defaults = settings.current().bridge
          const combo = yield* comboBridge(plan)
          const models = new Map<Modality, string>()
          for (const p of parts) {
            const model = bridgeModelOf(p.modality, defaults, combo)
            if (model !== null) models.set(p.modality, model)
          }
          if (models.size === 0) return undefined
          const bridgedModalities = [...models.keys()]
          let counter = 0
          const described = new Map<string, Promise<string>>()

          /** A part's description: from the cache, or one bridge call (once per request for the same content). */
          const describe = (part: MediaPart, model: string) =>
            Effect.gen(function* () {
              const key = hashOf(part.modality, model, part.source)
              const kept = cache.get(key)
              if (kept !== undefined) return kept
              const routes = own
              if (routes === undefined) return yield* Effect.fail(new BridgeFailed(model, part.modality, "the gateway is not serving yet"))
              let pending = described.get(key)
              if (pending === undefined) {
                const transcription = part.modality === "audio" && (yield* transcribes(model))
                const requestId = `${call.ctx.requestId.slice(0, 80)}${OWN_CALL}${++counter}`
                pending = ask(routes, call, model, part.modality, part.source, requestId, transcription)
                described.set(key, pending)
              }
              const p = pending
              const text = yield* Effect.tryPromise({
                try: () => p,
                catch: (e) => (e instanceof BridgeFailed ? e : new BridgeFailed(model, part.modality, String(e)))
              })
              cache.set(key, text)
              return text
            })

          /** The call with the parts of `lacking` described, once per set of modalities. */
          const bridgedCalls = new Map<string, Effect.Effect<InferenceCall, InferenceError>>()
          const bridgedFor = (lacking: ReadonlyArray<Modality>) => {
            const key = lacking.join(",")
            let made = bridgedCalls.get(key)
            if (made === undefined) {
              const chosen = parts.filter((p) => lacking.includes(p.modality))
              made = Effect.cached(
                Effect.map(
                  Effect.forEach(
                    chosen,
                    (part) =>
                      Effect.map(describe(part, models.get(part.modality)!), (d) => ({ part, text: bridgedText(part.modality, d) })),
                    {
                      concurrency: 4
                    }
                  ),
                  (texts): InferenceCall => {
                    call.ctx.responseHeaders[BRIDGE_HEADER] = lacking.map((m) => `${m}; model=${models.get(m)}`).join(", ")
                    return { ...call, body: withTexts(call.format.id, call.body, texts) }
                  }
                ).pipe(
                  Effect.mapError((e: BridgeFailed) =>
                    clientError(call.format, {
                      status: 502,
                      kind: "upstream",
                      code: "bridge_failed",
                      message: `the bridge model '${e.model}' could not describe the request's ${e.modality} for a target that cannot take it: ${e.message}`
                    })
                  )
                )
              ).pipe(Effect.runSync)
              bridgedCalls.set(key, made)
            }
            return made
          }

          const bridgedAttempt: TryCandidate<InferenceCall, A> = (request, candidate, options) => {
            const lacking = bridgedModalities.filter((m) => !takesHere(call, candidate, m))
            if (lacking.length === 0) {
              delete request.ctx.responseHeaders[BRIDGE_HEADER]
              return attempt(request, candidate, options)
            }
            return Effect.flatMap(
              Effect.mapError(bridgedFor(lacking), (e) => attemptFailed(e, undefined)),
              (bridged) => attempt(bridged, candidate, options)
            )
          }
          return { plan: nativeFirst(call, plan, bridgedModalities), attempt: bridgedAttempt }
        })

      return {
        setOwnRoutes: (routes) => {
          own = routes
        },
        defaults: () => settings.current().bridge,
        on,
        wants,
        prepare
      }
    })
  )

  /** Gives the service the own routes once the server listens. */
  static readonly ownRoutesLayer = bindOwnRoutes(Bridges)
}
