/**
 * The request and answer guardrails as one lifecycle hook, attached only when a flag is on; every action is published
 * as `guardrail.action`, never with the matched text (docs/guardrails.md#where-they-run).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { EventBus, type EventBusShape } from "../../platform/events/EventBus.js"
import { FeatureFlags, type FeatureFlagsShape } from "../../platform/flags/FeatureFlags.js"
import { isTruthy } from "../../platform/flags/catalog.js"
import type { FormatId } from "../../domain/canonical.js"
import { attach, blockRequest, GuardFailure, type HookHost, type HookVerdict, type RequestEvent } from "../../kernel/hooks.js"
import { answerRewrite, GUARDRAIL_HEADER, type ResponseMode } from "./answers.js"
import { findPii, mayHavePii, type PiiKind, PlaceholderMap, replacePii } from "./pii.js"
import { INJECTION_RULES, type InjectionRule, RULESET_VERSION } from "./rules/injection.js"
import { sanitizeText } from "./sanitize.js"
import { type Path, setPaths, type Visitor, WALKERS } from "./walkers.js"

export type InjectionMode = "off" | "warn" | "block" | "redact"

/** The guardrail flags as one request sees them. */
export interface GuardrailSettings {
  readonly sanitizer: boolean
  readonly injection: InjectionMode
  readonly pii: boolean
  /** Response sanitization: undefined when `PII_RESPONSE_SANITIZATION` is off or its mode is `off`. */
  readonly response: ResponseMode | undefined
}

/** Runs before plugins at the default priority (100): they see the body as it goes upstream. */
export const GUARDRAILS_PRIORITY = 0
export const GUARDRAILS_HOOK = "gateway.guardrails"

const settingsFrom = (sanitizer: string, injection: string, pii: string, response: string, responseMode: string): GuardrailSettings => ({
  sanitizer: isTruthy(sanitizer),
  injection: injection === "warn" || injection === "block" || injection === "redact" ? injection : "off",
  pii: isTruthy(pii),
  response:
    isTruthy(response) && (responseMode === "redact" || responseMode === "warn" || responseMode === "block") ? responseMode : undefined
})

const settingsOf = (v: (key: Parameters<FeatureFlagsShape["value"]>[0]) => string): GuardrailSettings =>
  settingsFrom(
    v("INPUT_SANITIZER_ENABLED"),
    v("INJECTION_GUARD_MODE"),
    v("PII_REDACTION_ENABLED"),
    v("PII_RESPONSE_SANITIZATION"),
    v("PII_RESPONSE_SANITIZATION_MODE")
  )

/**
 * The settings of the flags in memory, or undefined when they are not known fresh. Every request
 * asks (the screen and `attach`), and the flags rarely change: the settings are made again only
 * when one of the five values differs from the last ones seen.
 */
const peekSettings = (flags: FeatureFlagsShape): (() => GuardrailSettings | undefined) => {
  let last: { readonly values: ReadonlyArray<string>; readonly settings: GuardrailSettings } | undefined
  return () => {
    const sanitizer = flags.peekValue("INPUT_SANITIZER_ENABLED")
    if (sanitizer === undefined) return undefined
    const injection = flags.peekValue("INJECTION_GUARD_MODE") ?? ""
    const pii = flags.peekValue("PII_REDACTION_ENABLED") ?? ""
    const response = flags.peekValue("PII_RESPONSE_SANITIZATION") ?? ""
    const responseMode = flags.peekValue("PII_RESPONSE_SANITIZATION_MODE") ?? ""
    const v = last?.values
    if (v !== undefined && v[0] === sanitizer && v[1] === injection && v[2] === pii && v[3] === response && v[4] === responseMode)
      return last!.settings
    last = {
      values: [sanitizer, injection, pii, response, responseMode],
      settings: settingsFrom(sanitizer, injection, pii, response, responseMode)
    }
    return last.settings
  }
}

const anyOn = (s: GuardrailSettings): boolean => s.sanitizer || s.injection !== "off" || s.pii || s.response !== undefined

/** The rules with the `g` flag, for redaction. */
const GLOBAL = new Map<InjectionRule, RegExp>(
  INJECTION_RULES.map((r) => [r, new RegExp(r.pattern.source, r.pattern.flags.includes("g") ? r.pattern.flags : r.pattern.flags + "g")])
)

export interface RequestVerdict {
  /** The body to send instead (undefined: unchanged). */
  readonly body: Record<string, unknown> | undefined
  /** Injection rules that matched, in rule order. */
  readonly injections: ReadonlyArray<InjectionRule>
  /** The request's placeholders (empty when nothing was redacted). */
  readonly placeholders: PlaceholderMap
  /** Text slots the sanitizer changed. */
  readonly sanitized: number
}

/** The guardrails' names in refusals and logs (docs/guardrails.md). */
export const GUARDRAIL_NAMES = {
  read: "guardrails' request reader",
  sanitizer: "input sanitizer",
  injection: "prompt-injection guard",
  pii: "PII redaction",
  response: "response sanitization"
} as const

/** Runs one guardrail's step; what it throws names that guardrail (the hook fails closed with it). */
const step = <A>(part: keyof typeof GUARDRAIL_NAMES, f: () => A): A => {
  try {
    return f()
  } catch (e) {
    throw new GuardFailure(GUARDRAIL_NAMES[part], e)
  }
}

/**
 * The request side on one body: sanitizer, injection guard, PII redaction, in that order. Pure;
 * a step that throws throws a `GuardFailure` naming its guardrail.
 */
export const guardRequest = (settings: GuardrailSettings, format: FormatId, body: Record<string, unknown>): RequestVerdict => {
  const slots = step("read", () => WALKERS[format].request(body))
  const changes: Array<readonly [Path, string]> = []
  const injections = new Set<InjectionRule>()
  const placeholders = new PlaceholderMap()
  let sanitized = 0
  for (const slot of slots) {
    let t = slot.text
    if (settings.sanitizer) {
      const s = step("sanitizer", () => sanitizeText(t))
      if (s !== t) sanitized++
      t = s
    }
    const role = slot.role
    if (settings.injection !== "off" && (role === "user" || role === "tool") && slot.json !== true) {
      t = step("injection", () => {
        let u = t
        for (const rule of INJECTION_RULES) {
          if (!rule.appliesTo.includes(role) || !rule.pattern.test(u)) continue
          injections.add(rule)
          if (settings.injection === "redact") u = u.replace(GLOBAL.get(rule)!, "")
        }
        return u
      })
    }
    if (settings.pii) t = step("pii", () => replacePii(t, (kind, value) => placeholders.placeholder(kind, value)))
    if (t !== slot.text) changes.push([slot.path, t])
  }
  return {
    body: changes.length === 0 ? undefined : step("read", () => setPaths(body, changes)),
    injections: INJECTION_RULES.filter((r) => injections.has(r)),
    placeholders,
    sanitized
  }
}

/**
 * Whether `guardRequest` with these settings would do anything to `body` (rewrite it, count a
 * sanitized slot, match an injection rule or make a placeholder), without doing it: the request's
 * text slots are tested where they are and the walk stops at the first one a guardrail would
 * touch, so a request they leave alone (the common case) allocates nothing. Throws where
 * `guardRequest` would (a caller treats that as "touched": the hook fails closed).
 */
export const touchesRequest = (settings: GuardrailSettings, format: FormatId, body: Record<string, unknown>): boolean =>
  WALKERS[format].scanRequest(body, touchingVisitor(settings))

/** The screen's visitor for one settings object (made once: settings are cached per flag values). */
const touchingVisitors = new WeakMap<GuardrailSettings, Visitor>()

const touchingVisitor = (settings: GuardrailSettings): Visitor => {
  const known = touchingVisitors.get(settings)
  if (known !== undefined) return known
  const { sanitizer, pii } = settings
  const injection = settings.injection !== "off"
  // The same tests as `guardRequest`, slot by slot: a slot the sanitizer leaves alone goes to the
  // injection guard unchanged, and one no rule matches goes to PII redaction unchanged.
  const visitor: Visitor = (text, role, json) => {
    if (sanitizer && sanitizeText(text) !== text) return true
    if (injection && (role === "user" || role === "tool") && !json)
      for (const rule of INJECTION_RULES) if (rule.appliesTo.includes(role) && rule.pattern.test(text)) return true
    return pii && mayHavePii(text) && findPii(text).length !== 0
  }
  touchingVisitors.set(settings, visitor)
  return visitor
}

export interface GuardrailsShape {
  /**
   * Attaches the guardrails to one pipeline request when any of their flags is on; nothing when
   * all are off. An Effect only when the flags must be read from the database first (rare).
   */
  readonly attach: (host: HookHost) => Effect.Effect<void> | undefined
  /**
   * Whether the guardrails would act on this request (rewrite, block, flag or watch its answer),
   * from the flags in memory and without acting: undefined when the flags are not known fresh.
   * A request they would leave alone (every guardrail off, or the sanitizer on and nothing to
   * sanitize) is served the same with or without their hook (the common path skips it).
   */
  readonly screenNow: (format: FormatId, body: Record<string, unknown>) => boolean | undefined
  /** The flags now. */
  readonly settings: Effect.Effect<GuardrailSettings>
}

const hookFor =
  (bus: EventBusShape, host: HookHost, settings: GuardrailSettings) =>
  (event: RequestEvent): HookVerdict | undefined => {
    const base = { endpoint: event.endpoint, format: event.format, apiKeyId: host.apiKeyId, requestId: host.requestId }
    const publish = (data: Record<string, unknown>) => bus.publish("guardrail.action", { ...data, ...base })
    const verdict = guardRequest(settings, event.format, event.body)
    if (verdict.sanitized !== 0)
      publish({ guardrail: "input-sanitizer", rule: "sanitizer", mode: "on", action: "sanitized", count: verdict.sanitized })
    const action = settings.injection === "block" ? "blocked" : settings.injection === "redact" ? "redacted" : "warned"
    for (const rule of verdict.injections)
      publish({
        guardrail: "injection",
        rule: rule.id,
        ruleVersion: rule.version,
        ruleset: RULESET_VERSION,
        mode: settings.injection,
        action
      })
    const header = verdict.injections.map((r) => `injection:${r.id}`).join(", ")
    if (verdict.injections.length !== 0 && settings.injection === "block") {
      const rule = verdict.injections[0]!
      return blockRequest({
        status: 400,
        message: `the request was blocked by the gateway's prompt-injection guard (rule ${rule.id}, v${rule.version}: ${rule.description})`,
        headers: { [GUARDRAIL_HEADER]: header }
      })
    }
    for (const [kind, count] of verdict.placeholders.kinds)
      publish({ guardrail: "pii", rule: `pii:${kind.toLowerCase()}`, mode: "redact", action: "redacted", count })
    const warnHeader = settings.injection === "warn" && header !== "" ? { [GUARDRAIL_HEADER]: header } : undefined
    const restore = verdict.placeholders.size !== 0 ? verdict.placeholders : undefined
    const rewrite =
      restore !== undefined || settings.response !== undefined || warnHeader !== undefined
        ? step("response", () =>
            answerRewrite({
              format: event.format,
              model: event.model,
              requestId: host.requestId,
              restore,
              sanitize: settings.response,
              headers: warnHeader,
              found: (kind: PiiKind, mode: ResponseMode) =>
                publish({
                  guardrail: "pii-response",
                  rule: `pii:${kind.toLowerCase()}`,
                  mode,
                  action: mode === "block" ? "blocked" : mode === "redact" ? "redacted" : "warned"
                })
            })
          )
        : undefined
    if (verdict.body === undefined && rewrite === undefined) return undefined
    return { ...(verdict.body ? { body: verdict.body } : {}), ...(rewrite ? { rewrite } : {}) }
  }

export class Guardrails extends Context.Tag("gateway/Guardrails")<Guardrails, GuardrailsShape>() {
  static readonly layer = Layer.effect(
    Guardrails,
    Effect.gen(function* () {
      const flags = yield* FeatureFlags
      const bus = yield* EventBus
      const settings = Effect.gen(function* () {
        const values = new Map<string, string>()
        for (const key of [
          "INPUT_SANITIZER_ENABLED",
          "INJECTION_GUARD_MODE",
          "PII_REDACTION_ENABLED",
          "PII_RESPONSE_SANITIZATION",
          "PII_RESPONSE_SANITIZATION_MODE"
        ] as const)
          values.set(key, yield* flags.value(key))
        return settingsOf((k) => values.get(k) ?? "")
      })
      const attachWith = (host: HookHost, s: GuardrailSettings): void => {
        if (!anyOn(s)) return
        // Fail closed: a request the guardrails could not look at does not go upstream (503
        // guardrail_unavailable, naming the guardrail that failed; hooks.ts).
        attach(host, { name: GUARDRAILS_HOOK, priority: GUARDRAILS_PRIORITY, failClosed: true, onRequest: hookFor(bus, host, s) })
      }
      const peek = peekSettings(flags)
      return {
        attach: (host) => {
          const s = peek()
          if (s === undefined) return Effect.map(settings, (s) => attachWith(host, s))
          attachWith(host, s)
          return undefined
        },
        screenNow: (format, body) => {
          const s = peek()
          if (s === undefined) return undefined
          if (!anyOn(s)) return false
          // Response sanitization rewrites every answer.
          if (s.response !== undefined) return true
          try {
            return touchesRequest(s, format, body)
          } catch {
            // A body the guardrails cannot read fails closed in their hook.
            return true
          }
        },
        settings
      }
    })
  )
}
