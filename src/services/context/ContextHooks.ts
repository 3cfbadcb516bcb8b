import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { HookRequest, HookReturn, HookVerdict, ModelSelectEvent } from "../../kernel/hookEvents.js"
import type { CompressionSettings, SettingsDocument } from "../../domain/settings.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { Settings } from "../../platform/settings/Settings.js"
import { withSystemPrompt } from "../../platform/settings/bodyPolicies.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { Compression } from "./Compression.js"
import { type ContextSnapshot, ContextStore } from "./ContextStore.js"
import { approximateTokens } from "./estimate.js"
import { headerValue, select, type Selection } from "./select.js"
import { segmentsOf } from "./walk.js"

const HEADER = "x-gateway-compression"
const NO_MEMORY = "x-gateway-no-memory"
/** The verdicts of a request nothing is done to, made once. */
const OFF_GLOBAL: HookVerdict = { headers: { [HEADER]: "off; source=off" } }
const OFF_DEFAULT: HookVerdict = { headers: { [HEADER]: "off; source=default" } }

/** `*` matches any run of characters; the rest literally, without case. */
const globMatch = (pattern: string, value: string) => {
  if (!pattern.includes("*")) return pattern.toLowerCase() === value.toLowerCase()
  const re = new RegExp(
    `^${pattern
      .split("*")
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
    "i"
  )
  return re.test(value)
}

/**
 * What memory entries and skills a request gets, in a fixed order (global, then the key's, then
 * the session's entries, each oldest first; then skills oldest first) within the token budget, as
 * one text appended to the system prompt. The same conversation gets the same text on every turn
 * (a keyword skill, once a user turn named it, stays), so prompt caches still hit.
 */
export const injectionText = (
  snap: ContextSnapshot,
  budget: number,
  who: {
    readonly apiKeyId: string | null
    readonly session: string | undefined
    readonly models: ReadonlyArray<string>
    readonly userText: () => string
  }
): { readonly text: string; readonly memoryTokens: number; readonly skillTokens: number } | undefined => {
  if (budget <= 0 || (snap.memory.length === 0 && snap.skills.length === 0)) return undefined
  const entries = [
    ...snap.memory.filter((m) => m.scope === "global"),
    ...snap.memory.filter((m) => m.scope === "key" && who.apiKeyId !== null && m.scopeId === who.apiKeyId),
    ...snap.memory.filter((m) => m.scope === "session" && who.session !== undefined && m.scopeId === who.session)
  ]
  let left = budget
  const memory: Array<string> = []
  let memoryTokens = 0
  for (const m of entries) {
    if (m.tokens > left) continue
    memory.push(`- ${m.text.trim().replace(/\n/g, "\n  ")}`)
    left -= m.tokens
    memoryTokens += m.tokens
  }
  let userText: string | undefined
  const skills: Array<string> = []
  let skillTokens = 0
  for (const s of snap.skills) {
    const t = s.trigger
    let on = t.always || t.models.some((p) => who.models.some((m) => globMatch(p, m)))
    if (!on && t.keywords.length > 0) {
      userText ??= who.userText().toLowerCase()
      on = t.keywords.some((k) => userText!.includes(k.toLowerCase()))
    }
    if (!on || s.tokens > left) continue
    skills.push(`<skill name="${s.name.replace(/"/g, "'")}">\n${s.text.trim()}\n</skill>`)
    left -= s.tokens
    skillTokens += s.tokens
  }
  if (memory.length === 0 && skills.length === 0) return undefined
  const parts: Array<string> = []
  if (memory.length > 0) parts.push(`<memory>\nWhat the operator asked you to remember:\n${memory.join("\n")}\n</memory>`)
  if (skills.length > 0) parts.push(`<skills>\n${skills.join("\n")}\n</skills>`)
  return { text: parts.join("\n\n"), memoryTokens, skillTokens }
}

/**
 * Compression and context injection on the request path, as one `onModelSelect` hook (the
 * target is known: its assignment, its context window, its price): the selection of
 * select.ts, the engines run over the body in the client's wire format, memory and skills
 * appended to the system prompt, the `X-Gateway-Compression` header, the savings counted.
 * With compression and injection off, a request gets a verdict made once.
 */
export const ContextHooks = Layer.scopedDiscard(
  Effect.gen(function* () {
    const hooks = yield* RequestHooks
    const settings = yield* Settings
    const store = yield* ContextStore
    const compression = yield* Compression
    const connections = yield* Connections

    const windowOf = (event: ModelSelectEvent): number | undefined => {
      const t = event.target
      if (!t) return undefined
      const c = connections.peekList()?.find((x) => x.name === t.connection)
      const w = c?.provider.models.find((m) => m.id === t.model)?.contextWindow
      return w && w > 0 ? w : undefined
    }

    const decide = (snap: ContextSnapshot, event: ModelSelectEvent, request: HookRequest): HookVerdict | Effect.Effect<HookVerdict> => {
      const s = settings.current().compression
      const header = request.headers[HEADER]
      const noMemory =
        String(request.headers[NO_MEMORY] ?? "")
          .trim()
          .toLowerCase() === "true"
      const targets = event.target ? [`${event.target.provider}/${event.target.model}`, event.target.key] : []
      const fmt = event.format
      const endpoint = event.endpoint
      const sel = select({
        settings: s,
        snapshot: snap,
        header: Array.isArray(header) ? header[0] : header,
        requested: event.model,
        targets,
        available: compression.available,
        size: () => ({ tokens: approximateTokens(fmt, endpoint, event.body), window: windowOf(event) })
      })
      // A summarize step in `wait` mode waits (bounded) for its summary first.
      if (sel.profile && sel.profile.steps.some((x) => x.engine === "summarize")) {
        return Effect.as(compression.prepare(fmt, endpoint, event.body, sel.profile.steps, request.apiKeyId), undefined).pipe(
          Effect.map(() => finish(snap, event, request, sel, s, noMemory, targets))
        )
      }
      return finish(snap, event, request, sel, s, noMemory, targets)
    }

    const finish = (
      snap: ContextSnapshot,
      event: ModelSelectEvent,
      request: HookRequest,
      sel: Selection,
      s: CompressionSettings,
      noMemory: boolean,
      targets: ReadonlyArray<string>
    ): HookVerdict => {
      const fmt = event.format
      const endpoint = event.endpoint
      let body: Record<string, unknown> | undefined
      if (sel.profile) {
        const applied = compression.apply(fmt, endpoint, event.body, sel.profile.steps, request.apiKeyId)
        body = applied.body
        if (applied.engines.length > 0) {
          compression.record({
            combo: sel.profile.combo,
            model: event.model,
            engines: applied.engines,
            provider: event.target?.provider,
            upstreamModel: event.target?.model
          })
        }
      }
      if (!noMemory) {
        const session = request.headers["x-session-id"] ?? request.headers["x_session_id"]
        const current = body ?? event.body
        const inj = injectionText(snap, s.injectionMaxTokens, {
          apiKeyId: request.apiKeyId,
          session: Array.isArray(session) ? session[0] : session,
          models: [event.model, ...targets],
          userText: () =>
            segmentsOf(fmt, endpoint, current)
              .filter((x) => x.segment.role === "user")
              .map((x) => x.text)
              .join("\n")
        })
        if (inj) {
          const withText = withSystemPrompt(fmt, endpoint, current, { enabled: true, text: inj.text, position: "append", skipKeyIds: [] })
          if (withText) {
            body = withText as Record<string, unknown>
            if (inj.memoryTokens > 0)
              compression.record({ combo: "-", model: event.model, engines: [], injected: { kind: "memory", tokens: inj.memoryTokens } })
            if (inj.skillTokens > 0)
              compression.record({ combo: "-", model: event.model, engines: [], injected: { kind: "skills", tokens: inj.skillTokens } })
          }
        }
      }
      const headers = !s.enabled
        ? OFF_GLOBAL.headers
        : sel.profile === undefined && sel.source === "default"
          ? OFF_DEFAULT.headers
          : { [HEADER]: headerValue(sel) }
      return body ? { body, headers } : { headers }
    }

    const hook = {
      name: "context.compression",
      // After the system prompt and the thinking-budget policies (onRequest): the prompt is final here.
      priority: 60,
      onModelSelect: (event: ModelSelectEvent, request: HookRequest): HookReturn | Effect.Effect<HookReturn> => {
        const s = settings.current().compression
        const snap = store.peek()
        if (snap === undefined)
          return Effect.flatMap(store.snapshot, (fresh) => {
            const d = decide(fresh, event, request)
            return Effect.isEffect(d) ? d : Effect.succeed(d)
          })
        const injecting = s.injectionMaxTokens > 0 && (snap.memory.length > 0 || snap.skills.length > 0)
        // Nothing to do for this request: the verdict made once.
        if (!s.enabled && !injecting) return OFF_GLOBAL
        if (
          s.enabled &&
          !injecting &&
          request.headers[HEADER] === undefined &&
          snap.routingCombos.size === 0 &&
          snap.models.size === 0 &&
          !s.activeProfile &&
          !s.autoTrigger.enabled &&
          !s.compressByDefault
        ) {
          return OFF_DEFAULT
        }
        return decide(snap, event, request)
      }
    }
    // Registered while compression is on or injection may add something: off and with no budget, a request pays nothing.
    let off: (() => void) | undefined
    const sync = (doc: SettingsDocument) => {
      const on = doc.compression.enabled || doc.compression.injectionMaxTokens > 0
      if (on && !off) off = hooks.register(hook)
      else if (!on && off) {
        off()
        off = undefined
      }
    }
    sync(settings.current())
    const unsubscribe = settings.subscribe(sync)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribe()
        off?.()
      })
    )
  })
)
