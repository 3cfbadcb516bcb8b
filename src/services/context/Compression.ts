import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as path from "node:path"
import type { ContextAnalytics, EngineStep, PreviewPayload } from "../../domain/context.js"
import type { FormatId } from "../../domain/canonical.js"
import { BadRequest, type NotFound } from "../../domain/errors.js"
import { OwnRoutes } from "../../kernel/internalCall.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { Settings, type SettingsShape } from "../../platform/settings/Settings.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Pricing } from "../accounting/Pricing.js"
import { type Applied, makeApply, tokensOf } from "./compression/run.js"
import { makeEngineSettings, type RtkFilters } from "./compression/settings.js"
import { type CompressionRecord, makeCompressionStats } from "./compression/stats.js"
import { makeSummaries, type Summarizer } from "./compression/summaries.js"
import { ContextStore, type ContextStoreShape } from "./ContextStore.js"
import { ENGINES, LANGUAGE_PACKS, rtk, type Rule, RULES } from "./engines/index.js"
import { countText, estimateTokensSync, loadTokenizer, tokenizerFamily } from "./estimate.js"
import { defaultProfile, type Profile, resolveRef } from "./select.js"
import { summarizeThrough } from "./Summarizer.js"
import type { EngineId } from "./types.js"

export { type Applied, type EngineRun, tokensOf } from "./compression/run.js"
export type { RtkFilters } from "./compression/settings.js"
export { RAW_OUTPUT_TTL_MS } from "./compression/stats.js"
export type { Summarizer } from "./compression/summaries.js"

const FLUSH_EVERY = "5 seconds"

export interface CompressionShape {
  /**
   * Before `apply`, for a profile with a `summarize` step in `wait` mode: waits (bounded) for the
   * summary this body needs. Otherwise nothing.
   */
  readonly prepare: (
    format: FormatId,
    endpoint: string,
    body: Readonly<Record<string, unknown>>,
    steps: ReadonlyArray<EngineStep>,
    owner?: string | null
  ) => Effect.Effect<void>
  /** How summaries are made: set by the server (a call of the gateway's own chat completions). */
  readonly setSummarizer: (summarizer: Summarizer | undefined) => void
  /** Runs a profile's steps over a body in its wire format (deterministic). */
  readonly apply: (
    format: FormatId,
    endpoint: string,
    body: Readonly<Record<string, unknown>>,
    steps: ReadonlyArray<EngineStep>,
    owner?: string | null
  ) => Applied
  /** Whether an engine can run (all can; summarize needs its model). */
  readonly available: (engine: EngineId) => boolean
  /** Counts a compressed request (or injected context) for analytics; written in the background. */
  readonly record: (r: CompressionRecord) => void
  readonly analytics: (q: { readonly from?: string; readonly to?: string }) => Effect.Effect<ContextAnalytics, BadRequest>
  readonly preview: (p: PreviewPayload) => Effect.Effect<
    {
      readonly mode: string
      readonly engines: ReadonlyArray<{ engine: string; tokensBefore: number; tokensAfter: number; tokensSaved: number }>
      readonly tokensBefore: number
      readonly tokensAfter: number
      readonly tokenizer: string
      readonly body: Record<string, unknown>
    },
    BadRequest
  >
  /** An engine's configured settings (defaults merged). */
  readonly config: (engine: EngineId) => Effect.Effect<Record<string, unknown>>
  readonly setConfig: (engine: EngineId, input: unknown) => Effect.Effect<Record<string, unknown>, BadRequest>
  /** Checks a combo's steps (each step's settings over the engine's). */
  readonly checkSteps: (steps: ReadonlyArray<EngineStep>) => Effect.Effect<void, BadRequest>
  readonly keepRaw: (text: string) => string
  readonly rawOutput: (id: string) => Effect.Effect<{ id: string; text: string; createdAt: string; expiresAt: string }, NotFound>
  /** Writes what is pending (stats, raw outputs) now. */
  readonly flush: Effect.Effect<void>
  readonly languagePacks: ReadonlyArray<{ readonly id: string; readonly name: string; readonly rules: number }>
  readonly rules: ReadonlyArray<Rule>
  /** rtk's filters: built-in, the configured custom ones, and the project files' (read again now). */
  readonly rtkFilters: Effect.Effect<RtkFilters>
  readonly rtkTest: (p: {
    readonly text: string
    readonly command?: string | undefined
    readonly config?: Readonly<Record<string, unknown>> | undefined
  }) => Effect.Effect<RtkTestAnswer, BadRequest>
}

export interface RtkTestAnswer {
  readonly output: string
  readonly filter: string | null
  readonly linesBefore: number
  readonly linesAfter: number
  readonly tokensBefore: number
  readonly tokensAfter: number
  readonly steps: ReadonlyArray<string>
}

/**
 * The compression engines at work (docs/compression.md): their settings (kv), a profile's steps
 * run over a body of any wire format, the savings per day, engine, combo and model, and the raw
 * tool outputs rtk cut.
 */
export class Compression extends Context.Tag("gateway/Compression")<Compression, CompressionShape>() {
  static readonly layer = Layer.scoped(
    Compression,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const kv = yield* KeyValue
      const settings = yield* Settings
      const store = yield* ContextStore
      const projectDir = process.env["GATEWAY_RTK_FILTERS_DIR"] || path.join((yield* AppConfig).dataDir, "rtk-filters")
      const engines = yield* makeEngineSettings({ kv, flags: yield* FeatureFlags, projectDir })
      const stats = makeCompressionStats({ sql, pricing: yield* Pricing })
      const summaries = makeSummaries({
        kv,
        settings: engines.summarize,
        runFork: yield* FiberSet.runtime(yield* FiberSet.make())<never>()
      })
      const apply = makeApply({ settingsOf: engines.settingsOf, summarize: summaries.step, keepRaw: stats.keepRaw })
      const available = (engine: EngineId) => (engine === "summarize" ? summaries.ready() : ENGINES.has(engine))

      yield* Effect.forkScoped(Effect.repeat(Effect.zipRight(stats.flush, engines.reload), Schedule.spaced(FLUSH_EVERY)))
      yield* Effect.addFinalizer(() => stats.flush)

      return {
        prepare: (format, endpoint, body, steps, owner = null) => summaries.prepare(format, endpoint, body, steps, owner),
        setSummarizer: summaries.setSummarizer,
        apply,
        available,
        record: stats.record,
        analytics: stats.analytics,
        preview: (p) => preview({ store, settings, apply, available }, p),
        config: engines.config,
        setConfig: engines.setConfig,
        checkSteps: (steps) => checkSteps(engines.summarize().model !== null, steps),
        keepRaw: stats.keepRaw,
        rawOutput: stats.rawOutput,
        flush: stats.flush,
        languagePacks: LANGUAGE_PACKS,
        rules: RULES,
        rtkFilters: engines.rtkFilters,
        rtkTest: (p) =>
          Effect.gen(function* () {
            yield* Effect.promise(() => loadTokenizer().catch(() => undefined))
            const c = engines.settingsOf(ENGINES.get("rtk")!, p.config)
            if (Either.isLeft(c)) return yield* new BadRequest({ message: `config: ${c.left}` })
            const r = rtk.test(p.text, p.command, c.right as rtk.RtkConfig)
            return { ...r, steps: [...r.steps], tokensBefore: countText(p.text), tokensAfter: countText(r.output) }
          })
      } satisfies CompressionShape
    })
  )

  /** Gives the summarize engine its summaries through the gateway's own routes once the server listens (Summarizer.ts), and takes them back
   * when it stops. */
  static readonly ownRoutesLayer = Layer.scopedDiscard(
    Effect.gen(function* () {
      const compression = yield* Compression
      compression.setSummarizer(summarizeThrough(yield* OwnRoutes))
      yield* Effect.addFinalizer(() => Effect.sync(() => compression.setSummarizer(undefined)))
    })
  )
}

/** Checks a combo's steps: each engine exists, its settings decode; summarize has its model and no settings of its own. */
const checkSteps = (summarizeHasModel: boolean, steps: ReadonlyArray<EngineStep>) =>
  Effect.forEach(
    steps,
    (step, i) => {
      if (step.engine === "summarize") {
        if (step.config !== undefined && Object.keys(step.config).length > 0)
          return Effect.fail(
            new BadRequest({ message: `engines[${i}].config: summarize takes its settings from PUT /api/context/summarize/config only` })
          )
        return summarizeHasModel
          ? Effect.void
          : Effect.fail(
              new BadRequest({ message: `engines[${i}]: summarize needs a model first (PUT /api/context/summarize/config with "model")` })
            )
      }
      const entry = ENGINES.get(step.engine)
      if (!entry) return Effect.fail(new BadRequest({ message: `engines[${i}]: engine ${step.engine} is not available in this build` }))
      const c = entry.decode(step.config ?? {})
      return Either.isLeft(c) ? Effect.fail(new BadRequest({ message: `engines[${i}].config: ${c.left}` })) : Effect.void
    },
    { discard: true }
  )

/** What a mode (an engine, a combo, `default` or `off`) would make of a body, with tokens before and after. */
const preview = (
  deps: {
    readonly store: ContextStoreShape
    readonly settings: SettingsShape
    readonly apply: CompressionShape["apply"]
    readonly available: (engine: EngineId) => boolean
  },
  p: PreviewPayload
) =>
  Effect.gen(function* () {
    const { store, settings, apply, available } = deps
    yield* Effect.promise(() => loadTokenizer().catch(() => undefined))
    const snapshot = yield* store.snapshot
    const s = settings.current().compression
    const lower = p.mode.trim().toLowerCase()
    const profile: Profile | undefined =
      lower === "off" ? undefined : lower === "default" ? defaultProfile(s, snapshot, available) : resolveRef(p.mode, snapshot, available)
    if (lower !== "off" && !profile)
      return yield* new BadRequest({
        message: `mode: '${p.mode}' names no engine (engine:<id>) or compression combo; 'default' and 'off' also work`
      })
    const endpoint = p.endpoint ?? DEFAULT_ENDPOINT[p.format]
    const before = estimateTokensSync(p.format, endpoint, p.body)
    const applied = profile ? apply(p.format, endpoint, p.body, profile.steps) : { body: undefined, engines: [] }
    const body = applied.body ?? p.body
    const provider = p.model?.split("/")[0]
    return {
      mode: profile?.mode ?? "off",
      engines: applied.engines.map((run) => {
        const t = tokensOf(run)
        return { ...t, tokensSaved: t.tokensBefore - t.tokensAfter }
      }),
      tokensBefore: before,
      tokensAfter: applied.body ? estimateTokensSync(p.format, endpoint, body) : before,
      tokenizer: tokenizerFamily(provider ?? "openai").label,
      body: body as Record<string, unknown>
    }
  })

/** The endpoint label a preview assumes for a format when none is given. */
const DEFAULT_ENDPOINT: Record<FormatId, string> = {
  "openai-chat": "chat.completions",
  "openai-responses": "responses",
  anthropic: "messages",
  gemini: "generateContent",
  ollama: "api.chat"
}
