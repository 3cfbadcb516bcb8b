import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { SettingsDocument } from "../../domain/settings.js"
import { modifyBody } from "../../kernel/hooks.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { withSystemPrompt, withThinkingBudget } from "./bodyPolicies.js"
import { Settings } from "./Settings.js"

/**
 * The global system prompt and thinking-budget policy as `onRequest` hooks, registered only
 * while they do something (a prompt enabled with text; a policy other than passthrough), so with
 * both off a request pays nothing. Re-registered synchronously when the settings change: the
 * next request sees the new policy.
 */
export const SettingsHooks = Layer.scopedDiscard(
  Effect.gen(function* () {
    const settings = yield* Settings
    const hooks = yield* RequestHooks
    let offSystem: (() => void) | undefined
    let offThinking: (() => void) | undefined
    let systemKey = ""
    let thinkingKey = ""

    const sync = (doc: SettingsDocument) => {
      const sys = doc.systemPrompt
      const sysOn = sys.enabled && sys.text.trim().length > 0
      const nextSystem = sysOn ? JSON.stringify(sys) : ""
      if (nextSystem !== systemKey) {
        systemKey = nextSystem
        offSystem?.()
        offSystem = undefined
        if (sysOn) {
          const skip = new Set(sys.skipKeyIds)
          offSystem = hooks.register({
            name: "settings.system-prompt",
            priority: 50,
            onRequest: (event, request) => {
              if (request.apiKeyId !== null && skip.has(request.apiKeyId)) return undefined
              const body = withSystemPrompt(event.format, event.endpoint, event.body, sys)
              return body ? modifyBody(body as Record<string, unknown>) : undefined
            }
          })
        }
      }
      const think = doc.thinkingBudget
      const nextThinking = think.mode === "passthrough" ? "" : JSON.stringify(think)
      if (nextThinking !== thinkingKey) {
        thinkingKey = nextThinking
        offThinking?.()
        offThinking = undefined
        if (think.mode !== "passthrough") {
          offThinking = hooks.register({
            name: "settings.thinking-budget",
            priority: 51,
            onRequest: (event) => {
              const body = withThinkingBudget(event.format, event.body, think)
              return body ? modifyBody(body as Record<string, unknown>) : undefined
            }
          })
        }
      }
    }

    sync(settings.current())
    const unsubscribe = settings.subscribe(sync)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribe()
        offSystem?.()
        offThinking?.()
      })
    )
  })
)
