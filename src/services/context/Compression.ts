import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as FiberSet from "effect/FiberSet"
import * as Duration from "effect/Duration"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { describeParseError } from "../../domain/parse.js"
import { cutOf, type SummarizeConfig as SummarizeSettings, SummarizeConfig, summaryPrompt, withSummary } from "./summarize.js"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { Pricing } from "../accounting/Pricing.js"
import type { ContextAnalytics, EngineStep, PreviewPayload } from "../../domain/context.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { FormatId } from "../../domain/canonical.js"
import { Settings } from "../../platform/settings/Settings.js"
import { toIso } from "../../platform/store/Db.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { ContextStore } from "./ContextStore.js"
import { ENGINES, type EngineEntry, LANGUAGE_PACKS, rtk, type Rule, RULES } from "./engines/index.js"
import { countText, estimateTokensSync, loadTokenizer, tokenizerFamily } from "./estimate.js"
import { defaultProfile, type Profile, resolveRef } from "./select.js"
import type { EngineId, Segment } from "./types.js"
import { mapSegments } from "./walk.js"
import { transaction } from "../../platform/store/dialect.js"

/** How long a raw tool output rtk cut stays retrievable. */
export const RAW_OUTPUT_TTL_MS = 24 * 3_600_000
const FLUSH_EVERY = "5 seconds"
const CONFIG_NAMESPACE = "compression.engines"
/** Summaries by the hash of the model and the transcript they summarise. */
const SUMMARY_NAMESPACE = "compression.summaries"

/** What one engine changed in a request: each changed piece of text, before and after. */
export interface EngineRun {
  readonly engine: EngineId
  readonly pairs: ReadonlyArray<readonly [before: string, after: string]>
}

/** What one request's compression did, per engine (only engines that changed something). */
export interface Applied {
  readonly body: Record<string, unknown> | undefined
  readonly engines: ReadonlyArray<EngineRun>
}

/** Tokens of an engine's changes, before and after. */
export const tokensOf = (run: EngineRun) => {
  let tokensBefore = 0
  let tokensAfter = 0
  for (const [b, a] of run.pairs) {
    tokensBefore += countText(b)
    tokensAfter += countText(a)
  }
  return { engine: run.engine, tokensBefore, tokensAfter }
}

export interface CompressionShape {
  /**
   * Before `apply`, for a profile with a `summarize` step in `wait` mode: waits (bounded) for the
   * summary this body needs. Otherwise nothing.
   */
  readonly prepare: (format: FormatId, endpoint: string, body: Readonly<Record<string, unknown>>, steps: ReadonlyArray<EngineStep>, owner?: string | null) => Effect.Effect<void>
  /** How summaries are made: set by the server (a call of the gateway's own chat completions). */
  readonly setSummarizer: (summarizer: Summarizer | undefined) => void
  /** Runs a profile's steps over a body in its wire format (deterministic). */
  readonly apply: (format: FormatId, endpoint: string, body: Readonly<Record<string, unknown>>, steps: ReadonlyArray<EngineStep>, owner?: string | null) => Applied
  /** Whether an engine can run (all can; summarize needs its model). */
  readonly available: (engine: EngineId) => boolean
  /** Counts a compressed request (or injected context) for analytics; written in the background. */
  readonly record: (r: {
    readonly combo: string
    readonly model: string
    readonly engines: Applied["engines"]
    readonly injected?: { readonly kind: "memory" | "skills"; readonly tokens: number }
    readonly provider?: string | undefined
    readonly upstreamModel?: string | undefined
  }) => void
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

/** Asks `model` for a summary on behalf of `owner` (the API key whose conversation it is): its text, or a failure message. */
export type Summarizer = (model: string, prompt: string, maxTokens: number, owner: string | null) => Effect.Effect<string, string>

export interface RtkFilters {
  readonly filters: ReadonlyArray<{
    readonly id: string
    readonly description: string
    readonly source: "builtin" | "custom" | "project"
    readonly enabled: boolean
    readonly match: unknown
  }>
  readonly project: {
    readonly dir: string
    readonly trusted: boolean
    readonly files: ReadonlyArray<{ readonly file: string; readonly filters: number; readonly errors: ReadonlyArray<string> }>
  }
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

interface StatRow {
  requests: number
  tokensBefore: number
  tokensAfter: number
  savedUsd: number
  injectedTokens: number
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)

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
      const pricing = yield* Pricing
      const settings = yield* Settings
      const store = yield* ContextStore
      const flags = yield* FeatureFlags
      const appConfig = yield* AppConfig

      // Each engine's configured settings, decoded once per change.
      const decodeSummarize = ParseResult.decodeUnknownEither(SummarizeConfig, { onExcessProperty: "error", errors: "all" })
      const encodeSummarize = Schema.encodeSync(SummarizeConfig)
      const SUMMARIZE_DEFAULTS: SummarizeSettings = Schema.decodeUnknownSync(SummarizeConfig)({})
      let summarizeSettings: SummarizeSettings = SUMMARIZE_DEFAULTS
      // Each engine's settings as stored (kv): read at start and again every few seconds, so a
      // change made by another process (or a configuration bundle applied) is picked up.
      const configured = new Map<EngineId, unknown>()
      let storedText = ""
      const reloadConfigs = Effect.gen(function* () {
        const entries = yield* kv.entries(CONFIG_NAMESPACE)
        const text = JSON.stringify([...entries].sort(([a], [b]) => (a < b ? -1 : 1)))
        if (text === storedText) return
        storedText = text
        configured.clear()
        for (const [id, value] of entries) {
          if (id === "summarize") {
            const d = Either.flatMap(
              Either.try(() => JSON.parse(value) as unknown),
              (j) => decodeSummarize(j)
            )
            if (Either.isRight(d)) summarizeSettings = d.right
            else yield* Effect.logWarning("the stored settings of compression engine summarize do not decode; using its defaults")
            continue
          }
          if (!ENGINES.has(id as EngineId)) continue
          try {
            configured.set(id as EngineId, JSON.parse(value))
          } catch {
            yield* Effect.logWarning(`the stored settings of compression engine ${id} are not JSON; using its defaults`)
          }
        }
        if (!entries.some(([id]) => id === "summarize")) summarizeSettings = SUMMARIZE_DEFAULTS
        decoded.clear()
      })
      const decoded = new Map<string, unknown>()
      yield* reloadConfigs
      /** An engine's settings: configured, then a step's own over them; cached by their text. */
      const settingsOf = (entry: EngineEntry, own: Readonly<Record<string, unknown>> | undefined): Either.Either<unknown, string> => {
        const base = configured.get(entry.engine.id)
        const merged = own ? { ...(typeof base === "object" && base !== null ? base : {}), ...own } : (base ?? {})
        const key = `${entry.engine.id}\u0000${JSON.stringify(merged)}`
        const hit = decoded.get(key)
        if (hit !== undefined) return Either.right(hit)
        let d = entry.decode(merged)
        if (Either.isRight(d) && entry.engine.id === "rtk" && project.filters.length > 0) {
          const c = d.right as rtk.RtkConfig
          d = Either.right({ ...c, customFilters: [...c.customFilters, ...project.filters] })
        }
        if (Either.isRight(d)) {
          if (decoded.size > 1000) decoded.clear()
          decoded.set(key, d.right)
        }
        return d
      }

      // ------------------------------------------------------------ rtk's project filter files
      // Each `*.json` of the directory is one project's filters (a list, or { "filters": [...] }),
      // validated (safe regexes, no built-in id) unless GATEWAY_RTK_TRUST_PROJECT_FILTERS; a file
      // with an error is not used at all. Read at start and again when a file or the flag changes.
      const projectDir = process.env["GATEWAY_RTK_FILTERS_DIR"] || path.join(appConfig.dataDir, "rtk-filters")
      let project: { key: string; filters: ReadonlyArray<rtk.FilterSpec>; files: RtkFilters["project"]["files"]; trusted: boolean } = {
        key: "",
        filters: [],
        files: [],
        trusted: false
      }
      const loadProject = Effect.gen(function* () {
        const trusted = yield* flags.enabled("GATEWAY_RTK_TRUST_PROJECT_FILTERS")
        const names = (() => {
          try {
            return fs
              .readdirSync(projectDir)
              .filter((n) => n.endsWith(".json"))
              .sort()
          } catch {
            return []
          }
        })()
        const stamps = names.map((n) => {
          try {
            return `${n}:${fs.statSync(path.join(projectDir, n)).mtimeMs}`
          } catch {
            return n
          }
        })
        const key = `${trusted}|${stamps.join(",")}`
        if (key === project.key) return
        const filters: Array<rtk.FilterSpec> = []
        const files: Array<{ file: string; filters: number; errors: ReadonlyArray<string> }> = []
        for (const n of names) {
          let parsed: unknown
          try {
            parsed = JSON.parse(fs.readFileSync(path.join(projectDir, n), "utf8"))
          } catch (e) {
            files.push({ file: n, filters: 0, errors: [`not JSON: ${(e as Error).message}`] })
            continue
          }
          const r = rtk.parseProjectFilters(parsed, trusted)
          if (r.ok) {
            filters.push(...r.filters)
            files.push({ file: n, filters: r.filters.length, errors: [] })
          } else {
            files.push({ file: n, filters: 0, errors: r.errors })
            yield* Effect.logWarning(`rtk filter file ${n} is not used: ${r.errors.join("; ")}`)
          }
        }
        project = { key, filters, files, trusted }
        decoded.clear()
      })
      yield* loadProject

      // ------------------------------------------------------------ raw outputs
      const pendingRaw = new Map<string, { text: string; at: number }>()
      const keepRaw = (text: string): string => {
        // Named by content: the same output cut again (every later turn) gives the same marker, so
        // the compressed prefix is the same and prompt caches still hit.
        const id = "raw_" + crypto.createHash("sha256").update(text).digest("hex").slice(0, 24)
        pendingRaw.set(id, { text, at: Date.now() })
        return id
      }
      const context = { keepRaw }

      // ------------------------------------------------------------ stats
      const stats = new Map<string, StatRow>()
      const bump = (d: string, engine: string, combo: string, model: string, f: (r: StatRow) => void) => {
        const key = `${d}\u0000${engine}\u0000${combo}\u0000${model}`
        let r = stats.get(key)
        if (!r) stats.set(key, (r = { requests: 0, tokensBefore: 0, tokensAfter: 0, savedUsd: 0, injectedTokens: 0 }))
        f(r)
      }

      const flush = Effect.gen(function* () {
        const now = Date.now()
        for (const u of uncounted.splice(0)) count(u, tokensOf)
        const rows = [...stats]
        stats.clear()
        const raws = [...pendingRaw]
        pendingRaw.clear()
        if (rows.length === 0 && raws.length === 0) return
        yield* transaction(
          sql,
          Effect.gen(function* () {
            for (const [key, r] of rows) {
              const [d, engine, combo, model] = key.split("\u0000") as [string, string, string, string]
              yield* sql`INSERT INTO compression_stats (day, engine, combo, model, requests, tokens_before, tokens_after, saved_usd, injected_tokens)
                VALUES (${d}, ${engine}, ${combo}, ${model}, ${r.requests}, ${r.tokensBefore}, ${r.tokensAfter}, ${r.savedUsd}, ${r.injectedTokens})
                ON CONFLICT (day, engine, combo, model) DO UPDATE SET
                  requests = compression_stats.requests + excluded.requests,
                  tokens_before = compression_stats.tokens_before + excluded.tokens_before,
                  tokens_after = compression_stats.tokens_after + excluded.tokens_after,
                  saved_usd = compression_stats.saved_usd + excluded.saved_usd,
                  injected_tokens = compression_stats.injected_tokens + excluded.injected_tokens`
            }
            for (const [id, r] of raws) {
              yield* sql`INSERT INTO rtk_raw_outputs (id, text, created_at, expires_at) VALUES (${id}, ${r.text}, ${r.at}, ${r.at + RAW_OUTPUT_TTL_MS})
                ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`
            }
          })
        ).pipe(
          Effect.catchAll((e) =>
            Effect.sync(() => {
              // Kept for the next flush (a busy or briefly unreachable database loses nothing).
              for (const [k, r] of rows) {
                const [d, engine, combo, model] = k.split("\u0000") as [string, string, string, string]
                bump(d, engine, combo, model, (x) => {
                  x.requests += r.requests
                  x.tokensBefore += r.tokensBefore
                  x.tokensAfter += r.tokensAfter
                  x.savedUsd += r.savedUsd
                  x.injectedTokens += r.injectedTokens
                })
              }
              for (const [id, r] of raws) if (!pendingRaw.has(id)) pendingRaw.set(id, r)
            }).pipe(Effect.zipRight(Effect.logWarning(`compression stats not written yet: ${e.message}`)))
          )
        )
        yield* sql`DELETE FROM rtk_raw_outputs WHERE expires_at < ${now}`.pipe(Effect.ignore)
      })
      yield* Effect.forkScoped(Effect.repeat(Effect.zipRight(flush, Effect.zipRight(loadProject, reloadConfigs)), Schedule.spaced(FLUSH_EVERY)))
      yield* Effect.addFinalizer(() => flush)

      // ------------------------------------------------------------ summarize
      let summarizer: Summarizer | undefined
      const summaries = new BoundedMap<string, string>({ maxEntries: 1_000 })
      const making = new Map<string, Promise<void>>()
      const fibers = yield* FiberSet.make()
      const runFork = yield* FiberSet.runtime(fibers)<never>()
      const summaryKey = (model: string, transcript: string) => crypto.createHash("sha256").update(model).update("\u0000").update(transcript).digest("hex").slice(0, 40)
      /** The summary of `transcript`, made once (memory, then the database, then the model). */
      const makeSummary = (key: string, model: string, transcript: string, owner: string | null): Promise<void> => {
        const pending = making.get(key)
        if (pending) return pending
        const ask = summarizer
        if (!ask) return Promise.resolve()
        const work = Effect.gen(function* () {
          const stored = yield* kv.get(SUMMARY_NAMESPACE, key)
          if (Option.isSome(stored)) return summaries.set(key, stored.value)
          const text = yield* ask(model, summaryPrompt(transcript), summarizeSettings.maxSummaryTokens, owner)
          if (text.trim().length === 0) return
          summaries.set(key, text)
          yield* kv.set(SUMMARY_NAMESPACE, key, text)
        }).pipe(
          Effect.catchAll((message) => Effect.logWarning(`summary by ${model} not made: ${message}`)),
          Effect.ensuring(Effect.sync(() => making.delete(key)))
        )
        const promise = new Promise<void>((resolve) => runFork(work).addObserver(() => resolve()))
        making.set(key, promise)
        return promise
      }

      const available = (engine: EngineId) => (engine === "summarize" ? summarizeSettings.model !== null && summarizer !== undefined : ENGINES.has(engine))

      /** The summarize step: the older turns replaced by their summary when it is ready; else the body as it is (and the summary on its way). */
      const summarizeStep = (
        format: FormatId,
        endpoint: string,
        body: Readonly<Record<string, unknown>>,
        owner: string | null
      ): { body: Record<string, unknown>; run: EngineRun } | undefined => {
        const c = summarizeSettings
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

      const prepare: CompressionShape["prepare"] = (format, endpoint, body, steps, owner = null) => {
        const c = summarizeSettings
        if (c.mode !== "wait" || c.model === null || !summarizer || !steps.some((s) => s.engine === "summarize")) return Effect.void
        const cut = cutOf(format, endpoint, body, c)
        if (!cut) return Effect.void
        const key = summaryKey(c.model, cut.transcript)
        if (summaries.get(key) !== undefined) return Effect.void
        const model = c.model
        return Effect.promise(() => makeSummary(key, model, cut.transcript, owner)).pipe(Effect.timeout(Duration.millis(c.timeoutMs)), Effect.ignore)
      }

      // A long text (a system prompt, an old tool result) comes back on every turn of a
      // conversation: its result is kept, by engine, settings, segment and text, so each turn does
      // not pay caveman's ~1 ms per KB again. Engines are deterministic, so this changes no output.
      const results = new BoundedMap<string, string>({ maxEntries: 2_000 })
      const CACHED_FROM = 2_000
      const configKeys = new WeakMap<object, string>()
      const configKey = (config: unknown) => {
        if (typeof config !== "object" || config === null) return String(config)
        let k = configKeys.get(config)
        if (k === undefined) configKeys.set(config, (k = crypto.createHash("sha1").update(JSON.stringify(config)).digest("hex")))
        return k
      }
      const runEngine = (entry: EngineEntry, config: unknown, text: string, segment: Segment): string => {
        // rtk is fast and keeps raw outputs as it runs (a cached answer would not renew them).
        if (text.length < CACHED_FROM || entry.engine.id === "rtk") return entry.engine.apply(text, segment, config, context)
        const key = crypto
          .createHash("sha1")
          .update(
            `${entry.engine.id}\u0000${configKey(config)}\u0000${segment.role}\u0000${segment.kind}\u0000${segment.toolName ?? ""}\u0000${segment.command ?? ""}\u0000${segment.turn === segment.turns - 1}\u0000`
          )
          .update(text)
          .digest("hex")
        const hit = results.get(key)
        if (hit !== undefined) return hit
        const out = entry.engine.apply(text, segment, config, context)
        results.set(key, out)
        return out
      }

      const apply: CompressionShape["apply"] = (format, endpoint, input, steps, owner = null) => {
        let body = input
        let summarized: EngineRun | undefined
        if (steps.some((s) => s.engine === "summarize")) {
          const done = summarizeStep(format, endpoint, body, owner)
          if (done) {
            body = done.body
            summarized = done.run
          }
        }
        const runs: Array<{ entry: EngineEntry; config: unknown; pairs: Array<readonly [string, string]> }> = []
        for (const step of steps) {
          const entry = ENGINES.get(step.engine)
          if (!entry) continue
          const c = settingsOf(entry, step.config)
          // A step whose settings no longer decode (an engine's settings changed under a combo) is skipped.
          if (Either.isLeft(c)) continue
          runs.push({ entry, config: c.right, pairs: [] })
        }
        if (runs.length === 0) return summarized ? { body: body as Record<string, unknown>, engines: [summarized] } : { body: undefined, engines: [] }
        const mapped = mapSegments(format, endpoint, body, (text: string, segment: Segment) => {
          let t = text
          for (const r of runs) {
            if (!r.entry.engine.applies(segment)) continue
            const next = runEngine(r.entry, r.config, t, segment)
            if (next !== t) {
              // Counted later (the flush), off the request path: o200k costs milliseconds on a long prompt.
              r.pairs.push([t, next])
              t = next
            }
          }
          return t
        })
        const out = mapped ?? (summarized ? (body as Record<string, unknown>) : undefined)
        const engines = runs.filter((r) => r.pairs.length > 0).map((r): EngineRun => ({ engine: r.entry.engine.id, pairs: r.pairs }))
        return { body: out, engines: summarized ? [summarized, ...engines] : engines }
      }

      // Requests' changes waiting to be counted by the flush; past the bound, counted at once by the
      // approximation (a burst never holds unbounded text).
      const uncounted: Array<{
        readonly d: string
        readonly combo: string
        readonly model: string
        readonly inputPrice: number | undefined
        readonly runs: ReadonlyArray<EngineRun>
      }> = []
      const MAX_UNCOUNTED = 2_000
      const count = (u: (typeof uncounted)[number], tokens: (run: EngineRun) => { tokensBefore: number; tokensAfter: number }) => {
        for (const run of u.runs) {
          const t = tokens(run)
          bump(u.d, run.engine, u.combo, u.model, (x) => {
            x.requests++
            x.tokensBefore += t.tokensBefore
            x.tokensAfter += t.tokensAfter
            x.savedUsd += u.inputPrice !== undefined ? ((t.tokensBefore - t.tokensAfter) * u.inputPrice) / 1_000_000 : 0
          })
        }
      }
      const approximately = (run: EngineRun) => {
        let tokensBefore = 0
        let tokensAfter = 0
        for (const [b, a] of run.pairs) {
          tokensBefore += Math.ceil(b.length / 4)
          tokensAfter += Math.ceil(a.length / 4)
        }
        return { tokensBefore, tokensAfter }
      }

      const record: CompressionShape["record"] = (r) => {
        const d = day(Date.now())
        if (r.engines.length > 0) {
          const price = r.provider && r.upstreamModel ? pricing.priceOf(r.provider, r.upstreamModel) : undefined
          const u = { d, combo: r.combo, model: r.model, inputPrice: price?.input, runs: r.engines }
          if (uncounted.length < MAX_UNCOUNTED) uncounted.push(u)
          else count(u, approximately)
        }
        if (r.injected && r.injected.tokens > 0) {
          bump(d, r.injected.kind, "-", r.model, (x) => {
            x.requests++
            x.injectedTokens += r.injected!.tokens
          })
        }
      }

      const analytics: CompressionShape["analytics"] = (q) =>
        Effect.gen(function* () {
          const to = q.to ?? day(Date.now())
          const from = q.from ?? day(Date.now() - 29 * 86_400_000)
          if (Number.isNaN(Date.parse(from)) || Number.isNaN(Date.parse(to))) return yield* new BadRequest({ message: "from and to must be real days (YYYY-MM-DD)" })
          if (from > to) return yield* new BadRequest({ message: `from (${from}) is after to (${to})` })
          yield* flush
          const rows = yield* sql<{
            day: string
            engine: string
            combo: string
            model: string
            requests: number
            tokens_before: number
            tokens_after: number
            saved_usd: number
            injected_tokens: number
          }>`
            SELECT * FROM compression_stats WHERE day >= ${from} AND day <= ${to} ORDER BY day, engine, combo, model`.pipe(Effect.orDie)
          const zero = () => ({ requests: 0, tokensBefore: 0, tokensAfter: 0, tokensSaved: 0, savedUsd: 0, injectedTokens: 0 })
          const add = (a: ReturnType<typeof zero>, r: (typeof rows)[number]) => {
            a.requests += Number(r.requests)
            a.tokensBefore += Number(r.tokens_before)
            a.tokensAfter += Number(r.tokens_after)
            a.tokensSaved += Number(r.tokens_before) - Number(r.tokens_after)
            a.savedUsd += Number(r.saved_usd)
            a.injectedTokens += Number(r.injected_tokens)
          }
          const group = <K extends string>(field: "engine" | "combo" | "model" | "day", name: K) => {
            const m = new Map<string, ReturnType<typeof zero>>()
            for (const r of rows) {
              let a = m.get(r[field])
              if (!a) m.set(r[field], (a = zero()))
              add(a, r)
            }
            return [...m].map(([k, v]) => ({ [name]: k, ...v }) as { [P in K]: string } & ReturnType<typeof zero>)
          }
          const totals = zero()
          for (const r of rows) add(totals, r)
          return {
            from,
            to,
            rows: rows.map((r) => {
              const a = zero()
              add(a, r)
              return { day: r.day, engine: r.engine, combo: r.combo, model: r.model, ...a }
            }),
            totals,
            byEngine: group("engine", "engine"),
            byCombo: group("combo", "combo"),
            byModel: group("model", "model"),
            byDay: group("day", "day")
          }
        })

      const checkSteps: CompressionShape["checkSteps"] = (steps) =>
        Effect.forEach(
          steps,
          (step, i) => {
            if (step.engine === "summarize") {
              if (step.config !== undefined && Object.keys(step.config).length > 0)
                return Effect.fail(new BadRequest({ message: `engines[${i}].config: summarize takes its settings from PUT /api/context/summarize/config only` }))
              return summarizeSettings.model === null
                ? Effect.fail(new BadRequest({ message: `engines[${i}]: summarize needs a model first (PUT /api/context/summarize/config with "model")` }))
                : Effect.void
            }
            const entry = ENGINES.get(step.engine)
            if (!entry) return Effect.fail(new BadRequest({ message: `engines[${i}]: engine ${step.engine} is not available in this build` }))
            const c = entry.decode(step.config ?? {})
            return Either.isLeft(c) ? Effect.fail(new BadRequest({ message: `engines[${i}].config: ${c.left}` })) : Effect.void
          },
          { discard: true }
        )

      const preview: CompressionShape["preview"] = (p) =>
        Effect.gen(function* () {
          yield* Effect.promise(() => loadTokenizer().catch(() => undefined))
          const snapshot = yield* store.snapshot
          const s = settings.current().compression
          const lower = p.mode.trim().toLowerCase()
          const profile: Profile | undefined = lower === "off" ? undefined : lower === "default" ? defaultProfile(s, snapshot, available) : resolveRef(p.mode, snapshot, available)
          if (lower !== "off" && !profile)
            return yield* new BadRequest({ message: `mode: '${p.mode}' names no engine (engine:<id>) or compression combo; 'default' and 'off' also work` })
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

      return {
        prepare,
        setSummarizer: (f) => {
          summarizer = f
        },
        apply,
        available,
        record,
        analytics,
        preview,
        config: (engine) =>
          Effect.sync(() => {
            if (engine === "summarize") return encodeSummarize(summarizeSettings) as Record<string, unknown>
            const entry = ENGINES.get(engine)!
            const c = settingsOf(entry, undefined)
            return (Either.isRight(c) ? entry.encode(c.right) : entry.encode(Either.getOrThrow(entry.decode({})))) as Record<string, unknown>
          }),
        setConfig: (engine, input) =>
          Effect.gen(function* () {
            if (engine === "summarize") {
              const d = decodeSummarize(input)
              if (Either.isLeft(d)) return yield* new BadRequest({ message: describeParseError(new ParseResult.ParseError({ issue: d.left })) })
              const encoded = encodeSummarize(d.right) as Record<string, unknown>
              yield* kv.set(CONFIG_NAMESPACE, "summarize", JSON.stringify(encoded))
              summarizeSettings = d.right
              return encoded
            }
            const entry = ENGINES.get(engine)!
            const d = entry.decode(input)
            if (Either.isLeft(d)) return yield* new BadRequest({ message: d.left })
            const encoded = entry.encode(d.right) as Record<string, unknown>
            yield* kv.set(CONFIG_NAMESPACE, engine, JSON.stringify(encoded))
            configured.set(engine, encoded)
            decoded.clear()
            return encoded
          }),
        checkSteps,
        keepRaw,
        rawOutput: (id) =>
          Effect.gen(function* () {
            const pending = pendingRaw.get(id)
            if (pending) return { id, text: pending.text, createdAt: toIso(pending.at)!, expiresAt: toIso(pending.at + RAW_OUTPUT_TTL_MS)! }
            const rows = yield* sql<{
              id: string
              text: string
              created_at: number
              expires_at: number
            }>`SELECT * FROM rtk_raw_outputs WHERE id = ${id} AND expires_at >= ${Date.now()}`.pipe(Effect.orDie)
            const r = rows[0]
            if (!r) return yield* new NotFound({ message: `no raw output '${id}' (raw outputs are kept ${RAW_OUTPUT_TTL_MS / 3_600_000} hours)` })
            return { id: r.id, text: r.text, createdAt: toIso(Number(r.created_at))!, expiresAt: toIso(Number(r.expires_at))! }
          }),
        flush,
        languagePacks: LANGUAGE_PACKS,
        rules: RULES,
        rtkFilters: Effect.gen(function* () {
          yield* loadProject
          const entry = ENGINES.get("rtk")!
          const c = settingsOf(entry, undefined)
          const config = (Either.isRight(c) ? c.right : rtk.DEFAULT_RTK_CONFIG) as rtk.RtkConfig
          const enabled = (id: string, builtin: boolean) => !config.disabledFilters.includes(id) && (!builtin || config.filters.includes(id))
          const projectIds = new Set(project.filters.map((f) => f.id))
          return {
            filters: [
              ...config.customFilters.map((f) => ({
                id: f.id,
                description: f.description,
                source: projectIds.has(f.id) ? ("project" as const) : ("custom" as const),
                enabled: enabled(f.id, false),
                match: f.match
              })),
              ...rtk.listFilters().map((f) => ({ ...f, source: "builtin" as const, enabled: enabled(f.id, true) }))
            ],
            project: { dir: projectDir, trusted: project.trusted, files: project.files }
          }
        }),
        rtkTest: (p) =>
          Effect.gen(function* () {
            yield* Effect.promise(() => loadTokenizer().catch(() => undefined))
            const entry = ENGINES.get("rtk")!
            const c = settingsOf(entry, p.config)
            if (Either.isLeft(c)) return yield* new BadRequest({ message: `config: ${c.left}` })
            const r = rtk.test(p.text, p.command, c.right as rtk.RtkConfig)
            return { ...r, steps: [...r.steps], tokensBefore: countText(p.text), tokensAfter: countText(r.output) }
          })
      } satisfies CompressionShape
    })
  )
}

/** The endpoint label a preview assumes for a format when none is given. */
const DEFAULT_ENDPOINT: Record<FormatId, string> = {
  "openai-chat": "chat.completions",
  "openai-responses": "responses",
  anthropic: "messages",
  gemini: "generateContent",
  ollama: "api.chat"
}
