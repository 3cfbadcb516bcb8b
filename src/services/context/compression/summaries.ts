import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as crypto from "node:crypto"
import type { FormatId } from "../../../domain/canonical.js"
import type { EngineStep } from "../../../domain/context.js"
import { BoundedMap } from "../../../kernel/BoundedMap.js"
import type { KeyValueShape } from "../../../platform/store/KeyValue.js"
import { cutOf, type SummarizeConfig as SummarizeSettings, summaryPrompt, withSummary } from "../summarize.js"
import type { EngineRun } from "./run.js"

/** Summaries by the hash of the model and the transcript they summarise. */
const SUMMARY_NAMESPACE = "compression.summaries"

/** Asks `model` for a summary on behalf of `owner` (the API key whose conversation it is): its text, or a failure message. */
export type Summarizer = (model: string, prompt: string, maxTokens: number, owner: string | null) => Effect.Effect<string, string>

const summaryKey = (model: string, transcript: string) =>
  crypto.createHash("sha256").update(model).update("\u0000").update(transcript).digest("hex").slice(0, 40)

/**
 * The summarize engine (docs/compression.md): the older turns of a conversation replaced by a
 * summary a model made once (memory, then the database, then the model), in the background or,
 * in `wait` mode, before the request goes on (bounded).
 */
export const makeSummaries = (deps: {
  readonly kv: KeyValueShape
  /** Summarize's settings now. */
  readonly settings: () => SummarizeSettings
  /** Runs a summary's making in the background, in the service's scope. */
  readonly runFork: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
}) => {
  const { kv, settings, runFork } = deps
  let summarizer: Summarizer | undefined
  const summaries = new BoundedMap<string, string>({ maxEntries: 1_000 })
  const making = new Map<string, Promise<void>>()

  /** The summary of `transcript`, made once. */
  const makeSummary = (key: string, model: string, transcript: string, owner: string | null): Promise<void> => {
    const pending = making.get(key)
    if (pending) return pending
    const ask = summarizer
    if (!ask) return Promise.resolve()
    const work = Effect.gen(function* () {
      const stored = yield* kv.get(SUMMARY_NAMESPACE, key)
      if (Option.isSome(stored)) return summaries.set(key, stored.value)
      const text = yield* ask(model, summaryPrompt(transcript), settings().maxSummaryTokens, owner)
      if (text.trim().length === 0) return
      summaries.set(key, text)
      yield* kv.set(SUMMARY_NAMESPACE, key, text)
    }).pipe(
      Effect.catchAll((message) => Effect.logWarning(`summary by ${model} not made: ${message}`)),
      Effect.asVoid,
      Effect.ensuring(Effect.sync(() => making.delete(key)))
    )
    const promise = new Promise<void>((resolve) => runFork(work).addObserver(() => resolve()))
    making.set(key, promise)
    return promise
  }

  /** Whether summaries can be made: a model set and a summarizer. */
  const ready = () => settings().model !== null && summarizer !== undefined

  /** The older turns replaced by their summary when it is ready; else undefined (and the summary on its way). */
  const step = (
    format: FormatId,
    endpoint: string,
    body: Readonly<Record<string, unknown>>,
    owner: string | null
  ): { body: Record<string, unknown>; run: EngineRun } | undefined => {
    const c = settings()
    if (c.model === null || !summarizer) return undefined
    const cut = cutOf(format, endpoint, body, c)
    if (!cut) return undefined
    const key = summaryKey(c.model, cut.transcript)
    const summary = summaries.get(key)
    if (summary === undefined) {
      void makeSummary(key, c.model, cut.transcript, owner)
      return undefined
    }
    return { body: withSummary(format, body, cut, summary), run: { engine: "summarize", pairs: [[cut.transcript, summary]] } }
  }

  /** For a profile with a summarize step in `wait` mode: waits (bounded) for the summary this body needs. */
  const prepare = (
    format: FormatId,
    endpoint: string,
    body: Readonly<Record<string, unknown>>,
    steps: ReadonlyArray<EngineStep>,
    owner: string | null
  ) => {
    const c = settings()
    if (c.mode !== "wait" || c.model === null || !summarizer || !steps.some((s) => s.engine === "summarize")) return Effect.void
    const cut = cutOf(format, endpoint, body, c)
    if (!cut) return Effect.void
    const key = summaryKey(c.model, cut.transcript)
    if (summaries.get(key) !== undefined) return Effect.void
    const model = c.model
    return Effect.promise(() => makeSummary(key, model, cut.transcript, owner)).pipe(
      Effect.timeout(Duration.millis(c.timeoutMs)),
      Effect.ignore
    )
  }

  return {
    ready,
    step,
    prepare,
    setSummarizer: (f: Summarizer | undefined) => {
      summarizer = f
    }
  }
}
