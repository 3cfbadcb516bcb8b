import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type ApiKeyRecord, ApiKeys } from "../auth/ApiKeys.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { InferenceError } from "../../kernel/errors.js"
import type { RequestContext } from "../../kernel/request.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import type { Level } from "../../domain/teams.js"
import { Levels } from "./Levels.js"

/** One set of per-minute limits a request is counted on: the key's own, or a level's above it. */
interface Gate {
  readonly keyId: string
  readonly subjectId: string
  readonly level: Level
  readonly label: string
  readonly rpm: number | null
  readonly tpm: number | null
}

/** Limits count per minute, in fixed windows aligned to the epoch minute. */
export const RATE_WINDOW_MS = 60_000

export const DEFAULT_RPM_ENV = "GATEWAY_RATE_LIMIT_DEFAULT_RPM"
export const DEFAULT_TPM_ENV = "GATEWAY_RATE_LIMIT_DEFAULT_TPM"

/** A request's token estimate before it runs: about four bytes of the request body per token. */
export const estimateTokens = (body: Buffer | undefined): number => (body === undefined ? 0 : Math.ceil(body.length / 4))

export interface EffectiveLimits {
  readonly rpm: number | null
  readonly tpm: number | null
  /** `key`: set on the key; `auto`: RATE_LIMIT_AUTO_ENABLE's default (per field: a key's own value wins). */
  readonly rpmSource: "key" | "auto" | null
  readonly tpmSource: "key" | "auto" | null
}

export interface LimitUse {
  readonly limit: number
  readonly used: number
  readonly remaining: number
  readonly source: "key" | "auto"
}

export interface InboundKeyStatus {
  readonly apiKeyId: string
  readonly name: string
  readonly requests: LimitUse | null
  readonly tokens: LimitUse | null
  /** Seconds until the current window ends (both counters start again then). */
  readonly resetSeconds: number
}

export interface InboundConfig {
  readonly autoEnabled: boolean
  readonly defaultRpm: number
  readonly defaultTpm: number
  readonly windowSeconds: number
}

export interface InboundLimitsShape {
  /**
   * The admission of a request made with key `apiKeyId`: undefined when the key has no limit
   * (nothing to do, nothing allocated), else an effect that counts the request and its token
   * estimate, sets the RateLimit-* headers on the answer, or fails with the 429.
   */
  readonly admit: (ctx: RequestContext, apiKeyId: string) => Effect.Effect<void, InferenceError> | undefined
  /** A request's real token count (its usage row): corrects the estimate counted at admission. */
  readonly settle: (requestId: string, apiKeyId: string | null, tokens: number) => void
  readonly config: Effect.Effect<InboundConfig>
  /** Every key with a limit (its own or the automatic one), with this window's use. */
  readonly status: Effect.Effect<ReadonlyArray<InboundKeyStatus>>
}

const requestsKey = (id: string) => `inbound:${id}:requests`
const tokensKey = (id: string) => `inbound:${id}:tokens`

/**
 * Inbound rate limits per gateway key (docs/guardrails.md "Rate limits"): requests and tokens per
 * minute. Counters are the shared state's window counters (exact across processes once a Redis
 * layer provides them); limits are the key's own (`POST`/`PATCH /api/keys`, `gateway keys`), or,
 * with RATE_LIMIT_AUTO_ENABLE on, GATEWAY_RATE_LIMIT_DEFAULT_RPM / _TPM for keys without one.
 */
export class InboundLimits extends Context.Tag("gateway/InboundLimits")<InboundLimits, InboundLimitsShape>() {
  static readonly layer = Layer.effect(
    InboundLimits,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const flags = yield* FeatureFlags
      const counters = (yield* SharedState.orLocal).counters
      const levelsOption = yield* Effect.serviceOption(Levels)
      const levels = levelsOption._tag === "Some" ? levelsOption.value : undefined
      const defaultRpm = yield* Config.integer(DEFAULT_RPM_ENV).pipe(Config.withDefault(60), Effect.orDie)
      const defaultTpm = yield* Config.integer(DEFAULT_TPM_ENV).pipe(Config.withDefault(100_000), Effect.orDie)
      if (defaultRpm < 1 || defaultTpm < 1)
        return yield* Effect.dieMessage(`${DEFAULT_RPM_ENV} and ${DEFAULT_TPM_ENV} must be positive integers`)
      // Token estimates counted at admission, until the usage row says what the request used.
      const pending = new BoundedMap<
        string,
        { readonly apiKeyId: string; readonly estimate: number; readonly window: number; readonly subjects: ReadonlyArray<string> }
      >({
        maxEntries: 100_000,
        ttlMs: 30 * 60_000
      })

      const limitsOf = (rec: ApiKeyRecord, auto: boolean): EffectiveLimits => ({
        rpm: rec.rpm ?? (auto ? defaultRpm : null),
        tpm: rec.tpm ?? (auto ? defaultTpm : null),
        rpmSource: rec.rpm !== null ? "key" : auto ? "auto" : null,
        tpmSource: rec.tpm !== null ? "key" : auto ? "auto" : null
      })

      const refuse = (which: "requests" | "tokens", limit: number, resetSeconds: number, gate: Gate) =>
        new InferenceError({
          status: 429,
          kind: "rate_limit",
          code: "rate_limit_exceeded",
          message:
            gate.level === "key"
              ? `this API key's limit of ${limit} ${which} per minute is reached; try again in ${resetSeconds} s`
              : `the limit of ${limit} ${which} per minute of ${gate.label} is reached; try again in ${resetSeconds} s`,
          headers: { "retry-after": String(resetSeconds) },
          level: gate.level
        })

      /**
       * Counts the request on each gate (the key's own limits, then each level's above it), in
       * order; a gate that refuses takes back what the gates before it counted. The RateLimit
       * headers describe the first gate (the key's own when it has limits).
       */
      const run = (ctx: RequestContext, gates: ReadonlyArray<Gate>) =>
        Effect.gen(function* () {
          const now = Date.now()
          const window = Math.floor(now / RATE_WINDOW_MS)
          const resetSeconds = Math.max(1, Math.ceil(((window + 1) * RATE_WINDOW_MS - now) / 1000))
          const h = ctx.responseHeaders
          const undo: Array<Effect.Effect<unknown>> = []
          const takeBack = Effect.suspend(() => Effect.all(undo.splice(0), { discard: true }))
          let estimate: number | undefined
          for (let g = 0; g < gates.length; g++) {
            const gate = gates[g]!
            const first = g === 0
            let requests: number | undefined
            if (gate.rpm !== null) {
              requests = yield* counters.add(requestsKey(gate.subjectId), 1, RATE_WINDOW_MS, now)
              if (first) {
                h["x-ratelimit-limit-requests"] = String(gate.rpm)
                h["x-ratelimit-remaining-requests"] = String(Math.max(0, gate.rpm - Math.min(requests, gate.rpm)))
              }
              if (requests > gate.rpm) {
                // A refused request does not count.
                yield* counters.add(requestsKey(gate.subjectId), -1, RATE_WINDOW_MS, now)
                yield* takeBack
                h["x-ratelimit-remaining-requests"] = "0"
                setIetf(h, gate.rpm, 0, resetSeconds)
                return yield* refuse("requests", gate.rpm, resetSeconds, gate)
              }
              undo.push(counters.add(requestsKey(gate.subjectId), -1, RATE_WINDOW_MS, now))
            }
            let tokensUsed: number | undefined
            if (gate.tpm !== null) {
              if (ctx.method === "POST" && ctx.body === undefined) ctx.body = yield* ctx.transport.readBody(ctx)
              const est = (estimate ??= estimateTokens(ctx.body))
              // Added first and taken back when refused (as requests are): exact when processes race on shared counters.
              const after =
                est > 0
                  ? yield* counters.add(tokensKey(gate.subjectId), est, RATE_WINDOW_MS, now)
                  : yield* counters.get(tokensKey(gate.subjectId), RATE_WINDOW_MS, now)
              const used = after - est
              if (first) h["x-ratelimit-limit-tokens"] = String(gate.tpm)
              // The window's first request runs whatever its size; after it, one whose estimate does not fit waits.
              if (used >= gate.tpm || (used > 0 && used + est > gate.tpm)) {
                if (est > 0) yield* counters.add(tokensKey(gate.subjectId), -est, RATE_WINDOW_MS, now)
                if (requests !== undefined) {
                  yield* counters.add(requestsKey(gate.subjectId), -1, RATE_WINDOW_MS, now)
                  undo.pop()
                }
                yield* takeBack
                h["x-ratelimit-remaining-tokens"] = String(Math.max(0, gate.tpm - used))
                setIetf(h, gate.tpm, 0, resetSeconds)
                return yield* refuse("tokens", gate.tpm, resetSeconds, gate)
              }
              tokensUsed = after
              if (est > 0) {
                undo.push(counters.add(tokensKey(gate.subjectId), -est, RATE_WINDOW_MS, now))
                const p = pending.get(ctx.requestId)
                pending.set(
                  ctx.requestId,
                  { apiKeyId: p?.apiKeyId ?? gates[0]!.keyId, estimate: est, window, subjects: [...(p?.subjects ?? []), gate.subjectId] },
                  now
                )
              }
              if (first) h["x-ratelimit-remaining-tokens"] = String(Math.max(0, gate.tpm - tokensUsed))
            }
            // The IETF fields describe the request limit when the first gate has one, else its token limit.
            if (first) {
              if (gate.rpm !== null) setIetf(h, gate.rpm, Math.max(0, gate.rpm - requests!), resetSeconds)
              else setIetf(h, gate.tpm!, Math.max(0, gate.tpm! - tokensUsed!), resetSeconds)
            }
          }
        })

      const admitWith = (ctx: RequestContext, id: string, rec: ApiKeyRecord | undefined, auto: boolean) => {
        if (rec === undefined) return undefined
        // The levels above the key (its user, team(s), the organisation): [] at once while none has a rate limit.
        const above = levels === undefined ? [] : levels.ratesAbove(id)
        if (rec.rpm === null && rec.tpm === null && !auto && above.length === 0) return undefined
        const gates: Array<Gate> = []
        const own = limitsOf(rec, auto)
        if (own.rpm !== null || own.tpm !== null)
          gates.push({ keyId: id, subjectId: id, level: "key", label: "this API key", rpm: own.rpm, tpm: own.tpm })
        for (const a of above) gates.push({ keyId: id, subjectId: a.subjectId, level: a.level, label: a.label, rpm: a.rpm, tpm: a.tpm })
        return run(ctx, gates)
      }

      const admit: InboundLimitsShape["admit"] = (ctx, id) => {
        // The usual case: keys and flags fresh in memory, decided without an effect.
        const auto = flags.peekEnabled("RATE_LIMIT_AUTO_ENABLE")
        const rec = keys.peekById(id)
        if (auto !== undefined && rec !== undefined) return admitWith(ctx, id, rec, auto)
        return Effect.flatMap(
          Effect.zip(keys.byId(id), flags.enabled("RATE_LIMIT_AUTO_ENABLE")),
          ([r, a]) => admitWith(ctx, id, r, a) ?? Effect.void
        )
      }

      const settle: InboundLimitsShape["settle"] = (requestId, apiKeyId, tokens) => {
        const p = pending.get(requestId)
        if (p === undefined || p.apiKeyId !== apiKeyId) return
        pending.delete(requestId)
        const now = Date.now()
        const sameWindow = Math.floor(now / RATE_WINDOW_MS) === p.window
        // Within the window, the estimate is replaced by the real count; after it, tokens beyond the
        // estimate are charged to the window they were spent in (a refund of a past window is moot).
        const delta = sameWindow ? tokens - p.estimate : Math.max(0, tokens - p.estimate)
        if (delta !== 0) for (const subject of p.subjects) Effect.runFork(counters.add(tokensKey(subject), delta, RATE_WINDOW_MS, now))
      }

      const config = Effect.map(
        flags.enabled("RATE_LIMIT_AUTO_ENABLE"),
        (autoEnabled): InboundConfig => ({ autoEnabled, defaultRpm, defaultTpm, windowSeconds: RATE_WINDOW_MS / 1000 })
      )

      const status = Effect.gen(function* () {
        const auto = yield* flags.enabled("RATE_LIMIT_AUTO_ENABLE")
        const now = Date.now()
        const window = Math.floor(now / RATE_WINDOW_MS)
        const resetSeconds = Math.max(1, Math.ceil(((window + 1) * RATE_WINDOW_MS - now) / 1000))
        const out: Array<InboundKeyStatus> = []
        for (const view of yield* keys.list) {
          const rec = yield* keys.byId(view.id)
          if (rec === undefined || !rec.enabled) continue
          const l = limitsOf(rec, auto)
          if (l.rpm === null && l.tpm === null) continue
          const use = (limit: number | null, source: "key" | "auto" | null, used: number): LimitUse | null =>
            limit === null ? null : { limit, used, remaining: Math.max(0, limit - used), source: source! }
          out.push({
            apiKeyId: rec.id,
            name: rec.name,
            requests: use(l.rpm, l.rpmSource, l.rpm === null ? 0 : yield* counters.get(requestsKey(rec.id), RATE_WINDOW_MS, now)),
            tokens: use(l.tpm, l.tpmSource, l.tpm === null ? 0 : yield* counters.get(tokensKey(rec.id), RATE_WINDOW_MS, now)),
            resetSeconds
          })
        }
        return out
      })

      return { admit, settle, config, status }
    })
  )
}

/** The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers): limit, remaining, seconds to reset. */
const setIetf = (h: Record<string, string>, limit: number, remaining: number, reset: number) => {
  h["ratelimit-limit"] = String(limit)
  h["ratelimit-remaining"] = String(remaining)
  h["ratelimit-reset"] = String(reset)
}
