import * as Either from "effect/Either"
import * as crypto from "node:crypto"
import type { FormatId } from "../../../domain/canonical.js"
import type { EngineStep } from "../../../domain/context.js"
import { BoundedMap } from "../../../kernel/BoundedMap.js"
import { ENGINES, type EngineEntry } from "../engines/index.js"
import { countText } from "../estimate.js"
import type { EngineId, Segment } from "../types.js"
import { mapSegments } from "../walk.js"

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

/** Texts shorter than this are compressed again each time (cheaper than hashing them). */
const CACHED_FROM = 2_000

/**
 * Runs a profile's steps over a body in its wire format (deterministic). A long text (a system
 * prompt, an old tool result) comes back on every turn of a conversation: its result is kept, by
 * engine, settings, segment and text, so each turn does not pay caveman's ~1 ms per KB again.
 */
export const makeApply = (deps: {
  /** An engine's settings with a step's own over them (Left: they do not decode). */
  readonly settingsOf: (entry: EngineEntry, own: Readonly<Record<string, unknown>> | undefined) => Either.Either<unknown, string>
  /** The summarize step's result for the body, when its summary is ready. */
  readonly summarize: (
    format: FormatId,
    endpoint: string,
    body: Readonly<Record<string, unknown>>,
    owner: string | null
  ) => { body: Record<string, unknown>; run: EngineRun } | undefined
  readonly keepRaw: (text: string) => string
}) => {
  const { settingsOf, summarize, keepRaw } = deps
  const context = { keepRaw }
  const results = new BoundedMap<string, string>({ maxEntries: 2_000 })
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

  return (
    format: FormatId,
    endpoint: string,
    input: Readonly<Record<string, unknown>>,
    steps: ReadonlyArray<EngineStep>,
    owner: string | null = null
  ): Applied => {
    let body = input
    let summarized: EngineRun | undefined
    if (steps.some((s) => s.engine === "summarize")) {
      const done = summarize(format, endpoint, body, owner)
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
    if (runs.length === 0)
      return summarized ? { body: body as Record<string, unknown>, engines: [summarized] } : { body: undefined, engines: [] }
    const mapped = mapSegments(format, endpoint, body, (text: string, segment: Segment) => {
      let t = text
      for (const r of runs) {
        if (!r.entry.engine.applies(segment)) continue
        const next = runEngine(r.entry, r.config, t, segment)
        if (next !== t) {
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
}
